package server

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// TestLoopPolicyTimeOfUseAndModes: the loop shifts deferrable work into
// Config.TimeOfUse's cheaper window (an offline job at 09:00 with 70% off
// from 12:00 waits, and nothing is rented), and rents only RentOffers
// (with the time-of-use tariff off, the same job is rented for at once,
// on the offer of the allowed mode). Before, serve set neither.
func TestLoopPolicyTimeOfUseAndModes(t *testing.T) {
	tou := &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{
		Weekdays:  []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday},
		StartHour: 12, EndHour: 18, MultiplierBP: 3000}}}
	offers := []core.Offer{
		{ID: "test/r1/cheap", Provider: "test", Region: "r1", InstanceType: "cheap", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960, VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
			Plans: []core.PricePlan{{Mode: core.Spot, Price: 500_000, Per: core.Hour, Granularity: 1}}},
		{ID: "test/r1/tou", Provider: "test", Region: "r1", InstanceType: "tou", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960, VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
			Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 1, TimeOfUse: tou}}},
	}
	onDemand := offers[1:]
	for _, tc := range []struct {
		name      string
		tou       *core.TimeOfUse
		wantLease bool
	}{
		{"shifting", tou, false},
		{"no shifting", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(t0) // Monday 09:00 UTC
			cloud, err := sim.New(sim.Config{Offers: offers, Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(time.Minute)}})
			if err != nil {
				t.Fatal(err)
			}
			st, err := sqlite.Open(ctx, t.TempDir()+"/p.db", sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Teams().CreateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1}); err != nil {
				t.Fatal(err)
			}
			loop, err := NewLoop(Config{Store: st, Provider: cloud, Offers: offers, RentOffers: onDemand, TimeOfUse: tc.tou, Clock: clk, Executor: VirtualTime{},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}})
			if err != nil {
				t.Fatal(err)
			}
			w := &world{t: t, st: st, cloud: cloud, clk: clk, loop: loop}
			// Interruptible: spot would be its cheapest offer, were spot allowed.
			j := core.Job{ID: "j1", Team: "a", Tier: core.TierOffline, Interruptible: true, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, EstDuration: time.Hour, Submit: clk.Now()}
			if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
				t.Fatal(err)
			}
			w.run(2 * time.Hour)
			ls := w.leases()
			if got := len(ls) > 0; got != tc.wantLease {
				t.Fatalf("leases %+v; want a lease: %v", ls, tc.wantLease)
			}
			for _, l := range ls {
				if l.OfferID != "test/r1/tou" {
					t.Errorf("lease %s on %s: want only the on-demand offer RentOffers allows", l.ID, l.OfferID)
				}
			}
			if n := len(w.events("defer")); (n > 0) == tc.wantLease {
				t.Errorf("%d defer events; want some only when shifting", n)
			}
		})
	}
}
