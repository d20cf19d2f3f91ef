package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Work goes where the time already paid covers it: a short job to the
// machine whose term runs out soonest, a long one to the machine paid
// longest (so the other term can end instead of renewing), one that
// outlasts every term to the machine it renews fewest terms on, then to
// the renewed term it fills most, and a gang to committed machines
// before one billed by the hour, whatever their order. A job smaller
// than a machine takes an empty one only when none in use holds it.
func TestPlacementFillsPaidTime(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	job := func(gpus int, d time.Duration) Unit {
		return Unit{Job: &core.Job{ID: "j", Team: "t", Tier: core.TierCore, Submit: now, EstDuration: d, Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU}}}
	}
	soon, late := now.Add(time.Hour), now.Add(20*time.Hour)
	for _, tc := range []struct {
		name  string
		nodes []core.Node
		cost  []core.Micros
		paid  []time.Time
		unit  Unit
		want  []string // lease of each part, in order
	}{
		{"short job: the term that ends soonest", []core.Node{v100x8("late", true), v100x8("soon", true)}, nil, []time.Time{late, soon}, job(8, 30*time.Minute), []string{"soon"}},
		{"long job: the term paid longest", []core.Node{v100x8("soon", true), v100x8("late", true)}, nil, []time.Time{soon, late}, job(8, 5*time.Hour), []string{"late"}},
		{"longer than every term: the least overrun", []core.Node{v100x8("soon", true), v100x8("late", true)}, nil, []time.Time{soon, late}, job(8, 30*time.Hour), []string{"late"}},
		{"longer than every term: the fewest renewals", []core.Node{daily(v100x8("soon", true)), daily(v100x8("late", true))}, nil, []time.Time{soon, late}, job(8, 30*time.Hour), []string{"late"}},
		// Each renews one day: "soon" runs 20h into it, "late" 1h.
		{"one renewal on each: the renewed day it fills most", []core.Node{daily(v100x8("late", true)), daily(v100x8("soon", true))}, nil, []time.Time{late, soon}, job(8, 21*time.Hour), []string{"soon"}},
		{"small job: a machine in use before an empty one", []core.Node{v100x8("soon", true), busy(v100x8("used", true), 2)}, nil, []time.Time{soon, late}, job(2, 30*time.Minute), []string{"used"}},
		{"small job: an empty machine when none in use holds it", []core.Node{v100x8("soon", true), busy(v100x8("used", true), 7)}, nil, []time.Time{soon, late}, job(2, 30*time.Minute), []string{"soon"}},
		{"small job: the price before the empty machine", []core.Node{busy(v100x8("od", false), 2), v100x8("soon", true)}, []core.Micros{3_000_000, 0}, []time.Time{{}, soon}, job(2, 30*time.Minute), []string{"soon"}},
		{"no estimate: the first node", []core.Node{v100x8("soon", true), v100x8("late", true)}, nil, []time.Time{soon, late}, job(8, 0), []string{"soon"}},
		{"gang: committed before hourly, paid longest first", []core.Node{v100x8("od", false), v100x8("soon", true), v100x8("late", true)},
			[]core.Micros{3_000_000, 0, 0}, []time.Time{{}, soon, late}, job(16, 5*time.Hour), []string{"late", "soon"}},
	} {
		d := Schedule(&State{Now: now, Nodes: tc.nodes, NodeCost: tc.cost, NodePaidUntil: tc.paid, Pending: []Unit{tc.unit}}, Config{})
		if len(d.Placements) != 1 {
			t.Errorf("%s: placements %+v, waiting %+v", tc.name, d.Placements, d.Waiting)
			continue
		}
		var got []string
		for _, p := range d.Placements[0].Parts {
			got = append(got, tc.nodes[p.Node].LeaseID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: placed on %v, want %v", tc.name, got, tc.want)
		}
	}
}

// daily renews n's term a day at a time.
func daily(n core.Node) core.Node {
	n.Renewal = 24 * time.Hour
	return n
}

// busy takes n's first k GPUs.
func busy(n core.Node, k int) core.Node {
	for g := range k {
		n.GPUs[g].FreeMilli = 0
	}
	return n
}

// v100x8 is an empty node of 8 V100s.
func v100x8(id string, committed bool) core.Node {
	n := core.Node{LeaseID: id, GPUModel: "V100", GPUMemMiB: 32768, Committed: committed}
	for g := range 8 {
		n.GPUs = append(n.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: 32768})
	}
	return n
}
