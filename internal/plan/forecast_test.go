package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// weekOf is a week of hourly demand before now: 16 GPUs from 08:00 to
// 20:00, 4 at night, and on the quiet day (k days back, −1 for none) 4
// all day.
func weekOf(now time.Time, quiet int) []core.DemandPoint {
	var pts []core.DemandPoint
	for h := 7 * 24; h > 0; h-- {
		at := now.Add(-time.Duration(h) * time.Hour)
		m := int64(4000)
		if hr := at.Hour(); hr >= 8 && hr < 20 && (h-1)/24 != quiet {
			m = 16000
		}
		pts = append(pts, core.DemandPoint{At: at, Milli: m})
	}
	return pts
}

func TestForecastDailyAndWeekly(t *testing.T) {
	now := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)
	f := NewForecast(now, weekOf(now, 2), 0)
	if f.Days() != 7 {
		t.Fatalf("Days = %d, want 7", f.Days())
	}
	// 8 GPUs: busy 12 h a day (50%), but not on the quiet day, 2 days back.
	want := []int64{5000, 5000, 0, 5000, 5000, 5000, 5000}
	if got := f.BusyBP(8000); !slices.Equal(got, want) {
		t.Errorf("BusyBP(8 GPUs) = %v, want %v", got, want)
	}
	if got := f.BusyBP(4000); !slices.Equal(got, []int64{10000, 10000, 10000, 10000, 10000, 10000, 10000}) {
		t.Errorf("BusyBP(4 GPUs) = %v, want every day in full", got)
	}
	// The least busy day prices the term; the median does not see it.
	if got := f.LowerBusyBP(8000, 0); got != 0 {
		t.Errorf("LowerBusyBP(q=0) = %d, want 0 (the quiet day)", got)
	}
	if got := f.LowerBusyBP(8000, 50); got != 5000 {
		t.Errorf("LowerBusyBP(q=50) = %d, want 5000", got)
	}
	// A month is priced on the week of history only.
	busy, hold := f.ExpectedBusy(4000, 730*time.Hour, 0)
	if hold != 7*24*time.Hour || busy != hold {
		t.Errorf("ExpectedBusy(4 GPUs, month) = %s of %s, want 168h of 168h", busy, hold)
	}
	busy, hold = f.ExpectedBusy(8000, 730*time.Hour, 50)
	if busy != 84*time.Hour || hold != 168*time.Hour {
		t.Errorf("ExpectedBusy(8 GPUs, month, median) = %s of %s, want 84h of 168h", busy, hold)
	}
	if NewForecast(now, nil, 0) != nil || NewForecast(now, []core.DemandPoint{{At: now.Add(-23 * time.Hour), Milli: 1000}}, 0) != nil {
		t.Error("a forecast from less than a day of history")
	}
	if b, h := (*Forecast)(nil).ExpectedBusy(0, time.Hour, 0); b != 0 || h != 0 {
		t.Error("a nil forecast expects use")
	}
}

func TestLowerQuantile(t *testing.T) {
	xs := []int64{50, 10, 40, 20, 30}
	for q, want := range map[int]int64{0: 10, 20: 10, 25: 20, 50: 30, 99: 40, 100: 50, 150: 50, -5: 10} {
		if got := LowerQuantile(xs, q); got != want {
			t.Errorf("LowerQuantile(q=%d) = %d, want %d", q, got, want)
		}
	}
	if !slices.Equal(xs, []int64{50, 10, 40, 20, 30}) {
		t.Error("LowerQuantile changed its input")
	}
	if LowerQuantile(nil, 50) != 0 {
		t.Error("LowerQuantile of nothing")
	}
}

// Per day, BusyBP agrees with summing each point's time inside that day
// at or above the level; the lower quantile never exceeds the median.
func TestPropertyForecastDays(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		var pts []core.DemandPoint
		at := t0
		for i, n := 0, rapid.IntRange(1, 60).Draw(t, "points"); i < n; i++ {
			at = at.Add(time.Duration(rapid.Int64Range(0, 18*3600).Draw(t, "gap")) * time.Second)
			pts = append(pts, core.DemandPoint{At: at, Milli: rapid.Int64Range(0, 8).Draw(t, "milli") * 1000})
		}
		now := at.Add(time.Duration(rapid.Int64Range(0, 30*3600).Draw(t, "tail")) * time.Second)
		f := NewForecast(now, pts, 0)
		level := rapid.Int64Range(0, 9).Draw(t, "level") * 1000
		got := f.BusyBP(level)
		if f.Days() != min(int(now.Sub(pts[0].At)/fcDay), ForecastDays) {
			t.Fatalf("Days = %d for %s of history", f.Days(), now.Sub(pts[0].At))
		}
		for k := range got {
			to := now.Add(-time.Duration(k) * fcDay)
			above := aboveWalk(pts, level, to.Add(-fcDay), to, now)
			if want := int64(above * 10000 / fcDay); got[k] != want {
				t.Fatalf("day %d: BusyBP(%d) = %d, want %d", k, level, got[k], want)
			}
		}
		if f.LowerBusyBP(level, 0) > f.LowerBusyBP(level, 50) {
			t.Fatal("the lower quantile above the median")
		}
	})
}
