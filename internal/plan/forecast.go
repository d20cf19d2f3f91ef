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
// Forecast is pure: now and the points come in; nothing is read. Its
// days are read through a DemandIndex, which a caller that forecasts at
// every step keeps between them (NewForecastIndexed).
type Forecast struct {
	now  time.Time
	pts  []core.DemandPoint
	days int
	ix   *DemandIndex
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
	return NewForecastIndexed(now, pts, maxDays, nil)
}

// NewForecastIndexed is NewForecast reading pts through ix (a fresh
// index when nil). pts must not change while the Forecast is used.
func NewForecastIndexed(now time.Time, pts []core.DemandPoint, maxDays int, ix *DemandIndex) *Forecast {
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
	if ix == nil {
		ix = &DemandIndex{}
	}
	return &Forecast{now: now, pts: pts, days: n, ix: ix}
}

// Days is the number of full days the forecast read.
func (f *Forecast) Days() int {
	if f == nil {
		return 0
	}
	return f.days
}

// BusyBP is, per fcDay read (most recent first), the share of the fcDay in
// basis points that demand stood at or above level milli-GPUs.
func (f *Forecast) BusyBP(level int64) []int64 {
	if f == nil {
		return nil
	}
	out := make([]int64, f.days)
	for k := range out {
		to := f.now.Add(-time.Duration(k) * fcDay)
		out[k] = int64(f.ix.Above(f.pts, level, to.Add(-fcDay), to) * 10000 / fcDay)
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
	busy, hold, _ = f.ExpectedBusyBP(level, term, q)
	return busy, hold
}

// ExpectedBusyBP is ExpectedBusy with the busy share it is priced on
// (LowerBusyBP), read once.
func (f *Forecast) ExpectedBusyBP(level int64, term time.Duration, q int) (busy, hold time.Duration, bp int64) {
	if f == nil || term <= 0 {
		return 0, 0, 0
	}
	hold = min(term, time.Duration(f.days)*fcDay)
	bp = f.LowerBusyBP(level, q)
	return time.Duration(core.MulDivHalfEven(int64(hold), bp, 10000)), hold, bp
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
