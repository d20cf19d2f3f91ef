package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// yearDemand is a year of hourly demand for n GPU classes: a daily cycle,
// a weekly cycle, a few bursts and noise; 30% interruptible and 20%
// deferrable. The seed fixes it.
func yearDemand(n, hours int) (Series, []ClassPrices) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := Series{Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), Hours: hours}
	var prices []ClassPrices
	for c := range n {
		model := fmt.Sprintf("GPU-%02d", c)
		base := int64(4 + 3*c)
		d := ClassDemand{GPUModel: model, GPUs: make([]int64, hours), Interruptible: make([]int64, hours), Deferrable: make([]int64, hours)}
		for h := range hours {
			g := base
			if hod := h % 24; hod >= 9 && hod < 21 {
				g += base / 2
			}
			if h%168 < 120 {
				g += base / 4
			}
			if h%(24*45) < 72 {
				g += 2 * base
			}
			g += rng.Int64N(base/2 + 1)
			d.GPUs[h] = g
			d.Interruptible[h] = g * 3 / 10
			d.Deferrable[h] = g * 2 / 10
		}
		s.Classes = append(s.Classes, d)
		od := 2 + c
		o := offer("o-"+model, model, 8).
			hourlyTOU(fmt.Sprint(8*od), 22, 6, 5000).
			spot(fmt.Sprint(3*od), 1500).
			weekly(fmt.Sprint(8 * od * 100)).
			monthly(fmt.Sprint(8 * od * 400)).
			build()
		prices = append(prices, mustClasses(o)...)
	}
	return s, prices
}

// BenchmarkPortfolio plans a year of hourly demand (8,760 hours) for 10
// GPU classes with spot, off-peak windows and deferrable work, with the
// ±20% sensitivity and burst leases: the decomposed solver, the default
// for this case, as "plan portfolio" runs it.
func BenchmarkPortfolio(b *testing.B) {
	s, prices := yearDemand(10, 8760)
	req := PortfolioRequest{Demand: s, Prices: prices, Spot: DefaultSpotModel, BurstLeases: true}
	for b.Loop() {
		if _, err := PlanPortfolio(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPortfolioLP is the LP with branch and bound on two days of one
// class: the dense simplex grows about tenfold per doubling of hours,
// which is why MaxLPHours is small and the decomposed solver does scale.
func BenchmarkPortfolioLP(b *testing.B) {
	s, prices := yearDemand(1, 48)
	req := PortfolioRequest{Demand: s, Prices: prices, Spot: DefaultSpotModel, Solver: SolverLP, NoSensitivity: true}
	for b.Loop() {
		if _, err := PlanPortfolio(req); err != nil {
			b.Fatal(err)
		}
	}
}
