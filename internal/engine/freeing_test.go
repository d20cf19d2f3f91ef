package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Work that waits while the GPUs it needs free, by the estimated end of
// the work on them, before a machine rented now could be ready (the
// fleet's default delay, 3 minutes) takes those GPUs; a machine is
// rented only when they free later than that, or when the work on them
// overruns its estimate.
func TestFreedFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		// submitB is when b arrives; a runs from minute 3 (its wait
		// target, 1 minute, and its machine's delay, 2) to minute 13 by
		// its estimate, aRuns in fact.
		submitB time.Duration
		aRuns   time.Duration
		gpus    int
		leases  int
		// bStartBy is the latest b may start, from t0.
		bStartBy time.Duration
		// zeroWait: every tier's wait target is zero, as the
		// autoscaler-style baselines have it: b is rented for at once.
		zeroWait bool
	}{
		{name: "frees in a minute", submitB: 12 * time.Minute, aRuns: 10 * time.Minute, gpus: 1, leases: 1, bStartBy: 13 * time.Minute},
		{name: "frees at the delay", submitB: 10 * time.Minute, aRuns: 10 * time.Minute, gpus: 1, leases: 1, bStartBy: 13 * time.Minute},
		{name: "frees after the delay", submitB: 9 * time.Minute, aRuns: 10 * time.Minute, gpus: 1, leases: 2, bStartBy: 11 * time.Minute},
		{name: "gang over machines", submitB: 12 * time.Minute, aRuns: 10 * time.Minute, gpus: 2, leases: 2, bStartBy: 13 * time.Minute},
		// a overruns: at minute 13 its estimate has passed, b is rented
		// for at once and starts when that machine is ready.
		{name: "estimate overrun", submitB: 12 * time.Minute, aRuns: 40 * time.Minute, gpus: 1, leases: 2, bStartBy: 15 * time.Minute},
		// a rents at once too: it runs from minute 2 to 12, and b, rented
		// for at minute 11, takes a's GPU when it frees at 12.
		{name: "zero wait target", submitB: 11 * time.Minute, aRuns: 10 * time.Minute, gpus: 1, leases: 2, bStartBy: 12 * time.Minute, zeroWait: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			if tc.zeroWait {
				cfg.Fleet.WaitTarget = map[core.Tier]time.Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}
			}
			h := newHarness(t, []core.Offer{hourlyOffer("gpu1", "A100", 1, "4")}, cfg)
			h.submit(job("a", core.TierCore, tc.gpus, 10*time.Minute), tc.aRuns)
			h.onTick = func(h *harness) {
				if h.now.Sub(t0) == tc.submitB {
					h.submit(job("b", core.TierCore, tc.gpus, 5*time.Minute), 5*time.Minute)
				}
			}
			h.runUntil(t0.Add(30 * time.Minute))
			if len(h.st.Leases) != tc.leases {
				t.Errorf("%d leases, want %d", len(h.st.Leases), tc.leases)
				for _, e := range h.eventsOf("acquire") {
					t.Logf("%s acquire: %s", e.At.Sub(t0), e.Reason)
				}
			}
			var b *Unit
			for _, u := range h.st.Units {
				if u.Job.ID == "b" {
					b = u
				}
			}
			if b == nil || b.Start.IsZero() {
				t.Fatalf("b never started")
			}
			if got := b.Start.Sub(t0); got > tc.bStartBy {
				t.Errorf("b started at %s, want by %s", got, tc.bStartBy)
			}
		})
	}
}
