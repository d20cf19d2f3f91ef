package billing

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestRenewedLease: a machine held a day on a daily term, then renewed
// on a week, is billed each term whole on its own plan (80 + 500), and a
// usage report over its life counts it once, with the run across the
// renewal counted once too.
func TestRenewedLease(t *testing.T) {
	daily := plan(core.Daily, "80").per(core.Day).term(86400).build(t)
	weekly := plan(core.Weekly, "500").per(core.Week).term(7 * 86400).build(t)
	o := &core.Offer{ID: "idc/v100x8", GPUs: 8, Plans: []core.PricePlan{*daily, *weekly}}
	day := 24 * time.Hour
	end := t0.Add(8 * day)
	l := &core.Lease{ID: "L1", OfferID: o.ID, Mode: core.Weekly, Start: t0.Add(day), End: end, Earlier: []core.Term{{Mode: core.Daily, Start: t0}}}
	b, err := LeaseCost(o, l, end, false)
	if err != nil {
		t.Fatal(err)
	}
	if b.Amount != money("580") || b.Billed != 8*86400 || !b.PaidUntil.Equal(end) {
		t.Errorf("bill %s for %d s paid until %s, want 580 for 8 days paid until %s", b.Amount, b.Billed, b.PaidUntil, end)
	}
	if l.FirstStart() != t0 {
		t.Errorf("first start %s, want %s", l.FirstStart(), t0)
	}
	terms, err := Terms(o, l, end, false)
	if err != nil {
		t.Fatal(err)
	}
	in := UsageInput{From: t0, To: end, Now: end,
		Runs:    []UsageRun{{Team: "a", LeaseID: "L1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, MilliPerGPU: 1000, From: t0, To: end}},
		Samples: []core.Sample{{LeaseID: "L1", GPU: 0, At: t0, UtilPct: 100}}}
	for _, tm := range terms {
		in.Leases = append(in.Leases, UsageLease{ID: "L1", Plan: tm.Plan, GPUs: 8, Start: tm.Span.Start, End: tm.Span.End})
	}
	u, err := UsageReport(in)
	if err != nil {
		t.Fatal(err)
	}
	eightDays := int64(8 * 86400 * 1000)
	if u.Bill != money("580") || u.Leases != 1 || len(u.Lines) != 1 || u.Lines[0].Cost != money("580") || u.Idle.Cost != 0 ||
		u.Lines[0].AllocatedMilliSeconds != 8*eightDays || u.Lines[0].SampledMilliSeconds != eightDays {
		t.Errorf("usage %+v: want 580 to team a, one lease, 8 GPUs for 8 days allocated, GPU 0 sampled for 8 days", u)
	}
	l.Mode = core.OnDemand
	if _, err := LeaseCost(o, l, end, false); err == nil {
		t.Error("a term on a mode the offer has no plan for was priced")
	}
}
