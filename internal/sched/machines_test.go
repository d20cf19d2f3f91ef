package sched

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A job one rentable machine holds whole runs on one machine: with only
// 4-GPU nodes up and 8-GPU machines in the catalog, an 8-GPU job waits
// for one instead of spreading over two nodes. A gang larger than every
// machine still spans, and without the catalog's shapes the nodes alone
// decide, as before.
func TestSingleMachineRule(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	mk := func(id string) core.Node {
		n := core.Node{LeaseID: id, GPUModel: "A100", GPUMemMiB: 81920}
		for g := range 4 {
			n.GPUs = append(n.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: 81920})
		}
		return n
	}
	job := func(gpus int) Unit {
		return Unit{Job: &core.Job{ID: "j", Team: "t", Tier: core.TierCore, Submit: now, EstDuration: time.Hour, Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU}}}
	}
	eight := MachineShapes{{Hardware: core.Hardware{GPUModel: "A100", MemPerGPUMiB: 81920}, GPUs: 4}, {Hardware: core.Hardware{GPUModel: "A100", MemPerGPUMiB: 81920}, GPUs: 8}}
	for _, tc := range []struct {
		name     string
		machines MachineShapes
		gpus     int
		spans    bool
	}{
		{"8 GPUs, 8-GPU machines exist: waits for one", eight, 8, false},
		{"8 GPUs, nodes alone decide: spans", nil, 8, true},
		{"8 GPUs, 4-GPU machines only: spans", MachineShapes{{Hardware: core.Hardware{GPUModel: "A100"}, GPUs: 4}}, 8, true},
		{"16 GPUs, larger than every machine: spans", eight, 16, true},
	} {
		nodes := []core.Node{mk("a"), mk("b"), mk("c"), mk("d")}
		d := Schedule(&State{Now: now, Nodes: nodes, Pending: []Unit{job(tc.gpus)}, Machines: tc.machines}, Config{})
		if spans := len(d.Placements) == 1 && len(d.Placements[0].Parts) > 1; spans != tc.spans {
			t.Errorf("%s: placements %+v, waiting %+v; want spanning %v", tc.name, d.Placements, d.Waiting, tc.spans)
		}
		if !tc.spans && len(d.Waiting) != 1 {
			t.Errorf("%s: want the job waiting, got %+v", tc.name, d)
		}
	}
}
