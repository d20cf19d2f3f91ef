package plan

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// DemandAhead reads the same window of each full day back, the point in
// force at its start included, and takes the days' lower quantile; less
// than a day of history is no forecast.
func TestDemandAhead(t *testing.T) {
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	pts := []core.DemandPoint{
		{At: now.Add(-60 * time.Hour), Milli: 3000},                // in force at 09:00 two days back
		{At: now.Add(-48*time.Hour + 20*time.Minute), Milli: 9000}, // 09:20 two days back
		{At: now.Add(-47 * time.Hour), Milli: 1000},                // 10:00
		{At: now.Add(-24*time.Hour + 50*time.Minute), Milli: 5000}, // 09:50 yesterday
		{At: now.Add(-23*time.Hour + 10*time.Minute), Milli: 1000}, // 10:10 yesterday
	}
	for _, c := range []struct {
		window     time.Duration
		q          int
		want, days int64
	}{
		{window: 30 * time.Minute, q: 0, want: 1000, days: 2},   // yesterday 1000 (then 5000 after the window), two days back 9000
		{window: 30 * time.Minute, q: 100, want: 9000, days: 2}, // the higher of the two
		{window: time.Hour, q: 0, want: 5000, days: 2},
		{window: 10 * time.Minute, q: 100, want: 3000, days: 2}, // two days back: the point in force at 09:00
	} {
		got, days := DemandAhead(now, pts, c.window, c.q)
		if got != c.want || int64(days) != c.days {
			t.Errorf("window %s q %d: %d over %d days, want %d over %d", c.window, c.q, got, days, c.want, c.days)
		}
	}
	if got, days := DemandAhead(now, pts[3:], time.Hour, 0); days != 0 || got != 0 {
		t.Errorf("under a day of history: %d over %d days, want no forecast", got, days)
	}
}
