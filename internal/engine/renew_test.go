package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/plan"
)

func TestTimeAbove(t *testing.T) {
	at := func(h float64, milli int64) fleet.DemandPoint {
		return fleet.DemandPoint{At: t0.Add(time.Duration(h * float64(time.Hour))), Milli: milli}
	}
	pts := []fleet.DemandPoint{at(0, 5000), at(2, 20000), at(3, 8000), at(10, 12000)}
	now := t0.Add(12 * time.Hour)
	var ix plan.DemandIndex // one index for every question, as a State keeps it
	for _, tc := range []struct {
		name  string
		from  time.Time
		level int64
		want  time.Duration
	}{
		{"above 10 GPUs: 2-3 h and 10-12 h", t0, 10000, 3 * time.Hour},
		{"above 6 GPUs: from 2 h on", t0, 6000, 10 * time.Hour},
		{"the window starts inside a point", t0.Add(150 * time.Minute), 10000, 30*time.Minute + 2*time.Hour},
		{"above every point", t0, 20000, 0},
		{"below every point, window before the first", t0.Add(-time.Hour), 0, 12 * time.Hour},
	} {
		if got := timeAbove(&ix, pts, tc.from, now, tc.level); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
