package plan

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestShiftToOffPeak: deferrable day work moves to the night window at
// half price, and no further than the class's peak allows in any hour.
func TestShiftToOffPeak(t *testing.T) {
	gpus := bump(flat(24, 0), 10, 14, 4)
	s := series("G", gpus)
	s.Classes[0].Deferrable = append([]int64(nil), gpus...)
	prices := mustClasses(offer("o", "G", 1).hourlyTOU("10", 22, 6, 5000).build())
	for _, solver := range []Solver{SolverDecomposed, SolverLP} {
		p, err := PlanPortfolio(PortfolioRequest{Demand: s, Prices: prices, Solver: solver, NoSensitivity: true})
		if err != nil {
			t.Fatal(err)
		}
		c := p.Classes[0]
		got := []any{c.Cost.String(), c.ShiftedGPUHours, c.OnDemandPeak, c.Baselines.AllOnDemand.Cost.String(), c.Baselines.AllOnDemand.SavingBP}
		if diff := cmp.Diff([]any{"80.00", int64(16), int64(4), "160.00", int64(5000)}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", solver, diff)
		}
		for h, hp := range c.Hours {
			if hp.OnDemand > 4 || (hp.OnDemand > 0 && h >= 6 && h < 22) {
				t.Errorf("%s: hour %d runs %d GPUs on demand at the day price", solver, h, hp.OnDemand)
			}
		}
	}
}

// TestSpotWithReclaimOverhead: interruptible work goes to spot at the spot
// price plus the expected lost work: 73% monthly reclaims are 0.1% per
// hour, each losing half an hourly checkpoint plus a 10-minute restart
// (40 minutes), so a useful spot GPU-hour costs 3 × 1.000667 = 3.002.
func TestSpotWithReclaimOverhead(t *testing.T) {
	s := series("G", flat(10, 2))
	s.Classes[0].Interruptible = flat(10, 2)
	prices := mustClasses(offer("o", "G", 1).hourly("10").spot("3", 7300).build())
	p, err := PlanPortfolio(PortfolioRequest{Demand: s, Prices: prices, Spot: DefaultSpotModel, NoSensitivity: true})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{p.Cost.String(), p.SpotCost.String(), p.SpotOverhead.String(), p.SpotShareBP, p.OnDemandPeak}
	if diff := cmp.Diff([]any{"60.04", "60.04", "0.04", int64(10000), int64(0)}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestNoOnDemandReservesPeak: a class with committed terms only has to
// reserve its peak; the all-on-demand baseline has no price.
func TestNoOnDemandReservesPeak(t *testing.T) {
	p, err := PlanPortfolio(PortfolioRequest{Demand: series("G", bump(flat(730, 1), 0, 5, 2)), Prices: mustClasses(offer("o", "G", 1).monthly("100").build())})
	if err != nil {
		t.Fatal(err)
	}
	if p.Classes[0].Reserved != 3 || p.Cost != m("300") || p.Baselines.AllOnDemand.OK || p.OnDemandPeak != 0 {
		t.Errorf("reserved %d cost %s on-demand baseline %+v", p.Classes[0].Reserved, p.Cost, p.Baselines.AllOnDemand)
	}
	if len(p.Sensitivity) != 2 || p.Sensitivity[0].Cost != m("400") || p.Sensitivity[1].FixedBaseCost != m("300") {
		t.Errorf("sensitivity %+v", p.Sensitivity)
	}
}

// TestClassesPerGPU: per-GPU prices are the cheapest offer's per period,
// a machine's price over its GPUs, half to even.
func TestClassesPerGPU(t *testing.T) {
	cs := mustClasses(
		offer("a", "G", 8).hourly("21.957642").monthly("8000").build(),
		offer("b", "G", 1).hourly("3").weekly("450").build(),
	)
	var got []string
	for _, p := range cs[0].Periods {
		got = append(got, p.Name+" "+p.Price.String())
	}
	if diff := cmp.Diff([]string{"hour 2.744705", "week 450.00", "month 1000.00"}, got); diff != "" {
		t.Errorf("periods (-want +got):\n%s", diff)
	}
	if n := len(cs[0].OnDemand); n != 2 {
		t.Errorf("%d on-demand rates, want 2", n)
	}
}

func TestThroughputModels(t *testing.T) {
	benches := []Bench{{GPUs: 1, SamplesPerSecond: 100}, {GPUs: 4, SamplesPerSecond: 350}}
	tests := []struct {
		name     string
		s        Scaling
		n        int
		want     float64
		measured bool
	}{
		{"measured", Scaling{PerDoubling: 0.5}, 4, 350, true},
		{"linear from 1", Scaling{}, 2, 200, false},
		{"per doubling from 1", Scaling{PerDoubling: 0.9}, 2, 180, false},
		{"per doubling from 4", Scaling{PerDoubling: 0.9}, 8, 630, false},
		{"amdahl from 1", Scaling{SerialFraction: 0.1}, 3, 100 * 3 / 1.2, false},
		{"amdahl from 4", Scaling{SerialFraction: 0.1}, 8, 350 * (8 / 1.7) / (4 / 1.3), false},
	}
	for _, tt := range tests {
		got, measured := throughput(benches, tt.n, tt.s)
		if math.Abs(got-tt.want) > 1e-9*tt.want || measured != tt.measured {
			t.Errorf("%s: %v %v, want %v %v", tt.name, got, measured, tt.want, tt.measured)
		}
	}
}

func TestPlanJobValidation(t *testing.T) {
	offers := []core.Offer{offer("a", "NVIDIA A100", 8).weekly("1600").build()}
	ok := JobRequest{Benches: []Bench{{GPUModel: "A100", GPUs: 1, SamplesPerSecond: 1}}, Samples: 10, Epochs: 1, DeadlineSeconds: 3600, Offers: offers}
	tests := []struct {
		name string
		edit func(*JobRequest)
		want string
	}{
		{"no bench", func(r *JobRequest) { r.Benches = nil }, "bench: invalid value"},
		{"zero throughput", func(r *JobRequest) { r.Benches[0].SamplesPerSecond = 0 }, "bench[0].samples_per_s"},
		{"twice", func(r *JobRequest) { r.Benches = append(r.Benches, r.Benches[0]) }, "one measurement per model and GPU count"},
		{"overflow", func(r *JobRequest) { r.Samples, r.Epochs = math.MaxInt64/2, 3 }, "samples: invalid value"},
		{"both scalings", func(r *JobRequest) { r.Scaling = Scaling{PerDoubling: 0.9, SerialFraction: 0.1} }, "not both"},
		{"unknown model", func(r *JobRequest) { r.Benches[0].GPUModel = "H100" }, `unknown GPU class "H100"`},
	}
	for _, tt := range tests {
		r := ok
		r.Benches = append([]Bench(nil), ok.Benches...)
		tt.edit(&r)
		if _, err := PlanJob(r); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
	p, err := PlanJob(ok)
	if err != nil || p.Recommended < 0 || p.Options[p.Recommended].GPUs != 1 {
		t.Fatalf("plan %+v, %v", p, err)
	}
}

// TestBurstWeekOnWeeklyLeases is the seed's "4 monthly + 8 on demand for
// one burst week" where the burst can be rented by the week, as the seed's
// on-demand ("按需", by the hour, day or week) allows: 8 weekly leases at
// 450 instead of 8 × 168 h × 10 on demand.
func TestBurstWeekOnWeeklyLeases(t *testing.T) {
	prices := mustClasses(offer("o", "G", 1).hourly("10").weekly("450").monthly("1800").build())
	gpus := bump(flat(730, 4), 100, 268, 8)
	for _, leases := range []bool{false, true} {
		p, err := PlanPortfolio(PortfolioRequest{Demand: series("G", gpus), Prices: prices, BurstLeases: leases})
		if err != nil {
			t.Fatal(err)
		}
		c := p.Classes[0]
		got := []any{c.Reserved, c.Base.Describe(), c.OnDemandGPUHours, c.LeasedGPUHours, c.BurstLeases, p.Cost.String(), p.Baselines.AllMonthly.SavingBP}
		want := []any{int64(4), "1 month", int64(1344), int64(0), []BurstLease(nil), "20640.00", int64(444)}
		if leases {
			want = []any{int64(4), "1 month", int64(0), int64(1344),
				[]BurstLease{{Term: "1 week", Count: 8, StartHour: 100, Hours: 168, PaidHours: 168, PerGPU: m("450"), Cost: m("3600")}},
				"10800.00", int64(5000)}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("burst leases %v (-want +got):\n%s", leases, diff)
		}
	}
}

// TestBurstLeasesNeverCostMore: covering bursts with leases never raises
// the cost, and every hour's demand is served exactly once.
func TestBurstLeasesNeverCostMore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genRequest(t, 60, 6, true, true)
		without := solveWith(t, req, SolverDecomposed)
		req.BurstLeases = true
		with := solveWith(t, req, SolverDecomposed)
		if with.Cost > without.Cost {
			t.Fatalf("with leases %s > without %s", with.Cost, without.Cost)
		}
		in, err := newClassInput(req, req.Demand.Classes[0])
		if err != nil {
			t.Fatal(err)
		}
		for h, hp := range with.Classes[0].Hours {
			if got, want := hp.Reserved+hp.OnDemand+hp.Leased+hp.Spot, in.firm[h]+in.intr[h]+hp.Deferred; got != want {
				t.Fatalf("hour %d: served %d (%+v), demand %d", h, got, hp, want)
			}
		}
	})
}
