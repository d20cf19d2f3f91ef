package fleet

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestBreakEvenBP(t *testing.T) {
	plan := func(mode core.BillingMode, price core.Micros, per core.Period) core.PricePlan {
		return core.PricePlan{Mode: mode, Price: price, Per: per, Granularity: per.Seconds()}
	}
	v100 := core.Offer{ID: "v100x8", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{plan(core.Daily, 80_000_000, core.Day)}}
	t4 := func(gpus int, hourly core.Micros) core.Offer {
		return core.Offer{ID: "t4", GPUModel: "T4", GPUs: gpus, Plans: []core.PricePlan{plan(core.OnDemand, hourly, core.Hour)}}
	}
	for _, tc := range []struct {
		name   string
		offers []core.Offer
		want   int64
	}{
		// 80 a day is 0.416667 per GPU-hour; 7.824 an hour is 0.978.
		{"an 8-GPU machine on demand", []core.Offer{v100, t4(8, 7_824_000)}, 4260},
		{"a 1-GPU machine is cheaper but holds no 8-GPU gang", []core.Offer{v100, t4(1, 420_000), t4(8, 7_824_000)}, 4260},
		{"nothing large enough on demand", []core.Offer{v100, t4(1, 420_000)}, 0},
		{"a term dearer than on demand: always", []core.Offer{v100, t4(8, 2_000_000)}, 10000},
	} {
		if got := BreakEvenBP(&v100, &v100.Plans[0], tc.offers); got != tc.want {
			t.Errorf("%s: %d bp, want %d", tc.name, got, tc.want)
		}
	}
}
