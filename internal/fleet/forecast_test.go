package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A month is bought for a short job only when the forecast's least busy
// day of the last week keeps it busy enough to beat on demand over the
// week the history covers; a quiet day in that week, or no history,
// rents on demand. The month is priced whole, early-termination rule or
// not: the fleet never ends a term early.
func TestAcquireBuysTermsOnTheForecast(t *testing.T) {
	month := core.Month.Seconds()
	os := []core.Offer{
		{ID: "od", GPUModel: "T4", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 8_000_000, Per: core.Hour, Granularity: 1}}},
		{ID: "idc", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.Monthly, Price: 1_000_000_000, Per: core.Month, Granularity: month, Term: month,
			EarlyTermination: &core.EarlyTermination{Granularity: 86400, Fee: 1_000_000}}}},
	}
	d := demandFor("burst", core.TierCore, 30*time.Minute, false)
	d.Unit.Job.Request.GPUs = 8
	week := func(quiet int) *Outlook {
		var pts []DemandPoint
		for h := 7*24 + 1; h > 0; h-- {
			m := int64(20000)
			if (h-1)/24 == quiet {
				m = 0
			}
			pts = append(pts, DemandPoint{At: now.Add(-time.Duration(h) * time.Hour), Milli: m})
		}
		return NewOutlook(now, pts, nil)
	}
	pick := func(out *Outlook) Acquisition {
		t.Helper()
		acq := Acquire(now, []Demand{d}, nil, os, nil, 0, out, nil, Config{})
		if len(acq) != 1 {
			t.Fatalf("acquired %+v, want one machine", acq)
		}
		return acq[0]
	}
	// 1000 for 8 GPUs × 168 h: 0.74 per GPU-hour against 1 on demand.
	if a := pick(week(-1)); a.Offer.ID != "idc" || !strings.Contains(a.Reason, "the forecast expects") {
		t.Errorf("a steady week: rented %s %s (%s), want the month", a.Offer.ID, a.Mode, a.Reason)
	}
	if a := pick(week(3)); a.Offer.ID != "od" {
		t.Errorf("a week with a quiet day: rented %s %s (%s), want on demand", a.Offer.ID, a.Mode, a.Reason)
	}
	if a := pick(nil); a.Offer.ID != "od" {
		t.Errorf("no history: rented %s %s (%s), want on demand", a.Offer.ID, a.Mode, a.Reason)
	}
	if a := pick(week(-1)); a.ExpectedCost != 1_000_000_000 {
		t.Errorf("the month is priced at %s, want the whole term, 1000", a.ExpectedCost)
	}
}

// A term longer than the outlook is bought on the forecast only when the
// forecast keeps it busier than its break-even against renting on demand
// whenever it is needed (BreakEvenBP): a week at 0.372 per GPU-hour
// against 1.00 on demand needs 37.2% of the time. Below that, a week
// priced on what it would serve can still look cheaper than a minute of
// on demand charged for a one-second job, and was bought for bursts.
func TestAcquireBuysALongTermOnlyAboveItsBreakEven(t *testing.T) {
	week := 7 * 24 * 3600 * int64(1)
	os := []core.Offer{
		{ID: "od", GPUModel: "T4", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 8_000_000, Per: core.Hour, Granularity: 1, MinCharge: 60}}},
		{ID: "idc", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.Weekly, Price: 500_000_000, Per: core.Week, Granularity: week, Term: week}}},
	}
	if got := BreakEvenBP(&os[1], &os[1].Plans[0], os); got != 3720 {
		t.Fatalf("BreakEvenBP(week) = %d, want 3720", got)
	}
	d := demandFor("blip", core.TierCore, time.Second, false)
	d.Unit.Job.Request.GPUs = 8
	busyHours := func(h int) *Outlook { // each of the last 7 days busy h hours
		var pts []DemandPoint
		for k := 7*24 + 1; k > 0; k-- {
			m := int64(0)
			if k%24 < h {
				m = 20000
			}
			pts = append(pts, DemandPoint{At: now.Add(-time.Duration(k) * time.Hour), Milli: m})
		}
		return NewOutlook(now, pts, nil)
	}
	for _, tc := range []struct {
		hours int
		want  string
	}{
		{7, "od"},   // 29%: 500 for 391 GPU-h, 1.28 per GPU-hour, under the break-even
		{12, "idc"}, // 50%
	} {
		acq := Acquire(now, []Demand{d}, nil, os, nil, 0, busyHours(tc.hours), nil, Config{})
		if len(acq) != 1 || acq[0].Offer.ID != tc.want {
			t.Errorf("busy %d h a day: rented %+v, want %s", tc.hours, acq, tc.want)
		}
	}
}
