package server

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
)

// TestRenewalSurvivesRestart: the live loop renews a daily machine whose
// core job runs on for nine more days on a week at its first boundary,
// the store keeps the lease on its week with its day as an earlier term,
// the ledger bills both (80 + 500), and after a restart the loop reads
// the lease as it was and goes on scheduling.
func TestRenewalSurvivesRestart(t *testing.T) {
	offers := []core.Offer{{ID: "idc/r1/v100x1", Provider: "idc", Region: "r1", InstanceType: "v100x1", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960,
		VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
		Plans: []core.PricePlan{
			{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: 86400, Term: 86400},
			{Mode: core.Weekly, Price: 500_000_000, Per: core.Week, Granularity: 7 * 86400, Term: 7 * 86400},
		}}}
	w := newWorld(t)
	cloud, err := sim.New(sim.Config{Offers: offers, Source: rand.NewPCG(1, 2), Clock: w.clk, Default: sim.Settings{Delay: sim.Fixed(2 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	w.cloud, w.configure = cloud, func(c *Config) { c.Offers = offers }
	w.restart()

	w.submit("long", core.TierCore, 10*24*time.Hour)
	w.runEvery(24*time.Hour+10*time.Minute, time.Minute)
	ls := w.leases()
	if len(ls) != 1 {
		t.Fatalf("%d leases, want 1", len(ls))
	}
	l := ls[0]
	first := l.FirstStart()
	if l.Mode != core.Weekly || len(l.Earlier) != 1 || l.Earlier[0].Mode != core.Daily || !l.Start.Equal(first.Add(24*time.Hour)) {
		t.Fatalf("stored lease %s from %s after %v; want weekly from a day after its daily term of %s", l.Mode, l.Start, l.Earlier, first)
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: offers}
	now := w.clk.Now()
	in, err := ledger.Load(context.Background(), w.st, cat, first, now, now)
	if err != nil {
		t.Fatal(err)
	}
	u, err := ledger.Over(in, first)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bill != 580_000_000 || u.Leases != 1 {
		t.Errorf("ledger: %s over %d leases, want 580 (a day, then a week, each incurred when it starts) over 1", u.Bill, u.Leases)
	}

	w.restart()
	w.submit("next", core.TierCore, time.Hour)
	w.runEvery(10*time.Minute, time.Minute)
	if s := w.job("long").State; s != core.JobRunning {
		t.Errorf("long %s after the restart, want running", s)
	}
	ls = w.leases()
	renewed := 0
	for _, x := range ls {
		if x.ID == l.ID {
			if x.Mode != core.Weekly || len(x.Earlier) != 1 || !x.Start.Equal(l.Start) {
				t.Errorf("lease after the restart: %s from %s after %v; want as before", x.Mode, x.Start, x.Earlier)
			}
			renewed++
		}
	}
	if renewed != 1 {
		t.Errorf("lease %s not found after the restart", l.ID)
	}
	// The new work was scheduled: it runs on a machine rented for it
	// (the one GPU is the long job's).
	if s := w.job("next").State; s != core.JobRunning {
		t.Errorf("next %s 10 minutes after a restart, want running on a new machine", s)
	}
}
