package sched

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// TestPropertyNeedBoundChangesNothing: needBound only skips nodes that
// cannot win, so the decisions with and without it are the same, on
// random fleets whose running work of every tier and age invites
// preemption.
func TestPropertyNeedBoundChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		nodes, teams := genWorld(t)
		first := &State{Now: now.Add(-2 * time.Hour), Nodes: nodes, Teams: teams, Pending: genUnits(t, "a", now.Add(-2*time.Hour))}
		d1 := Schedule(first, Config{})
		st := &State{Now: now, Teams: teams, Pending: genUnits(t, "b", now)}
		st.Nodes = cloneNodes(nodes)
		for _, p := range d1.Placements {
			a := Allocation{Unit: p.Unit, Parts: p.Parts, Start: first.Now.Add(time.Duration(rapid.IntRange(0, 100).Draw(t, "start")) * time.Minute),
				LastCheckpoint: first.Now.Add(time.Duration(rapid.IntRange(0, 110).Draw(t, "ckpt")) * time.Minute)}
			for _, part := range a.Parts {
				apply(st.Nodes, &a.Unit, part, 1)
			}
			st.Running = append(st.Running, a)
		}
		decide := func(on bool) Decisions {
			was := preemptNeedBound
			preemptNeedBound = on
			defer func() { preemptNeedBound = was }()
			s := *st
			s.Nodes = cloneNodes(st.Nodes)
			return Schedule(&s, Config{})
		}
		with, without := decide(true), decide(false)
		if !reflect.DeepEqual(with, without) {
			t.Fatalf("decisions differ with the bound:\n%s\nwithout:\n%s", fmt.Sprintf("%+v", with), fmt.Sprintf("%+v", without))
		}
	})
}

// cloneNodes copies nodes and their GPUs, so that one schedule's
// accounting does not reach another's.
func cloneNodes(nodes []core.Node) []core.Node {
	out := make([]core.Node, len(nodes))
	for i := range nodes {
		out[i] = nodes[i]
		out[i].GPUs = append([]core.GPU(nil), nodes[i].GPUs...)
	}
	return out
}

// TestNeedBoundMixedVictims: on the mixed-victims fleet (full nodes,
// victims of several shapes and ages, preemptors of 1 to 8 GPUs), where
// the bound skips most nodes, the decisions are the ones the full search
// makes.
func TestNeedBoundMixedVictims(t *testing.T) {
	st := mixedVictims(300, 150)
	decide := func(on bool) Decisions {
		was := preemptNeedBound
		preemptNeedBound = on
		defer func() { preemptNeedBound = was }()
		return Schedule(st, Config{NoBackfill: true})
	}
	with, without := decide(true), decide(false)
	if len(with.Preemptions) == 0 {
		t.Fatal("no preemption: the case is not exercised")
	}
	if !reflect.DeepEqual(with, without) {
		t.Errorf("decisions differ with the bound: %d placements, %d preemptions; without: %d, %d",
			len(with.Placements), len(with.Preemptions), len(without.Placements), len(without.Preemptions))
	}
}
