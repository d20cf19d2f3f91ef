package plan

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestClassesPricePerWholeGPU: a GPU class's price is per whole GPU, so a
// quarter-GPU slice at 0.25 an hour costs 1 a GPU-hour, not 0.25, and
// an 8-GPU machine at 8 an hour costs 1 too.
func TestClassesPricePerWholeGPU(t *testing.T) {
	hourly := func(id string, gpus int, slice core.Milli, price core.Micros) core.Offer {
		return core.Offer{ID: id, Provider: "c", GPUModel: "L4", GPUs: gpus, SliceMilli: slice, Currency: "USD",
			Plans: []core.PricePlan{{Mode: core.OnDemand, Price: price, Per: core.Hour, Granularity: 3600}}}
	}
	for _, o := range []core.Offer{hourly("quarter", 1, 250, 250_000), hourly("eight", 8, 0, 8_000_000)} {
		c := mustClasses(o)
		if len(c) != 1 || len(c[0].Periods) == 0 {
			t.Fatalf("%s: classes %+v", o.ID, c)
		}
		if p := c[0].Periods[0].Price; p != core.MicrosPerUnit {
			t.Errorf("%s: %s per GPU-period, want 1", o.ID, p)
		}
	}
}
