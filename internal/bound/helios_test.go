package bound

import (
	"os"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/trace"
)

const heliosPath = "../../../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv"

func heliosInput(tb testing.TB, catalog string) Input {
	tb.Helper()
	if _, err := os.Stat(heliosPath); err != nil {
		tb.Skipf("no Helios excerpt at %s", heliosPath)
	}
	tr, err := trace.LoadHelios(heliosPath)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := tr.Workload(trace.DefaultProfile())
	if err != nil {
		tb.Fatal(err)
	}
	cat := pricing.Demo()
	if catalog != "" {
		if cat, err = pricing.Load(catalog); err != nil {
			tb.Fatal(err)
		}
	}
	in := Input{Actual: map[string]time.Duration{}, Offers: cat.Offers}
	for i := range w.Jobs {
		j := &w.Jobs[i]
		in.Jobs = append(in.Jobs, j)
		in.Actual[j.ID] = j.EstDuration
	}
	return in
}

// BenchmarkHelios is the LP bound of the Helios excerpt (10,796 GPU jobs).
func BenchmarkHelios(b *testing.B) {
	in := heliosInput(b, os.Getenv("BOUND_CATALOG"))
	var r Result
	for b.Loop() {
		var err error
		if r, err = LP(in, Options{Iterations: 1000}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r.Cost.Float(), "bound")
	b.Logf("%+v bound %s initial %s", r, r.Cost, r.Initial)
	_ = core.Micros(0)
}
