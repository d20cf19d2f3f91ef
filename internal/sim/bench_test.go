package sim

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// traceWorkload turns a trace into a workload the way "gpufleet sim"
// does: the default profile, and jobs no offer can run skipped.
func traceWorkload(tb testing.TB, tr trace.Trace, offers []core.Offer) *Workload {
	tb.Helper()
	tw, err := tr.Workload(trace.DefaultProfile())
	if err != nil {
		tb.Fatal(err)
	}
	return NewWorkload(tw, offers, 0)
}

// benchConfig is the CLI's default replay: the demo catalog, a 2-minute
// provisioning delay, seed 1.
func benchConfig(w *Workload) Config {
	cat := pricing.Demo()
	var tou *core.TimeOfUse
	for _, o := range cat.Offers {
		for _, p := range o.Plans {
			if p.TimeOfUse != nil && tou == nil {
				tou = p.TimeOfUse
			}
		}
	}
	return Config{Workload: w, Offers: cat.Offers, TimeOfUse: tou, Seed: 1,
		Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute)}}}
}

// benchSynthetic replays a synthetic trace of n jobs under the gpufleet
// policy and reports simulated events (decisions) and steps per second.
func benchSynthetic(b *testing.B, n int) {
	// Measure the engine as it runs: without the live view's check that
	// this package's tests run with (TestMain).
	was := engine.CheckViews(false)
	b.Cleanup(func() { engine.CheckViews(was) })
	gc := trace.DefaultGenConfig()
	gc.Jobs = n
	cfg := benchConfig(traceWorkload(b, trace.Generate(gc, 1), pricing.Demo().Offers))
	p, err := policy.Preset("gpufleet")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var events, steps int
	start := time.Now()
	for b.Loop() {
		r, err := Run(context.Background(), cfg, p)
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
		steps += r.Steps
	}
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(events)/secs, "events/s")
	b.ReportMetric(float64(steps)/secs, "steps/s")
}

// BenchmarkRunSynthetic10k: 10,000 synthetic jobs (about 4 months of
// arrivals) under the gpufleet policy.
func BenchmarkRunSynthetic10k(b *testing.B) { benchSynthetic(b, 10_000) }

// BenchmarkRunMillion: issue 5's speed target, 1,000,000 synthetic jobs
// under the gpufleet policy (run it with -benchtime 1x).
func BenchmarkRunMillion(b *testing.B) { benchSynthetic(b, 1_000_000) }
