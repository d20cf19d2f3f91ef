package sched

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
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
		drain := make([]Drain, len(st.Nodes))
		for i := range drain {
			drain[i] = Drain{Node: len(drain) - 1 - i}
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

// TestPropertyRunCosts: deferral answers with the prices kept in a
// runCosts between calls are the answers priced afresh, over sequences of
// passes at later and earlier instants in any time zone, for durations
// and horizons of any length, when the tariff changes between calls, and
// when the memo fills up and forgets.
func TestPropertyRunCosts(t *testing.T) {
	zones := []string{"UTC", "Asia/Shanghai", "America/New_York", "Asia/Kathmandu"}
	genTOU := func(t *rapid.T) *core.TimeOfUse {
		loc, err := time.LoadLocation(rapid.SampledFrom(zones).Draw(t, "zone"))
		if err != nil {
			t.Fatal(err)
		}
		tou := &core.TimeOfUse{Location: loc}
		for i, n := 0, rapid.IntRange(1, 3).Draw(t, "windows"); i < n; i++ {
			tou.Windows = append(tou.Windows, core.Window{StartHour: rapid.IntRange(0, 23).Draw(t, "start"), EndHour: rapid.IntRange(0, 24).Draw(t, "end"),
				MultiplierBP: rapid.Int64Range(0, 30000).Draw(t, "mult")})
		}
		return tou
	}
	rapid.Check(t, func(t *rapid.T) {
		tous := []*core.TimeOfUse{genTOU(t), genTOU(t)}
		memo := &runCosts{}
		if rapid.Bool().Draw(t, "nearlyFull") {
			memo.m = map[runKey]core.Micros{}
			for i := 0; len(memo.m) < maxRunCosts-3; i++ {
				memo.m[runKey{sec: int64(-i)}] = 1
			}
			memo.tou = tous[0]
		}
		loc, _ := time.LoadLocation(rapid.SampledFrom(zones).Draw(t, "nowZone"))
		now := time.Date(2026, 3, 7, 0, 0, 0, 0, loc).Add(time.Duration(rapid.Int64Range(0, 7*86400).Draw(t, "at")) * time.Second)
		for i, n := 0, rapid.IntRange(1, 8).Draw(t, "passes"); i < n; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(-3600, 4*3600).Draw(t, "step")) * time.Second)
			tou := tous[rapid.IntRange(0, 4).Draw(t, "tou")/4]
			d := time.Duration(rapid.Int64Range(1, 30*3600).Draw(t, "d")) * time.Second
			latest := now.Add(time.Duration(rapid.Int64Range(0, 3*86400).Draw(t, "horizon")) * time.Second)
			want := bestStart(tou, now, latest, d, 500, nil)
			got := bestStart(tou, now, latest, d, 500, memo)
			if !want.until.Equal(got.until) || want.savingBP != got.savingBP || want.ok != got.ok {
				t.Fatalf("pass %d: kept prices answer %+v, fresh ones %+v", i, got, want)
			}
		}
	})
}
