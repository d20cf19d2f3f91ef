package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A unit does not go on a pay-as-you-go node where it would add more to
// that node's bill per useful GPU-hour than renting for it alone costs
// (a term its own run pays for, or a machine of its size): it waits (and
// is rented its own). A node that runs past the unit's end anyway, a
// rental dearer than the node, or none, and it goes there as before.
func TestRentCostKeepsLongWorkOffPayAsYouGo(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	unit := func(id string, gpus int, d time.Duration) Unit {
		return Unit{Job: &core.Job{ID: id, Team: "t", Tier: core.TierCore, Submit: now, EstDuration: d, Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU}}}
	}
	const perGPU = 3_000_000       // the node: 3.00 per GPU-hour, 24.00 per machine-hour
	const daily = 416_667          // a daily term of 8 GPUs at 80.00, full
	longUnit := 3 * 24 * time.Hour // on the node: 3.00 per useful GPU-hour
	busyTill := func(d time.Duration) []Allocation {
		// GPU 7 of the node runs work that ends d from now.
		return []Allocation{{Unit: unit("busy", 1, d), Parts: []Part{{Node: 0, GPUs: []int{7}}}, Start: now}}
	}
	for _, tc := range []struct {
		name    string
		unit    Unit
		running []Allocation
		term    core.Micros // RentCost's answer for the unit
		placed  bool
	}{
		{"long unit, idle node: waits for the term", unit("long", 7, longUnit), nil, daily, false},
		{"nothing to rent for it: placed", unit("long", 7, longUnit), nil, 0, true},
		// One GPU for three days holds the whole machine: 24.00 an hour
		// for 1 useful GPU-hour, against a one-GPU machine at 3.50.
		{"one GPU of eight, a one-GPU machine cheaper: waits", unit("one", 1, longUnit), nil, 3_500_000, false},
		{"a tie within a thousandth: placed", unit("long", 7, time.Hour), nil, 3_427_000, true},
		{"term dearer than the node: placed", unit("long", 7, longUnit), nil, 4_000_000, true},
		// 7 of 8 GPUs for an hour: 24.00 / 7 GPU-hours = 3.43 per useful
		// GPU-hour, above 3.00.
		{"short unit, term cheaper: waits", unit("short", 7, time.Hour), nil, perGPU, false},
		{"node busy past the unit's end: adds nothing, placed", unit("long", 7, longUnit), busyTill(4 * 24 * time.Hour), daily, true},
		// Busy for 2 of the 3 days: the last day, 24.00 × 24 h over 7 GPUs ×
		// 72 h = 1.14 per useful GPU-hour, above the term's 0.42.
		{"node busy part of the run: the rest counts", unit("long", 7, longUnit), busyTill(2 * 24 * time.Hour), daily, false},
	} {
		node := v100x8("od", false)
		if len(tc.running) > 0 {
			node.GPUs[7].FreeMilli, node.GPUs[7].FreeMemMiB = 0, 0
		}
		asked := 0
		st := &State{Now: now, Nodes: []core.Node{node}, NodeCost: []core.Micros{perGPU}, Running: tc.running, Pending: []Unit{tc.unit},
			RentCost: func(u Unit) core.Micros { asked++; return tc.term }}
		d := Schedule(st, Config{NoPreemption: true})
		if got := len(d.Placements) == 1; got != tc.placed {
			t.Errorf("%s: placed %v, want %v (waiting %+v)", tc.name, got, tc.placed, d.Waiting)
		}
		if !tc.placed && (len(d.Waiting) != 1 || !strings.Contains(d.Waiting[0].Reason, "waits for a machine of its own, "+tc.term.String())) {
			t.Errorf("%s: waiting %+v, want its own rental named as the reason", tc.name, d.Waiting)
		}
		if asked != 1 {
			t.Errorf("%s: RentCost asked %d times, want once", tc.name, asked)
		}
	}

	// Committed nodes are never limited: paid time is free to fill.
	node := v100x8("committed", true)
	d := Schedule(&State{Now: now, Nodes: []core.Node{node}, NodeCost: []core.Micros{0}, Pending: []Unit{unit("long", 8, longUnit)},
		RentCost: func(Unit) core.Micros { return 1 }}, Config{})
	if len(d.Placements) != 1 {
		t.Errorf("committed node: placements %+v, waiting %+v", d.Placements, d.Waiting)
	}
	// Nor is a machine that joined by hand: it is there already.
	joined := v100x8("joined", false)
	joined.Joined = true
	d = Schedule(&State{Now: now, Nodes: []core.Node{joined}, NodeCost: []core.Micros{perGPU}, Pending: []Unit{unit("long", 7, longUnit)},
		RentCost: func(Unit) core.Micros { return 1 }}, Config{})
	if len(d.Placements) != 1 {
		t.Errorf("joined node: placements %+v, waiting %+v", d.Placements, d.Waiting)
	}
}

// Work that waits for a machine of its own does not take a pay-as-you-go
// node by preempting what runs there either; other work of the same shape
// that may go there still does (the failed search is not remembered by
// shape), and a committed node is preempted on as before.
func TestRentCostKeepsLongWorkFromPreemptingOntoPayAsYouGo(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	job := func(id string, tier core.Tier, d time.Duration) *core.Job {
		return &core.Job{ID: id, Team: "t", Tier: tier, Submit: now.Add(-time.Hour), EstDuration: d, Interruptible: tier == core.TierOffline,
			Request: core.Request{GPUs: 8, MilliPerGPU: core.WholeGPU}}
	}
	const perGPU = 3_000_000 // the node: 3.00 per GPU-hour
	const daily = 416_667    // a daily term of 8 GPUs at 80.00, full
	long, short := job("long", core.TierCore, 3*24*time.Hour), job("short", core.TierCore, 3*24*time.Hour)
	for _, tc := range []struct {
		name      string
		committed bool
		pending   []Unit
		rent      map[string]core.Micros
		want      string // the unit placed after preempting the offline work; "" none
	}{
		{"long work, a term cheaper: waits, preempts nothing", false, []Unit{{Job: long}}, map[string]core.Micros{"long": daily}, ""},
		{"nothing to rent for it: preempts", false, []Unit{{Job: long}}, nil, "long"},
		{"same shape after it, not limited: preempts", false, []Unit{{Job: long}, {Job: short}}, map[string]core.Micros{"long": daily}, "short"},
		{"committed node: preempts", true, []Unit{{Job: long}}, map[string]core.Micros{"long": daily}, "long"},
	} {
		node := v100x8("n", tc.committed)
		cost := core.Micros(perGPU)
		if tc.committed {
			cost = 0
		}
		victim := Allocation{Unit: Unit{Job: job("batch", core.TierOffline, 5*time.Hour)}, Parts: []Part{{Node: 0, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
			Start: now.Add(-time.Hour), LastCheckpoint: now.Add(-time.Minute)}
		for g := range node.GPUs {
			node.GPUs[g].FreeMilli, node.GPUs[g].FreeMemMiB = 0, 0
		}
		st := &State{Now: now, Nodes: []core.Node{node}, NodeCost: []core.Micros{cost}, Running: []Allocation{victim}, Pending: tc.pending,
			RentCost: func(u Unit) core.Micros { return tc.rent[u.Job.ID] }}
		d := Schedule(st, Config{})
		got := ""
		if len(d.Placements) == 1 && len(d.Preemptions) == 1 {
			got = d.Placements[0].Unit.Job.ID
		}
		if got != tc.want || len(d.Placements) > 1 || len(d.Preemptions) > 1 {
			t.Errorf("%s: placed %+v after preempting %+v, want %q", tc.name, d.Placements, d.Preemptions, tc.want)
		}
		if tc.want == "" && (len(d.Waiting) != 1 || !strings.Contains(d.Waiting[0].Reason, "waits for a machine of its own")) {
			t.Errorf("%s: waiting %+v, want its own rental named as the reason", tc.name, d.Waiting)
		}
	}
}
