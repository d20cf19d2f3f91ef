package fleet

import (
	"fmt"
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
//
// Every question is answered through a plan.DemandIndex, which the engine
// keeps from step to step.
type Outlook struct {
	now time.Time
	pts []DemandPoint
	ix  *plan.DemandIndex
	// fc is the forecast longer terms are bought on, made at first use.
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
		o.fc, o.fcRead = plan.NewForecastIndexed(o.now, o.pts, plan.ForecastDays, o.ix), true
	}
	if o.fc == nil {
		return 0, 0, 0
	}
	capMilli := int64(n) * int64(off.CapMilli())
	busy, hold, bp := o.fc.ExpectedBusyBP(level+capMilli/2, term, ForecastQuantile)
	return capMilli * int64(busy/time.Second), hold, bp
}

// forecastWhy says why forecastUse expects what it does.
func forecastWhy(bp int64, hold time.Duration) string {
	return fmt.Sprintf("demand stood above its place on the committed capacity %d.%02d%% of the day on the %d%% quantile of the last %s, counted for that long", bp/100, bp%100, ForecastQuantile, hold.Round(time.Hour))
}

// NewOutlook reads pts (oldest first, each holding until the next, the
// last until now) through ix (a fresh index when nil; pts must not change
// while the Outlook is used). A nil Outlook forecasts nothing.
func NewOutlook(now time.Time, pts []DemandPoint, ix *plan.DemandIndex) *Outlook {
	if len(pts) == 0 {
		return nil
	}
	if ix == nil {
		ix = &plan.DemandIndex{}
	}
	return &Outlook{now: now, pts: pts, ix: ix}
}

// Above reports how long, over the last window (or the part of it there
// is history for, span), demand stood at or above level milli-GPUs.
func (o *Outlook) Above(level int64, window time.Duration) (above, span time.Duration) {
	if o == nil || window <= 0 {
		return 0, 0
	}
	from := o.now.Add(-window)
	if first := o.pts[0].At; from.Before(first) {
		from = first
	}
	if !o.now.After(from) {
		return 0, 0
	}
	return o.ix.Above(o.pts, level, from, o.now), o.now.Sub(from)
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
