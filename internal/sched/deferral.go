package sched

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
)

type deferAnswer struct {
	until    time.Time
	savingBP int64
	ok       bool
}

// deferral decides whether a deferrable unit should wait for a cheaper
// time-of-use window: offline or deferrable work with a duration
// estimate, when starting at a later local hour costs at least
// DeferMinSavingBP less and still meets the deadline. Costs come from the
// billing engine, so the saving is the one the bill will show.
func (p *pass) deferral(u Unit, w Waiting) (Deferral, bool) {
	j := u.Job
	tou := p.st.TimeOfUse
	if tou == nil || j.EstDuration <= 0 || !(j.Deferrable || j.Tier == core.TierOffline) {
		return Deferral{}, false
	}
	latest := p.st.Now.Add(p.cfg.DeferHorizon)
	// Never past the latest start (deadline less the work left, the wait
	// target) less the lead capacity takes to come: a deferred unit may
	// find no room when it wakes and need a machine rented.
	if at, ok := LatestStart(j, w, p.cfg); ok {
		latest = minTime(latest, at.Add(-p.cfg.RiskLead))
	}
	if !latest.After(p.st.Now) {
		return Deferral{}, false
	}
	key := j.EstDuration + time.Duration(latest.Unix())*time.Nanosecond // distinct per (duration, latest)
	ans, seen := p.deferCache[key]
	if !seen {
		var memo *runCosts
		if p.st.Scratch != nil {
			memo = &p.st.Scratch.runCosts
		}
		ans = bestStart(tou, p.st.Now, latest, j.EstDuration, p.cfg.DeferMinSavingBP, memo)
		p.deferCache[key] = ans
	}
	if !ans.ok {
		return Deferral{}, false
	}
	return Deferral{Unit: u, Until: ans.until, SavingBP: ans.savingBP,
		Reason: fmt.Sprintf("starting at %s instead of now costs %d.%02d%% less under the time-of-use tariff and still ends by %s",
			ans.until.In(tou.Location).Format("Mon 15:04 MST"), ans.savingBP/100, ans.savingBP%100, deadlineText(j))}, true
}

func deadlineText(j *core.Job) string {
	if j.Deadline.IsZero() {
		return "the deferral horizon"
	}
	return "its deadline " + j.Deadline.UTC().Format(time.RFC3339)
}

// bestStart prices running for d from now and from every local hour
// boundary up to latest, and returns the cheapest start if it beats now
// by at least minBP. memo, if not nil, keeps the prices between calls.
func bestStart(tou *core.TimeOfUse, now, latest time.Time, d time.Duration, minBP int64, memo *runCosts) deferAnswer {
	nowCost := memo.price(tou, now, d)
	best, bestCost := now, nowCost
	lt := now.In(tou.Location)
	into := time.Duration(lt.Minute())*time.Minute + time.Duration(lt.Second())*time.Second + time.Duration(lt.Nanosecond())
	first := now.Add(time.Hour - into)
	// The cheapest hour boundary (the earliest of equals) beats now only
	// if it costs less.
	if s, c, ok := memo.cheapest(tou, first, latest, d); ok && c < bestCost {
		best, bestCost = s, c
	}
	if nowCost <= 0 || best.Equal(now) {
		return deferAnswer{}
	}
	saving := core.MulDivHalfEven(int64(nowCost-bestCost), 10000, int64(nowCost))
	return deferAnswer{until: best, savingBP: saving, ok: saving >= minBP}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// runCost is what running for d from s costs at one unit per hour under
// the tariff tou.
func runCost(tou *core.TimeOfUse, s time.Time, d time.Duration) core.Micros {
	b, _ := billing.Cost(unitHour(tou), billing.Span{Start: s, End: s.Add(d)})
	return b.Amount
}

// unitHour is the plan runCost prices under: one unit per hour, billed
// by the second, under the tariff tou.
func unitHour(tou *core.TimeOfUse) *core.PricePlan {
	return &core.PricePlan{Mode: core.OnDemand, Price: core.MicrosPerUnit, Per: core.Hour, Granularity: 1, TimeOfUse: tou}
}

// price is runCost, priced with c's Pricer (when c is not nil) but not
// remembered.
func (c *runCosts) price(tou *core.TimeOfUse, s time.Time, d time.Duration) core.Micros {
	if c == nil {
		return runCost(tou, s, d)
	}
	b, _ := c.pr.Cost(unitHour(tou), billing.Span{Start: s, End: s.Add(d)})
	return b.Amount
}

// runCosts remembers runCost answers between passes. A pending deferrable
// unit is priced from every hour boundary of the next week at every
// pass, and the next pass asks for nearly the same starts (the hour
// boundaries do not move with now); pricing them afresh was most of the
// deferral's cost. It knows the tariff by its pointer, so a tariff must
// not change while it is in use; it forgets everything when the tariff
// changes or it grows past maxRunCosts. The zero value is empty; a nil
// one remembers nothing.
type runCosts struct {
	tou *core.TimeOfUse
	m   map[runKey]core.Micros
	// scans keeps cheapest's answers: consecutive passes within one hour
	// scan the same boundaries.
	scans map[scanKey]scanAnswer
	// pr keeps the tariff's weekly table for pricing what is not kept.
	pr billing.Pricer
}

type scanKey struct {
	first runKey
	n     int64
}

type scanAnswer struct {
	at   time.Time
	cost core.Micros
}

// cheapest returns the hour boundary first, first+1h, … up to latest
// where running for d costs least (the earliest of equals) and that cost,
// or ok false if first is after latest.
func (c *runCosts) cheapest(tou *core.TimeOfUse, first, latest time.Time, d time.Duration) (at time.Time, cost core.Micros, ok bool) {
	if first.After(latest) {
		return time.Time{}, 0, false
	}
	n := int64(latest.Sub(first)/time.Hour) + 1
	var k scanKey
	if c != nil {
		c.check(tou)
		k = scanKey{runKey{first.Unix(), first.Nanosecond(), d}, n}
		if a, seen := c.scans[k]; seen {
			return a.at, a.cost, true
		}
	}
	at, cost = first, c.cost(tou, first, d)
	for s := first.Add(time.Hour); !s.After(latest); s = s.Add(time.Hour) {
		if x := c.cost(tou, s, d); x < cost {
			at, cost = s, x
		}
	}
	if c != nil {
		c.scans[k] = scanAnswer{at, cost}
	}
	return at, cost, true
}

// check empties c when the tariff changed or c grew too large.
func (c *runCosts) check(tou *core.TimeOfUse) {
	if c.tou != tou || c.m == nil || c.scans == nil || len(c.m)+len(c.scans) >= maxRunCosts {
		if c.m == nil {
			c.m = map[runKey]core.Micros{}
		}
		if c.scans == nil {
			c.scans = map[scanKey]scanAnswer{}
		}
		clear(c.m)
		clear(c.scans)
		c.tou = tou
	}
}

type runKey struct {
	sec  int64
	nsec int
	d    time.Duration
}

// maxRunCosts bounds runCosts: a week of hour boundaries for a few
// hundred distinct durations.
const maxRunCosts = 1 << 16

func (c *runCosts) cost(tou *core.TimeOfUse, s time.Time, d time.Duration) core.Micros {
	if c == nil {
		return runCost(tou, s, d)
	}
	c.check(tou)
	k := runKey{s.Unix(), s.Nanosecond(), d}
	if v, ok := c.m[k]; ok {
		return v
	}
	v := c.price(tou, s, d)
	c.m[k] = v
	return v
}
