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
	moves := Consolidate(st, Decisions{}, []Drain{{Node: 1}, {Node: 2}}, Config{})
	if len(moves) != 1 || moves[0].Unit.Job.ID != "s0" || moves[0].To[0].Node != 0 {
		t.Fatalf("moves %+v, want s0 from sparse onto busy", moves)
	}
	// With no room elsewhere nothing moves, and nothing is half-drained.
	st.Running = append(st.Running, run("b2", 0, 2, true), run("b3", 0, 3, true), run("s1", 1, 1, true), run("s2", 1, 2, true),
		run("k1", 2, 1, false), run("k2", 2, 2, false), run("k3", 2, 3, false))
	if moves := Consolidate(st, Decisions{}, []Drain{{Node: 1}, {Node: 2}}, Config{}); len(moves) != 0 {
		t.Fatalf("moves %+v with no room", moves)
	}
}

// TestConsolidateOntoPaid: a drain onto paid time moves its units only
// onto committed nodes paid past each unit's estimated end, and the node
// stays whole when one unit has nowhere to go.
func TestConsolidateOntoPaid(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	mk := func(id string, committed bool) core.Node {
		n := core.Node{LeaseID: id, GPUModel: "V100", GPUMemMiB: 32768, Committed: committed}
		for g := 0; g < 2; g++ {
			n.GPUs = append(n.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: 32768})
		}
		return n
	}
	type run struct {
		id  string
		est time.Duration // from the start, an hour ago
	}
	build := func(paidUntil []time.Time, runs ...run) *State {
		nodes := []core.Node{mk("daily", true), mk("on-demand", false), mk("month-short", true), mk("month-long", true)}
		st := &State{Now: now, Nodes: nodes, NodePaidUntil: paidUntil}
		for i, r := range runs {
			a := Allocation{Unit: Unit{Job: &core.Job{ID: r.id, Team: "t", Tier: core.TierRegular, Interruptible: true, EstDuration: r.est,
				Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}}}, Parts: []Part{{Node: 0, GPUs: []int{i}}}, Start: now.Add(-time.Hour)}
			apply(nodes, &a.Unit, a.Parts[0], 1)
			st.Running = append(st.Running, a)
		}
		return st
	}
	day := 24 * time.Hour
	paid := []time.Time{now.Add(20 * time.Minute), {}, now.Add(2 * day), now.Add(9 * day)}
	drain := []Drain{{Node: 0, OntoPaid: true}}

	// Both units end within the long month's paid time, one within the
	// short one's: they go onto committed nodes, never the on-demand one.
	st := build(paid, run{"short", 1 * day}, run{"long", 8 * day})
	moves := Consolidate(st, Decisions{}, drain, Config{})
	if len(moves) != 2 {
		t.Fatalf("moves %+v, want both units moved", moves)
	}
	for _, m := range moves {
		to := st.Nodes[m.To[0].Node].LeaseID
		if to == "on-demand" || to == "daily" || m.Unit.Job.ID == "long" && to != "month-long" {
			t.Errorf("%s moved onto %s", m.Unit.Job.ID, to)
		}
	}
	// Without the drain's restriction the on-demand node is a destination
	// too: the restriction is what keeps it out.
	free := Consolidate(build(paid, run{"a", 20 * day}, run{"b", 20 * day}), Decisions{}, []Drain{{Node: 0}}, Config{})
	if len(free) != 2 {
		t.Fatalf("unrestricted drain moved %+v, want both units", free)
	}
	// A unit that outlasts every paid term keeps the node whole.
	if moves := Consolidate(build(paid, run{"short", 1 * day}, run{"longest", 20 * day}), Decisions{}, drain, Config{}); len(moves) != 0 {
		t.Fatalf("moves %+v, want none: longest has no paid time to go to", moves)
	}
}
