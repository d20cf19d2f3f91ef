package sim

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/bound"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
)

// boundOffers is a catalog with every kind of price the LP bound models:
// on-demand with an off-peak window, spot, daily, weekly and monthly
// terms, an early-termination rule, and a model only some jobs may use.
func boundOffers() []core.Offer {
	day, week, month := int64(86400), int64(7*86400), core.Month.Seconds()
	offPeak := &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: []time.Weekday{0, 1, 2, 3, 4, 5, 6}, StartHour: 22, EndHour: 6, MultiplierBP: 5000}}}
	return []core.Offer{
		{ID: "cloud/a100x8", Provider: "cloud", GPUModel: "A100", GPUs: 8, GPUMemMiB: 40960, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 24_000_000, Per: core.Hour, Granularity: 1, MinCharge: 60},
			{Mode: core.Spot, Price: 9_000_000, Per: core.Hour, Granularity: 1, MinCharge: 60, Reclaim: &core.ReclaimModel{Bucket: "5-10%", MonthlyRateBP: 750, NoticeSeconds: 120}},
			{Mode: core.Monthly, Price: 10_000_000_000, Per: core.Month, Granularity: month, Term: month},
		}},
		{ID: "idc/a100x8", Provider: "idc", GPUModel: "A100", GPUs: 8, GPUMemMiB: 81920, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 14_000_000, Per: core.Hour, Granularity: 3600, MinCharge: 3600, TimeOfUse: offPeak},
			{Mode: core.Daily, Price: 260_000_000, Per: core.Day, Granularity: day, Term: day},
			{Mode: core.Weekly, Price: 1_600_000_000, Per: core.Week, Granularity: week, Term: week},
			{Mode: core.Monthly, Price: 6_300_000_000, Per: core.Month, Granularity: month, Term: month, EarlyTermination: &core.EarlyTermination{Granularity: day, Fee: 200_000_000}},
		}},
		{ID: "cloud/t4x1", Provider: "cloud", GPUModel: "T4", GPUs: 1, GPUMemMiB: 16384, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 1_200_000, Per: core.Hour, Granularity: 1, MinCharge: 60},
			{Mode: core.Daily, Price: 20_000_000, Per: core.Day, Granularity: day, Term: day},
		}},
	}
}

// genWorkload draws a small workload: a few dozen jobs over up to three
// days, every tier, shared and whole GPUs, some restricted to A100, some
// deferrable with deadlines.
func genWorkload(t *rapid.T) *Workload {
	w := &Workload{Actual: map[string]time.Duration{}}
	n := rapid.IntRange(1, 25).Draw(t, "jobs")
	tiers := []core.Tier{core.TierCore, core.TierRegular, core.TierOffline}
	for i := range n {
		at := t0.Add(time.Duration(rapid.IntRange(0, 72*60).Draw(t, "submit_min")) * time.Minute)
		d := time.Duration(rapid.IntRange(1, 30*60).Draw(t, "dur_min")) * time.Minute
		tier := tiers[rapid.IntRange(0, 2).Draw(t, "tier")]
		j := &core.Job{ID: fmt.Sprintf("j%02d", i), Team: "t", Tier: tier, Submit: at, EstDuration: d,
			Request:            core.Request{GPUs: rapid.SampledFrom([]int{1, 1, 2, 4, 8}).Draw(t, "gpus"), MilliPerGPU: core.WholeGPU},
			Interruptible:      tier != core.TierCore && rapid.Bool().Draw(t, "intr"),
			CheckpointInterval: 15 * time.Minute}
		if j.Request.GPUs == 1 && rapid.IntRange(0, 3).Draw(t, "share") == 0 {
			j.Request.MilliPerGPU = 500
		}
		if rapid.IntRange(0, 3).Draw(t, "a100") == 0 {
			j.Request.Models = []string{"A100"}
		}
		if tier == core.TierOffline {
			j.Deferrable = true
			j.Deadline = at.Add(3 * d)
		}
		w.Jobs = append(w.Jobs, j)
		w.Actual[j.ID] = d
	}
	return w
}

// TestLPBoundBetweenPriceBoundAndPolicies: on small generated workloads the
// LP bound is at least the price bound and at most what every policy pays
// in the simulator.
func TestLPBoundBetweenPriceBoundAndPolicies(t *testing.T) {
	offers := boundOffers()
	tou := offers[1].Plans[0].TimeOfUse
	// Each check replays every policy: keep the default run short.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		_ = f.Value.Set("15")
		defer f.Value.Set("100")
	}
	rapid.Check(t, func(rt *rapid.T) {
		w := genWorkload(rt)
		price, err := PriceBound(w, offers, tou)
		if err != nil {
			rt.Fatal(err)
		}
		lp, err := LPBound(w, offers, bound.Options{Iterations: 100})
		if err != nil {
			rt.Fatal(err)
		}
		if lp.Cost < price-core.Micros(lp.Jobs) { // the price bound rounds per job
			rt.Fatalf("LP bound %s below the price bound %s", lp.Cost, price)
		}
		for _, name := range policy.PresetNames {
			p, _ := policy.Preset(name)
			cfg := Config{Workload: w, Offers: offers, TimeOfUse: tou, Seed: 3, Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute)}}}
			// Every run must end: a policy that keeps stepping is a bug (the
			// test found one: a deadline shorter than provisioning left a
			// job waiting forever).
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			r, err := Run(ctx, cfg, p)
			cancel()
			if err != nil {
				rt.Fatalf("%s: %v", name, err)
			}
			if r.Cost < lp.Cost {
				rt.Fatalf("%s pays %s, below the LP bound %s (price bound %s)", name, r.Cost, lp.Cost, price)
			}
		}
	})
}
