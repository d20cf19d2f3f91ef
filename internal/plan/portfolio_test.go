package plan

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const v100 = "NVIDIA Tesla V100"

// v100Offer is the seed's V100 at 1800 a month, with a constructed
// on-demand price of 10 an hour (the seed gives none): a committed GPU
// pays for itself after 180 busy hours.
func v100Offer() []ClassPrices {
	return mustClasses(offer("idc/v100", v100, 1).hourly("10").monthly("1800").build())
}

type portfolioSummary struct {
	Reserved           []Reservation
	OnDemandPeak       int64
	Cost               string
	AllOnDemand        string
	AllMonthly         string
	PeakSized          string
	SavingVsMonthlyBP  int64
	SavingVsOnDemandBP int64
	OnDemandGPUHours   int64
	IdleShareBP        int64
	Method             Solver
}

func summarize(p Portfolio) portfolioSummary {
	return portfolioSummary{
		Reserved: p.Reserved, OnDemandPeak: p.OnDemandPeak, Cost: p.Cost.String(),
		AllOnDemand: p.Baselines.AllOnDemand.Cost.String(), AllMonthly: p.Baselines.AllMonthly.Cost.String(),
		PeakSized: p.Baselines.PeakSized.Cost.String(), SavingVsMonthlyBP: p.Baselines.AllMonthly.SavingBP,
		SavingVsOnDemandBP: p.Baselines.AllOnDemand.SavingBP, OnDemandGPUHours: p.OnDemandGPUHours,
		IdleShareBP: p.IdleShareBP, Method: p.Method,
	}
}

// TestPortfolioSeedCases are the source document's portfolios, with
// series and prices constructed to represent them; the figures are what
// the arithmetic gives.
func TestPortfolioSeedCases(t *testing.T) {
	month := 730
	tests := []struct {
		name string
		gpus []int64
		want portfolioSummary
	}{
		{
			// "2 V100 monthly + 6 on demand at peak cut cost 65% against
			// all-monthly": 2 GPUs all month, 8 for a 24-hour peak.
			// Plan 2 × 1800 + 6 × 24 h × 10 = 5040; all-monthly 8 × 1800
			// = 14400; saving 9360 / 14400 = 65%.
			name: "2 monthly + 6 on demand at peak",
			gpus: bump(flat(month, 2), 300, 324, 6),
			want: portfolioSummary{
				Reserved:     []Reservation{{GPUModel: v100, Count: 2, Term: "1 month", PerGPU: m("1800"), Cost: m("3600")}},
				OnDemandPeak: 6, Cost: "5040.00", AllOnDemand: "16040.00", AllMonthly: "14400.00", PeakSized: "14400.00",
				SavingVsMonthlyBP: 6500, SavingVsOnDemandBP: 6858, OnDemandGPUHours: 144,
				IdleShareBP: 0, Method: SolverLDC,
			},
		},
		{
			// "2 GPUs daily, 10 during a sales peak" of one week: the
			// 8 extra GPUs are busy 168 h, less than the 180 h a monthly
			// term needs to pay for itself, so they go on demand.
			name: "2 daily, 10 for a peak week",
			gpus: bump(flat(month, 2), 336, 504, 8),
			want: portfolioSummary{
				Reserved:     []Reservation{{GPUModel: v100, Count: 2, Term: "1 month", PerGPU: m("1800"), Cost: m("3600")}},
				OnDemandPeak: 8, Cost: "17040.00", AllOnDemand: "28040.00", AllMonthly: "18000.00", PeakSized: "18000.00",
				SavingVsMonthlyBP: 533, SavingVsOnDemandBP: 3923, OnDemandGPUHours: 1344,
				Method: SolverLDC,
			},
		},
		{
			// "4 monthly + 8 on demand for one burst week".
			name: "4 monthly + 8 on demand for a burst week",
			gpus: bump(flat(month, 4), 100, 268, 8),
			want: portfolioSummary{
				Reserved:     []Reservation{{GPUModel: v100, Count: 4, Term: "1 month", PerGPU: m("1800"), Cost: m("7200")}},
				OnDemandPeak: 8, Cost: "20640.00", AllOnDemand: "42640.00", AllMonthly: "21600.00", PeakSized: "21600.00",
				SavingVsMonthlyBP: 444, SavingVsOnDemandBP: 5159, OnDemandGPUHours: 1344,
				Method: SolverLDC,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanPortfolio(PortfolioRequest{Demand: series(v100, tt.gpus), Prices: v100Offer()})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(p)); diff != "" {
				t.Errorf("portfolio (-want +got):\n%s", diff)
			}
			for _, s := range []Solver{SolverDecomposed} {
				q, err := PlanPortfolio(PortfolioRequest{Demand: series(v100, tt.gpus), Prices: v100Offer(), Solver: s, NoSensitivity: true})
				if err != nil {
					t.Fatal(err)
				}
				if q.Cost != p.Cost || !cmp.Equal(q.Reserved, p.Reserved) {
					t.Errorf("%s: cost %s reserved %v, want %s %v", s, q.Cost, q.Reserved, p.Cost, p.Reserved)
				}
			}
		})
	}
}

func TestPortfolioErrors(t *testing.T) {
	tests := []struct {
		name string
		req  PortfolioRequest
		want string
	}{
		{"empty series", PortfolioRequest{Demand: Series{}, Prices: v100Offer()}, `plan portfolio: demand: hours: invalid value "0": want a series of 1..87600 hours`},
		{"negative demand", PortfolioRequest{Demand: series(v100, []int64{1, -2}), Prices: v100Offer()}, `plan portfolio: demand: classes[NVIDIA Tesla V100].gpus[1]: invalid value "-2": want 0..1000000 GPUs`},
		{"unknown class", PortfolioRequest{Demand: series("NVIDIA H100", []int64{1}), Prices: v100Offer()}, `plan portfolio: demand for "NVIDIA H100": plan: unknown GPU class "NVIDIA H100": the catalog rents "NVIDIA Tesla V100"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PlanPortfolio(tt.req)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
		})
	}
	_, err := PlanPortfolio(PortfolioRequest{Demand: series("NVIDIA H100", []int64{1}), Prices: v100Offer()})
	if !errors.Is(err, ErrUnknownClass) {
		t.Errorf("unknown class: %v does not wrap ErrUnknownClass", err)
	}
}

// TestPortfolioProgress: progress counts every class solve, in order, up
// to their number: one per class, five with the sensitivity scenarios.
func TestPortfolioProgress(t *testing.T) {
	for _, tc := range []struct {
		name          string
		noSensitivity bool
		want          int
	}{{"with sensitivity", false, 5}, {"without", true, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			_, err := PlanPortfolio(PortfolioRequest{Demand: series(v100, bump(flat(730, 2), 300, 324, 6)), Prices: v100Offer(),
				NoSensitivity: tc.noSensitivity,
				Progress: func(done, total int) {
					if total != tc.want {
						t.Errorf("total %d, want %d", total, tc.want)
					}
					got = append(got, done)
				}})
			if err != nil {
				t.Fatal(err)
			}
			var want []int
			for i := 1; i <= tc.want; i++ {
				want = append(want, i)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
		})
	}
}
