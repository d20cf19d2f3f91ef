package plan

import (
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Forecast is the demand forecast committed terms are bought on: from
// the fleet's recent demand (core.DemandPoint, allocated plus waiting),
// per full day back from now, the load-duration curve of that day — how
// long demand stood at or above each level. A day holds the daily cycle
// (the peak and the night); the days, up to a week, hold the weekly one
// (weekdays and the weekend). What a committed GPU placed at a level will
// serve is forecast as the share of a day demand stands above it, and
// its error as the spread of that share from day to day: the term is
// priced on a lower quantile of the days (LowerBusyBP), not on their
// mean, so that a term is bought only when even a poor day of the recent
// past keeps it busy enough. The forecast never looks further ahead than
// its history looks back (ExpectedBusy): with a week of history, a month
// is priced on at most a week of use.
//
// Forecast is pure: now and the points come in; nothing is read.
type Forecast struct {
	days []dayCurve // most recent first
}

// dayCurve is one day's load-duration curve: levels, highest first, and
// the time demand stood at or above each.
type dayCurve struct {
	levels []int64
	cum    []time.Duration
}

// ForecastDays is the most days a Forecast reads: a week, one cycle of
// the weekly pattern.
const ForecastDays = 7

// fcDay is the length of a forecast day.
const fcDay = 24 * time.Hour

// NewForecast reads pts (oldest first, each holding until the next, the
// last until now) over the last full days before now, at most maxDays
// (ForecastDays when 0). A day before the first point is not counted:
// with less than a day of history there is no forecast (nil).
func NewForecast(now time.Time, pts []core.DemandPoint, maxDays int) *Forecast {
	if maxDays <= 0 {
		maxDays = ForecastDays
	}
	if len(pts) == 0 {
		return nil
	}
	n := min(int(now.Sub(pts[0].At)/fcDay), maxDays)
	if n <= 0 {
		return nil
	}
	f := &Forecast{days: make([]dayCurve, n)}
	type seg struct {
		level int64
		d     time.Duration
	}
	for k := range n {
		to := now.Add(-time.Duration(k) * fcDay)
		from := to.Add(-fcDay)
		first := max(sort.Search(len(pts), func(i int) bool { return pts[i].At.After(from) })-1, 0)
		var segs []seg
		for i := first; i < len(pts) && pts[i].At.Before(to); i++ {
			end := to
			if i+1 < len(pts) && pts[i+1].At.Before(to) {
				end = pts[i+1].At
			}
			start := pts[i].At
			if start.Before(from) {
				start = from
			}
			if end.After(start) {
				segs = append(segs, seg{pts[i].Milli, end.Sub(start)})
			}
		}
		slices.SortFunc(segs, func(a, b seg) int {
			switch {
			case a.level > b.level:
				return -1
			case a.level < b.level:
				return 1
			}
			return 0
		})
		c := &f.days[k]
		var sum time.Duration
		for _, s := range segs {
			sum += s.d
			if m := len(c.levels); m > 0 && c.levels[m-1] == s.level {
				c.cum[m-1] = sum
				continue
			}
			c.levels = append(c.levels, s.level)
			c.cum = append(c.cum, sum)
		}
	}
	return f
}

// Days is the number of full days the forecast read.
func (f *Forecast) Days() int {
	if f == nil {
		return 0
	}
	return len(f.days)
}

// above is how long demand stood at or above level on fcDay k.
func (c *dayCurve) above(level int64) time.Duration {
	i, _ := slices.BinarySearchFunc(c.levels, level, func(a, b int64) int {
		if a >= b {
			return -1
		}
		return 1
	})
	if i == 0 {
		return 0
	}
	return c.cum[i-1]
}

// BusyBP is, per fcDay read (most recent first), the share of the fcDay in
// basis points that demand stood at or above level milli-GPUs.
func (f *Forecast) BusyBP(level int64) []int64 {
	if f == nil {
		return nil
	}
	out := make([]int64, len(f.days))
	for k := range f.days {
		out[k] = int64(f.days[k].above(level) * 10000 / fcDay)
	}
	return out
}

// LowerBusyBP is the lower q-percent quantile over the days read of the
// share of a fcDay demand stood at or above level (BusyBP): the nearest
// rank at or below q% of the days, sorted from the least busy. q = 0 is
// the least busy fcDay; 50 the median. 0 without a forecast.
func (f *Forecast) LowerBusyBP(level int64, q int) int64 {
	return LowerQuantile(f.BusyBP(level), q)
}

// LowerQuantile is the lower q-percent quantile of xs (nearest rank,
// rounding down: index ⌊q·(n−1)/100⌋ of xs sorted ascending); 0 for none.
// xs is not changed.
func LowerQuantile(xs []int64, q int) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	q = min(max(q, 0), 100)
	return s[q*(len(s)-1)/100]
}

// ExpectedBusy is how long over a term of length term starting now a
// GPU placed at level is expected to be busy: the lower q-percent
// quantile of its daily busy share (LowerBusyBP) over as much of the term
// as the history looks back (Days), and nothing beyond. hold is that
// covered part of the term.
func (f *Forecast) ExpectedBusy(level int64, term time.Duration, q int) (busy, hold time.Duration) {
	if f == nil || term <= 0 {
		return 0, 0
	}
	hold = min(term, time.Duration(len(f.days))*fcDay)
	bp := f.LowerBusyBP(level, q)
	return time.Duration(core.MulDivHalfEven(int64(hold), bp, 10000)), hold
}

// DemandAhead is the demand the recent days say to expect over the next
// window from now: for each of the last full days (at most ForecastDays,
// none before the first point), the highest demand that stood at any time
// in the same window of that day, and of those the lower q-percent
// quantile (LowerQuantile: q = 0 the least of the days, 50 the median).
// It reads the daily cycle: capacity rented at now for the morning peak
// that came on most recent days at this hour. days is how many days it
// read; 0 (and no level) with less than a day of history.
//
// DemandAhead is pure: pts are oldest first, each holding until the next.
func DemandAhead(now time.Time, pts []core.DemandPoint, window time.Duration, q int) (level int64, days int) {
	if len(pts) == 0 || window <= 0 {
		return 0, 0
	}
	n := min(int(now.Sub(pts[0].At)/fcDay), ForecastDays)
	if n <= 0 {
		return 0, 0
	}
	peaks := make([]int64, 0, n)
	for k := 1; k <= n; k++ {
		from := now.Add(-time.Duration(k) * fcDay)
		to := from.Add(window)
		// The point in force at from, then every one that starts before to.
		i := max(sort.Search(len(pts), func(i int) bool { return pts[i].At.After(from) })-1, 0)
		var peak int64
		for ; i < len(pts) && pts[i].At.Before(to); i++ {
			peak = max(peak, pts[i].Milli)
		}
		peaks = append(peaks, peak)
	}
	return LowerQuantile(peaks, q), len(peaks)
}
