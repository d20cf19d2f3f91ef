package sched

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestConsolidate(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	mk := func(id string) core.Node {
		n := core.Node{LeaseID: id, GPUModel: "A100", GPUMemMiB: 81920}
		for g := 0; g < 4; g++ {
			n.GPUs = append(n.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: 81920})
		}
		return n
	}
	nodes := []core.Node{mk("busy"), mk("sparse"), mk("stuck")}
	run := func(id string, node int, gpu int, interruptible bool) Allocation {
		a := Allocation{Unit: Unit{Job: &core.Job{ID: id, Team: "t", Tier: core.TierOffline, Interruptible: interruptible, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}}},
			Parts: []Part{{Node: node, GPUs: []int{gpu}}}, Start: now.Add(-time.Hour)}
		apply(nodes, &a.Unit, a.Parts[0], 1)
		return a
	}
	st := &State{Now: now, Nodes: nodes, Running: []Allocation{
		run("b0", 0, 0, true), run("b1", 0, 1, true),
		run("s0", 1, 0, true),
		run("k0", 2, 0, false),
	}}
	moves := Consolidate(st, Decisions{}, []int{1, 2}, Config{})
	if len(moves) != 1 || moves[0].Unit.Job.ID != "s0" || moves[0].To[0].Node != 0 {
		t.Fatalf("moves %+v, want s0 from sparse onto busy", moves)
	}
	// With no room elsewhere nothing moves, and nothing is half-drained.
	st.Running = append(st.Running, run("b2", 0, 2, true), run("b3", 0, 3, true), run("s1", 1, 1, true), run("s2", 1, 2, true),
		run("k1", 2, 1, false), run("k2", 2, 2, false), run("k3", 2, 3, false))
	if moves := Consolidate(st, Decisions{}, []int{1, 2}, Config{}); len(moves) != 0 {
		t.Fatalf("moves %+v with no room", moves)
	}
}
