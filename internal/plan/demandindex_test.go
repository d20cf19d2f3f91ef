package plan

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// aboveWalk is DemandIndex.Above by walking every point.
func aboveWalk(pts []core.DemandPoint, level int64, from, to, now time.Time) time.Duration {
	var above time.Duration
	for i, p := range pts {
		end := now
		if i+1 < len(pts) {
			end = pts[i+1].At
		}
		s, e := p.At, end
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if e.After(s) && p.Milli >= level {
			above += e.Sub(s)
		}
	}
	return above
}

// One index kept across a history that changes as the engine changes it
// (a point appended, the last rewritten, the front dropped) and now and
// then is replaced by another (its first point's level differs) answers
// every question as a walk over the history does.
func TestPropertyDemandIndexAgreesWithWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		var ix DemandIndex
		var pts []core.DemandPoint
		now := t0
		for step, n := 0, rapid.IntRange(1, 80).Draw(t, "steps"); step < n; step++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, 6*3600).Draw(t, "gap")) * time.Second)
			milli := rapid.Int64Range(0, 6).Draw(t, "milli") * 1000
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op == 0 && len(pts) > 0:
				// Another history: a restart, or another caller's.
				pts = append([]core.DemandPoint(nil), pts[len(pts)/2:]...)
				pts[0].Milli += 1000
			case len(pts) > 0 && !pts[len(pts)-1].At.Before(now):
				pts[len(pts)-1].Milli = milli
			default:
				pts = append(pts, core.DemandPoint{At: now, Milli: milli})
			}
			if len(pts) > 1 && rapid.Bool().Draw(t, "trim") {
				pts = pts[rapid.IntRange(1, len(pts)-1).Draw(t, "drop"):]
			}
			for q := rapid.IntRange(0, 3).Draw(t, "questions"); q > 0; q-- {
				level := rapid.Int64Range(0, 7).Draw(t, "level") * 1000
				to := now.Add(-time.Duration(rapid.Int64Range(0, 48*3600).Draw(t, "back")) * time.Second)
				from := to.Add(-time.Duration(rapid.Int64Range(0, 72*3600).Draw(t, "window")) * time.Second)
				if got, want := ix.Above(pts, level, from, to), aboveWalk(pts, level, from, to, now); got != want {
					t.Fatalf("step %d: Above(%d, %s, %s) = %s, want %s", step, level, from.Sub(t0), to.Sub(t0), got, want)
				}
			}
		}
	})
}

// The index keeps at most maxIndexLevels levels, and answers the same
// after it has dropped one.
func TestDemandIndexEvicts(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	pts := []core.DemandPoint{{At: t0, Milli: 3000}, {At: t0.Add(time.Hour), Milli: 1000}}
	now := t0.Add(3 * time.Hour)
	var ix DemandIndex
	for l := range int64(maxIndexLevels + 10) {
		ix.Above(pts, l*100, t0, now)
	}
	if len(ix.levels) > maxIndexLevels {
		t.Fatalf("%d levels kept, want at most %d", len(ix.levels), maxIndexLevels)
	}
	if _, ok := ix.levels[0]; ok {
		t.Error("the level asked first is still kept")
	}
	if got := ix.Above(pts, 0, t0, now); got != 3*time.Hour {
		t.Errorf("Above(0) after eviction = %s, want 3h", got)
	}
	if got := ix.Above(pts, 2000, t0, now); got != time.Hour {
		t.Errorf("Above(2000) = %s, want 1h", got)
	}
}

// benchHistory is a demand history, a point a minute; a replay's step k
// sees the eight days all[k : k+window].
func benchHistory() (all []core.DemandPoint, window int) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	window = 8 * 24 * 60
	all = make([]core.DemandPoint, 0, window+4096)
	for i := range cap(all) {
		all = append(all, core.DemandPoint{At: t0.Add(time.Duration(i) * time.Minute), Milli: int64(i*7919%64) * 1000})
	}
	return all, window
}

// The renewal test's question at every step of a replay: how long, over
// the last day, demand stood above a level, with the history sliding by
// one point a step. BenchmarkDemandIndexStep asks it of one index kept
// across the steps; BenchmarkDemandWalkStep walks the day back from now,
// as the engine did before the index (walkBack).
func BenchmarkDemandIndexStep(b *testing.B) {
	all, window := benchHistory()
	var ix DemandIndex
	for i := 0; b.Loop(); i++ {
		k := i % (len(all) - window)
		h := all[k : k+window]
		now := h[len(h)-1].At.Add(30 * time.Second)
		for l := range int64(3) {
			ix.Above(h, 30000+l*8000, now.Add(-24*time.Hour), now)
		}
	}
}

func BenchmarkDemandWalkStep(b *testing.B) {
	all, window := benchHistory()
	var ix DemandIndex
	for k := range 100 {
		h := all[k : k+window]
		now := h[len(h)-1].At.Add(30 * time.Second)
		if w, x := walkBack(h, 30000, now.Add(-24*time.Hour), now), ix.Above(h, 30000, now.Add(-24*time.Hour), now); w != x {
			b.Fatalf("step %d: the walk says %s, the index %s", k, w, x)
		}
	}
	for i := 0; b.Loop(); i++ {
		k := i % (len(all) - window)
		h := all[k : k+window]
		now := h[len(h)-1].At.Add(30 * time.Second)
		for l := range int64(3) {
			walkBack(h, 30000+l*8000, now.Add(-24*time.Hour), now)
		}
	}
}

// walkBack is how long demand stood at or above level between from and
// now, walking back from the last point until from.
func walkBack(pts []core.DemandPoint, level int64, from, now time.Time) time.Duration {
	var above time.Duration
	end := now
	for i := len(pts) - 1; i >= 0 && end.After(from); i-- {
		start := pts[i].At
		if start.Before(from) {
			start = from
		}
		if pts[i].Milli >= level && end.After(start) {
			above += end.Sub(start)
		}
		end = pts[i].At
	}
	return above
}
