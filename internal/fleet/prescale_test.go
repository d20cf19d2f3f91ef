package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// dailyPeak is a week of demand that rises from base to peak milli-GPUs
// at 10:30 each day (now is 10:00) and falls back at 12:00; quiet days
// (counted back from yesterday, 1) stay at base.
func dailyPeak(base, peak int64, quiet ...int) []DemandPoint {
	var pts []DemandPoint
	for k := 7; k >= 1; k-- {
		day := now.Add(-time.Duration(k) * 24 * time.Hour)
		p := peak
		for _, q := range quiet {
			if q == k {
				p = base
			}
		}
		pts = append(pts,
			DemandPoint{At: day.Add(-10 * time.Hour), Milli: base},
			DemandPoint{At: day.Add(30 * time.Minute), Milli: p},
			DemandPoint{At: day.Add(2 * time.Hour), Milli: base})
	}
	return append(pts, DemandPoint{At: now.Add(-10 * time.Hour), Milli: base})
}

// Prescale rents, half an hour before the daily peak, whole machines of
// the offer the work runs on for what the peak will need beyond the
// fleet's capacity, counting machines on their way; nothing without a
// day of history, when capacity covers the forecast, when the lead does
// not reach the peak, or when too few days of the quantile had it.
func TestPrescaleRentsAheadOfTheDailyPeak(t *testing.T) {
	os := []core.Offer{
		{ID: "a100x8", GPUModel: "A100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 32_000_000, Per: core.Hour, Granularity: 1}}},
		{ID: "v100x8-day", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.Daily, Price: 400_000_000, Per: core.Day, Granularity: 86400, Term: 86400}}},
	}
	busy := func(o *core.Offer, id string, alloc core.Milli, ready bool) Machine {
		m := Machine{Lease: &core.Lease{ID: id, Mode: o.Plans[0].Mode, Start: now.Add(-time.Hour), State: core.LeaseReady}, Offer: o, Plan: &o.Plans[0], AllocMilli: alloc}
		if ready {
			m.ReadyAt = now.Add(-50 * time.Minute)
		}
		return m
	}
	// 16 GPUs at work now (8 on the A100 machine, 8 on the V100 day);
	// the peak asks for 40.
	fleet := []Machine{busy(&os[0], "a", 8000, true), busy(&os[1], "v", 8000, true)}
	cfg := Config{PrescaleLead: 45 * time.Minute}
	for _, c := range []struct {
		name     string
		machines []Machine
		pts      []DemandPoint
		cfg      Config
		want     int
	}{
		{name: "peak ahead: 24 GPUs more in A100 machines", machines: fleet, pts: dailyPeak(16000, 40000), cfg: cfg, want: 3},
		{name: "off", machines: fleet, pts: dailyPeak(16000, 40000), cfg: Config{}, want: 0},
		{name: "lead short of the peak", machines: fleet, pts: dailyPeak(16000, 40000), cfg: Config{PrescaleLead: 20 * time.Minute}, want: 0},
		{name: "whole machines only: 7 GPUs short rents none", machines: fleet, pts: dailyPeak(16000, 23000), cfg: cfg, want: 0},
		{name: "one on its way counts", machines: append(fleet[:2:2], busy(&os[0], "boot", 0, false)), pts: dailyPeak(16000, 40000), cfg: cfg, want: 2},
		{name: "a quiet day: the least of the days has no peak", machines: fleet, pts: dailyPeak(16000, 40000, 3), cfg: cfg, want: 0},
		{name: "a quiet day: the median day has it", machines: fleet, pts: dailyPeak(16000, 40000, 3), cfg: Config{PrescaleLead: 45 * time.Minute, PrescaleQuantile: 50}, want: 3},
		{name: "no history", machines: fleet, pts: nil, cfg: cfg, want: 0},
		{name: "capped per step", machines: fleet, pts: dailyPeak(16000, 40000), cfg: Config{PrescaleLead: 45 * time.Minute, MaxAcquire: 2}, want: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Prescale(now, c.machines, nil, os, c.pts, nil, c.cfg)
			if len(got) != c.want {
				t.Fatalf("rented %d machines, want %d: %+v", len(got), c.want, got)
			}
			for _, a := range got {
				if a.Offer.ID != "a100x8" || a.Mode != core.OnDemand || len(a.For) != 0 {
					t.Errorf("rented %s %s for %v, want a100x8 on-demand for no unit", a.Offer.ID, a.Mode, a.For)
				}
				if !strings.Contains(a.Reason, "pre-scaled ahead of the daily peak: demand reached 40 GPUs within 45m0s") {
					t.Errorf("reason %q", a.Reason)
				}
			}
		})
	}
	// What this step rents already is capacity too.
	rented := []Acquisition{{Offer: &os[0], Mode: core.OnDemand}}
	if got := Prescale(now, fleet, rented, os, dailyPeak(16000, 40000), nil, cfg); len(got) != 2 {
		t.Errorf("with a machine rented this step: %d more, want 2", len(got))
	}
	// A machine that joined by hand runs most of the work, but its offer
	// is in no catalog: the catalog's offer that runs the rest is rented.
	hand := core.Offer{ID: "joined/box-1", GPUModel: "A100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 1, Per: core.Hour, Granularity: 1}}}
	withHand := append(fleet[:2:2], busy(&hand, "J1", 8000, true))
	withHand[0].AllocMilli = 4000
	if got := Prescale(now, withHand, nil, os, dailyPeak(16000, 40000), nil, cfg); len(got) != 2 || got[0].Offer != &os[0] {
		t.Errorf("with a joined machine busiest: rented %+v, want 2 of the catalog's a100x8", got)
	}
	// An offer held refused is passed over; with no other the fleet's work
	// runs on that has on-demand terms, nothing is rented.
	refused := []core.Refusal{{Offer: "a100x8", Mode: core.OnDemand, Until: now.Add(time.Hour)}}
	if got := Prescale(now, fleet, nil, os, dailyPeak(16000, 40000), refused, cfg); len(got) != 0 {
		t.Errorf("a100x8 on-demand refused: rented %+v, want nothing (the V100 day has no on-demand terms)", got)
	}
}
