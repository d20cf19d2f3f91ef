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
