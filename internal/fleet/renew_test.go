package fleet

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestRenewalTerm: a machine renews on the term under which the work
// that cannot leave it costs least — a week only when seven days of it
// cost more than the week, a month only when the weeks and days do — and
// on the shortest term when nothing holds it or the prices tie.
func TestRenewalTerm(t *testing.T) {
	plan := func(mode core.BillingMode, price core.Micros, per core.Period) core.PricePlan {
		p := core.PricePlan{Mode: mode, Price: price, Per: per, Granularity: per.Seconds()}
		if mode != core.OnDemand {
			p.Term = per.Seconds()
		}
		return p
	}
	// The IDC price book's V100 machine: 80 a day, 500 a week, 2,000 a
	// month of 730 hours.
	v100 := func(weekly core.Micros) *core.Offer {
		return &core.Offer{ID: "v100x8", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{
			plan(core.Daily, 80_000_000, core.Day), plan(core.Weekly, weekly, core.Week), plan(core.Monthly, 2_000_000_000, core.Month)}}
	}
	at := time.Date(2024, 1, 8, 3, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name     string
		weekly   core.Micros
		busy     time.Time
		want     core.BillingMode
		wantCost core.Micros
	}{
		{"nothing holds it", 500_000_000, time.Time{}, core.Daily, 80_000_000},
		{"work ended before the boundary", 500_000_000, at.Add(-time.Hour), core.Daily, 80_000_000},
		{"five days: five days cost less than the week", 500_000_000, at.Add(5 * day), core.Daily, 400_000_000},
		{"six days exactly: 480 against 500", 500_000_000, at.Add(6 * day), core.Daily, 480_000_000},
		{"six days and a minute: seven days, 560 against 500", 500_000_000, at.Add(6*day + time.Minute), core.Weekly, 500_000_000},
		{"ten days: the week and three days", 500_000_000, at.Add(10 * day), core.Weekly, 740_000_000},
		{"26 days: the month, 2,000 against 2,020 in weeks and days", 500_000_000, at.Add(26 * day), core.Monthly, 2_000_000_000},
		{"a tie goes to the shorter term", 560_000_000, at.Add(7 * day), core.Daily, 560_000_000},
	} {
		p, cost, ok := RenewalTerm(v100(tc.weekly), at, tc.busy)
		if !ok || p.Mode != tc.want || cost != tc.wantCost {
			t.Errorf("%s: %v %s %v, want %s %s", tc.name, p.Mode, cost, ok, tc.want, tc.wantCost)
		}
		if why := RenewalReason(p, cost, at, tc.busy); !strings.Contains(why, string(tc.want)) {
			t.Errorf("%s: reason %q does not name %s", tc.name, why, tc.want)
		}
	}
	onDemand := &core.Offer{ID: "t4", GPUs: 1, Plans: []core.PricePlan{plan(core.OnDemand, 500_000, core.Hour)}}
	if p, _, ok := RenewalTerm(onDemand, at, at.Add(30*day)); ok {
		t.Errorf("an offer with no committed plan: renews on %s, want none", p.Mode)
	}
}

// TestRenewalTermNeverDearer: whatever the prices and the known need,
// the term chosen costs no more for that need than renewing on the
// shortest term for it, costs at least its own bill, and a machine
// nothing holds past the boundary renews on the shortest unless a
// longer term costs less outright.
func TestRenewalTermNeverDearer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		daily := core.Micros(rapid.Int64Range(1, 500).Draw(t, "daily")) * 1_000_000
		weekly := core.Micros(rapid.Int64Range(1, 5000).Draw(t, "weekly")) * 1_000_000
		monthly := core.Micros(rapid.Int64Range(1, 20000).Draw(t, "monthly")) * 1_000_000
		o := &core.Offer{ID: "o", GPUs: 8, Plans: []core.PricePlan{
			{Mode: core.Daily, Price: daily, Per: core.Day, Granularity: 86400, Term: 86400},
			{Mode: core.Weekly, Price: weekly, Per: core.Week, Granularity: 7 * 86400, Term: 7 * 86400},
			{Mode: core.Monthly, Price: monthly, Per: core.Month, Granularity: core.Month.Seconds(), Term: core.Month.Seconds()},
		}}
		at := time.Date(2024, 1, 8, 3, 0, 0, 0, time.UTC)
		need := time.Duration(rapid.Int64Range(-48, 24*90).Draw(t, "need hours")) * time.Hour
		p, cost, ok := RenewalTerm(o, at, at.Add(need))
		if !ok {
			t.Fatal("no term")
		}
		days := max(int64((need+24*time.Hour-1)/(24*time.Hour)), 1)
		if byDay := daily * core.Micros(days); cost > byDay {
			t.Fatalf("%s for %s costs %s, more than %d days at %s", p.Mode, need, cost, days, daily)
		}
		bill, _ := TermBill(at, p)
		if cost < bill {
			t.Fatalf("%s priced %s, under its own term's bill %s", p.Mode, cost, bill)
		}
		wk, _ := TermBill(at, &o.Plans[1])
		mo, _ := TermBill(at, &o.Plans[2])
		if need <= 0 && daily <= min(wk, mo) && p.Mode != core.Daily {
			t.Fatalf("nothing holds it and a day is the cheapest term, yet it renews on %s", p.Mode)
		}
	})
}
