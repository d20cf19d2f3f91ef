package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/plan"
)

func TestTimeAbove(t *testing.T) {
	at := func(h float64, milli int64) fleet.DemandPoint {
		return fleet.DemandPoint{At: t0.Add(time.Duration(h * float64(time.Hour))), Milli: milli}
	}
	pts := []fleet.DemandPoint{at(0, 5000), at(2, 20000), at(3, 8000), at(10, 12000)}
	now := t0.Add(12 * time.Hour)
	var ix plan.DemandIndex // one index for every question, as a State keeps it
	for _, tc := range []struct {
		name  string
		from  time.Time
		level int64
		want  time.Duration
	}{
		{"above 10 GPUs: 2-3 h and 10-12 h", t0, 10000, 3 * time.Hour},
		{"above 6 GPUs: from 2 h on", t0, 6000, 10 * time.Hour},
		{"the window starts inside a point", t0.Add(150 * time.Minute), 10000, 30*time.Minute + 2*time.Hour},
		{"above every point", t0, 20000, 0},
		{"below every point, window before the first", t0.Add(-time.Hour), 0, 12 * time.Hour},
	} {
		if got := timeAbove(&ix, pts, tc.from, now, tc.level); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRenewBreakEvenBP(t *testing.T) {
	plan := func(mode core.BillingMode, price string, per core.Period) core.PricePlan {
		return core.PricePlan{Mode: mode, Price: mustMoney(price), Per: per, Granularity: per.Seconds()}
	}
	v100 := core.Offer{ID: "v100x8", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{plan(core.Daily, "80", core.Day)}}
	lease := &Lease{Offer: &v100, Plan: &v100.Plans[0]}
	t4 := func(gpus int, hourly string) core.Offer {
		return core.Offer{ID: "t4", GPUModel: "T4", GPUs: gpus, Plans: []core.PricePlan{plan(core.OnDemand, hourly, core.Hour)}}
	}
	for _, tc := range []struct {
		name   string
		offers []core.Offer
		want   int64
	}{
		// 80 a day is 0.416667 per GPU-hour; 7.824 an hour is 0.978.
		{"an 8-GPU machine on demand", []core.Offer{v100, t4(8, "7.824")}, 4260},
		{"a 1-GPU machine is cheaper but holds no 8-GPU gang", []core.Offer{v100, t4(1, "0.42"), t4(8, "7.824")}, 4260},
		{"nothing large enough on demand", []core.Offer{v100, t4(1, "0.42")}, 0},
		{"a term dearer than on demand: always", []core.Offer{v100, t4(8, "2")}, 10000},
	} {
		if got := renewBreakEvenBP(lease, tc.offers); got != tc.want {
			t.Errorf("%s: %d bp, want %d", tc.name, got, tc.want)
		}
	}
}
