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
func (p *pass) deferral(u Unit) (Deferral, bool) {
	j := u.Job
	tou := p.st.TimeOfUse
	if tou == nil || j.EstDuration <= 0 || !(j.Deferrable || j.Tier == core.TierOffline) {
		return Deferral{}, false
	}
	latest := p.st.Now.Add(p.cfg.DeferHorizon)
	if !j.Deadline.IsZero() {
		latest = minTime(latest, j.Deadline.Add(-j.EstDuration))
	}
	if !latest.After(p.st.Now) {
		return Deferral{}, false
	}
	key := j.EstDuration + time.Duration(latest.Unix())*time.Nanosecond // distinct per (duration, latest)
	ans, seen := p.deferCache[key]
	if !seen {
		ans = bestStart(tou, p.st.Now, latest, j.EstDuration, p.cfg.DeferMinSavingBP)
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
// by at least minBP.
func bestStart(tou *core.TimeOfUse, now, latest time.Time, d time.Duration, minBP int64) deferAnswer {
	plan := &core.PricePlan{Mode: core.OnDemand, Price: core.MicrosPerUnit, Per: core.Hour, Granularity: 1, TimeOfUse: tou}
	cost := func(s time.Time) core.Micros {
		b, _ := billing.Cost(plan, billing.Span{Start: s, End: s.Add(d)})
		return b.Amount
	}
	nowCost := cost(now)
	best, bestCost := now, nowCost
	lt := now.In(tou.Location)
	into := time.Duration(lt.Minute())*time.Minute + time.Duration(lt.Second())*time.Second + time.Duration(lt.Nanosecond())
	for s := now.Add(time.Hour - into); !s.After(latest); s = s.Add(time.Hour) {
		if c := cost(s); c < bestCost {
			best, bestCost = s, c
		}
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
