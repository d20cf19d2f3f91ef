package sched

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestPropertyScratch: scheduling and consolidating with a Scratch carried
// over from earlier, unrelated worlds decides exactly what a fresh call
// does — reused storage must not leak into decisions.
func TestPropertyScratch(t *testing.T) {
	var sc Scratch // shared by every world rapid draws
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		nodes, teams := genWorld(t)
		first := &State{Now: now.Add(-time.Hour), Nodes: nodes, Teams: teams, Pending: genUnits(t, "a", now.Add(-time.Hour))}
		d1 := Schedule(first, Config{})
		st := &State{Now: now, Teams: teams, Nodes: nodes, Pending: genUnits(t, "b", now)}
		for _, p := range d1.Placements {
			st.Running = append(st.Running, Allocation{Unit: p.Unit, Parts: p.Parts, Start: first.Now, LastCheckpoint: first.Now})
		}
		st.Nodes = nil
		for i := range nodes {
			n := nodes[i]
			n.GPUs = append(n.GPUs[:0:0], nodes[i].GPUs...)
			st.Nodes = append(st.Nodes, n)
		}
		for _, a := range st.Running {
			for _, part := range a.Parts {
				apply(st.Nodes, &a.Unit, part, 1)
			}
		}
		want := Schedule(st, Config{})
		withScratch := *st
		withScratch.Scratch = &sc
		got := Schedule(&withScratch, Config{})
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(Decisions{}, Placement{}, Unit{}, Allocation{}, Preemption{}, Reservation{}, Deferral{}, Wait{})); diff != "" {
			t.Fatalf("Schedule with a reused Scratch differs (-fresh +reused):\n%s", diff)
		}
		drain := make([]int, len(st.Nodes))
		for i := range drain {
			drain[i] = len(drain) - 1 - i
		}
		st.Now = now.Add(time.Hour) // past the minimum runtime: work may move
		withScratch.Now = st.Now
		wantMoves := Consolidate(st, want, drain, Config{})
		gotMoves := Consolidate(&withScratch, got, drain, Config{})
		if diff := cmp.Diff(wantMoves, gotMoves, cmp.AllowUnexported(Move{}, Unit{})); diff != "" {
			t.Fatalf("Consolidate with a reused Scratch differs (-fresh +reused):\n%s", diff)
		}
	})
}
