package fleet

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
)

// DemandPoint is the fleet's demand from At until the next point
// (core.DemandPoint, which the store keeps across restarts).
type DemandPoint = core.DemandPoint

// DemandKeep is how much demand history the engine keeps: the longest
// window an Outlook looks back over, a week, and a day to spare.
const DemandKeep = 8 * 24 * time.Hour

// Outlook prices committed terms on the fleet's recent demand rather than
// on the one job a machine is rented for. A daily machine rented for a
// short burst is not used by that job alone: while demand stays above the
// committed capacity it is backfilled, and its term is paid either way.
// The forecast is persistence over the load-duration curve: the share of
// the last window (the term, at most Config.OutlookHorizon: a day, one
// cycle of the diurnal pattern cluster demand follows; persistence over
// longer horizons rented weekly terms for the Helios trace's falling tail)
// during which demand stood at or
// above a new machine's place on top of the committed capacity is the
// share of its term it is expected to be busy — and never further ahead
// than the history looks back, so with no history the job alone prices
// the term. On-demand and spot machines are not counted in that place:
// they are the flexible layer a committed machine would replace.
type Outlook struct {
	now    time.Time
	pts    []DemandPoint
	curves map[time.Duration]*ldc
	// fc is the forecast longer terms are bought on, read at first use.
	fc     *plan.Forecast
	fcRead bool
}

// ForecastQuantile is the lower quantile, in percent of the days read,
// of a committed GPU's daily busy share that a term longer than the
// outlook is priced on (plan.Forecast.LowerBusyBP): 0, the least busy day
// of the last week. On the Helios excerpt (2026-12-05) the 20% and 50%
// quantiles cost 0.4-1.3% more on the AWS price book and raised its idle
// share from 10.1% to 11.4% and 14.7%; on the monthly-only book they saved
// 2% (docs/simulator.md, "Commitments under uncertainty").
const ForecastQuantile = 0

// forecastUse is what a committed term of length term on n machines of
// off is expected to serve, in milli-GPU-seconds, when it goes on top of
// committed capacity level: its GPUs × the time the forecast expects
// demand to reach the middle of its slice (plan.Forecast.ExpectedBusy).
// hold is the part of the term the forecast covers, bp the busy share.
func (o *Outlook) forecastUse(off *core.Offer, n int, level int64, term time.Duration) (use int64, hold time.Duration, bp int64) {
	if o == nil {
		return 0, 0, 0
	}
	if !o.fcRead {
		o.fc, o.fcRead = plan.NewForecast(o.now, o.pts, plan.ForecastDays), true
	}
	if o.fc == nil {
		return 0, 0, 0
	}
	capMilli := int64(n) * int64(off.CapMilli())
	busy, hold := o.fc.ExpectedBusy(level+capMilli/2, term, ForecastQuantile)
	return capMilli * int64(busy/time.Second), hold, o.fc.LowerBusyBP(level+capMilli/2, ForecastQuantile)
}

// forecastWhy says why forecastUse expects what it does.
func forecastWhy(bp int64, hold time.Duration) string {
	return fmt.Sprintf("demand stood above its place on the committed capacity %d.%02d%% of the day on the %d%% quantile of the last %s, counted for that long", bp/100, bp%100, ForecastQuantile, hold.Round(time.Hour))
}

// ldc is a load-duration curve: demand levels, highest first, with the
// time demand stood at or above each. It is sorted only once it has been
// asked often (sortAfter): a step asks a few times, and summing the
// window's segments for each question is cheaper than sorting them.
type ldc struct {
	segs   []seg // the window's segments, in time order
	asked  int
	levels []int64 // descending, once sorted
	cum    []time.Duration
	span   time.Duration
}

// seg is a demand level held for a duration.
type seg struct {
	level int64
	d     time.Duration
}

// sortAfter is how many questions a curve answers by summing before it
// is sorted.
const sortAfter = 8

// NewOutlook reads pts (oldest first, each holding until the next, the
// last until now). A nil Outlook forecasts nothing.
func NewOutlook(now time.Time, pts []DemandPoint) *Outlook {
	if len(pts) == 0 {
		return nil
	}
	return &Outlook{now: now, pts: pts}
}

// Above reports how long, over the last window (or the part of it there
// is history for, span), demand stood at or above level milli-GPUs.
func (o *Outlook) Above(level int64, window time.Duration) (above, span time.Duration) {
	if o == nil || window <= 0 {
		return 0, 0
	}
	c := o.curves[window]
	if c == nil {
		c = o.curve(window)
		if o.curves == nil {
			o.curves = map[time.Duration]*ldc{}
		}
		o.curves[window] = c
	}
	if c.levels == nil {
		if c.asked < sortAfter {
			c.asked++
			for _, sg := range c.segs {
				if sg.level >= level {
					above += sg.d
				}
			}
			return above, c.span
		}
		c.sort()
	}
	// The first level below the one asked for; all before it are at or
	// above.
	i, _ := slices.BinarySearchFunc(c.levels, level, func(a, b int64) int {
		if a >= b {
			return -1
		}
		return 1
	})
	if i == 0 {
		return 0, c.span
	}
	return c.cum[i-1], c.span
}

func (o *Outlook) curve(window time.Duration) *ldc {
	from := o.now.Add(-window)
	c := &ldc{}
	// Points that end by from add nothing: start at the one in force at
	// from (the history keeps days more than a window).
	first := max(sort.Search(len(o.pts), func(i int) bool { return o.pts[i].At.After(from) })-1, 0)
	segs := make([]seg, 0, len(o.pts)-first)
	for i := first; i < len(o.pts); i++ {
		p := o.pts[i]
		end := o.now
		if i+1 < len(o.pts) {
			end = o.pts[i+1].At
		}
		start := p.At
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			segs = append(segs, seg{p.Milli, end.Sub(start)})
			c.span += end.Sub(start)
		}
	}
	c.segs = segs
	return c
}

// sort builds the curve's levels from its segments.
func (c *ldc) sort() {
	segs := c.segs
	c.levels, c.cum = make([]int64, 0, len(segs)), make([]time.Duration, 0, len(segs))
	slices.SortFunc(segs, func(a, b seg) int {
		switch {
		case a.level > b.level:
			return -1
		case a.level < b.level:
			return 1
		}
		return 0
	})
	var sum time.Duration
	for _, s := range segs {
		sum += s.d
		if n := len(c.levels); n > 0 && c.levels[n-1] == s.level {
			c.cum[n-1] = sum
			continue
		}
		c.levels = append(c.levels, s.level)
		c.cum = append(c.cum, sum)
	}
}

// expectedUse is what a committed term of plan p on n machines of offer
// off is expected to serve, in milli-GPU-seconds, when it goes on top of
// committed capacity level (milli-GPUs): its GPUs × the time over the
// last term, at most horizon (or the history there is, hold), that demand
// reached the middle of its slice. hold is the time the forecast covers.
// why is formatted by the caller, with expectedWhy, only when it is used.
func (o *Outlook) expectedUse(off *core.Offer, p *core.PricePlan, n int, level int64, horizon time.Duration) (use int64, hold, above time.Duration) {
	if o == nil || !p.Committed() || p.Term <= 0 || horizon <= 0 {
		return 0, 0, 0
	}
	capMilli := int64(n) * int64(off.CapMilli())
	above, span := o.Above(level+capMilli/2, min(time.Duration(p.Term)*time.Second, horizon))
	if span <= 0 {
		return 0, 0, 0
	}
	return capMilli * int64(above/time.Second), span, above
}

// expectedWhy says why expectedUse expects what it does.
func expectedWhy(above, span time.Duration) string {
	return "demand stood above its place on the committed capacity " + above.Round(time.Minute).String() + " of the last " + span.Round(time.Minute).String()
}
