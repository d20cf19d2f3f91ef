package plan

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// genRequest draws a small one-class portfolio: hourly demand with
// interruptible and deferrable parts, an on-demand price (maybe with an
// off-peak window), a daily committed term, maybe spot with reclaims, and
// a shift window.
func genRequest(t *rapid.T, maxHours int, maxGPUs int64, spot, shift bool) PortfolioRequest {
	H := rapid.IntRange(1, maxHours).Draw(t, "hours")
	gpus := make([]int64, H)
	intr := make([]int64, H)
	dfr := make([]int64, H)
	for h := range H {
		gpus[h] = rapid.Int64Range(0, maxGPUs).Draw(t, "gpus")
		if spot {
			intr[h] = rapid.Int64Range(0, gpus[h]).Draw(t, "interruptible")
		}
		if shift {
			dfr[h] = rapid.Int64Range(0, gpus[h]-intr[h]).Draw(t, "deferrable")
		}
	}
	s := series("G", gpus)
	s.Classes[0].Interruptible, s.Classes[0].Deferrable = intr, dfr
	od := rapid.IntRange(1, 20).Draw(t, "od")
	b := offer("o", "G", 1)
	if rapid.Bool().Draw(t, "tou") {
		start := rapid.IntRange(0, 23).Draw(t, "tou_start")
		b.hourlyTOU(fmt.Sprint(od), start, (start+rapid.IntRange(1, 12).Draw(t, "tou_len"))%24, rapid.Int64Range(1000, 10000).Draw(t, "tou_mult"))
	} else {
		b.hourly(fmt.Sprint(od))
	}
	if rapid.Bool().Draw(t, "has_term") {
		b.daily(fmt.Sprint(rapid.IntRange(1, 24*od).Draw(t, "daily")))
	}
	if spot && rapid.Bool().Draw(t, "has_spot") {
		b.spot(fmt.Sprint(rapid.IntRange(0, od+2).Draw(t, "spot")), rapid.Int64Range(0, 10000).Draw(t, "reclaim_bp"))
	}
	req := PortfolioRequest{Demand: s, Prices: mustClasses(b.build()), NoSensitivity: true, Spot: DefaultSpotModel}
	if shift {
		req.ShiftWindow = rapid.IntRange(1, H+1).Draw(t, "window")
	} else {
		req.ShiftWindow = 1
	}
	return req
}

func solveWith(t *rapid.T, req PortfolioRequest, s Solver) Portfolio {
	req.Solver = s
	p, err := PlanPortfolio(req)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return p
}

// TestLDCAgreesWithLPAndDecomposed: without spot and shifting, the
// load-duration curve, the decomposed solver and the LP find the same
// least cost, and the LDC and the decomposed solver the same base (the
// largest of equally cheap ones).
func TestLDCAgreesWithLPAndDecomposed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genRequest(t, 24, 6, false, false)
		ldc := solveWith(t, req, SolverLDC)
		dec := solveWith(t, req, SolverDecomposed)
		lpp := solveWith(t, req, SolverLP)
		if ldc.Cost != dec.Cost || ldc.Cost != lpp.Cost {
			t.Fatalf("cost: ldc %s, decomposed %s, lp %s", ldc.Cost, dec.Cost, lpp.Cost)
		}
		if ldc.Classes[0].Reserved != dec.Classes[0].Reserved {
			t.Fatalf("reserved: ldc %d, decomposed %d", ldc.Classes[0].Reserved, dec.Classes[0].Reserved)
		}
	})
}

// TestDecomposedAgreesWithLP: with spot and shifting, the decomposed
// solver and the LP with branch and bound find the same least cost.
func TestDecomposedAgreesWithLP(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genRequest(t, 16, 5, true, true)
		dec := solveWith(t, req, SolverDecomposed)
		lpp := solveWith(t, req, SolverLP)
		if dec.Cost != lpp.Cost {
			t.Fatalf("cost: decomposed %s, lp %s (reserved %d vs %d)", dec.Cost, lpp.Cost, dec.Classes[0].Reserved, lpp.Classes[0].Reserved)
		}
	})
}

// TestBruteForceAgrees enumerates every integer plan of tiny instances:
// each base, each placement of deferrable work in its window, each split
// of interruptible work between spot and the other GPUs.
func TestBruteForceAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genRequest(t, 4, 3, true, true)
		in, err := newClassInput(req, req.Demand.Classes[0])
		if err != nil {
			t.Fatal(err)
		}
		want := bruteForcePortfolio(in)
		for _, s := range []Solver{SolverDecomposed, SolverLP} {
			if got := solveWith(t, req, s); int64(got.Cost) != want {
				t.Fatalf("%s: cost %s, brute force %s", s, got.Cost, core.Micros(want))
			}
		}
	})
}

func bruteForcePortfolio(in *classInput) int64 {
	best := int64(math.MaxInt64)
	W := in.window
	if !in.shifting() {
		W = 1
	}
	for r := int64(0); r <= in.rMax; r++ {
		total := r * in.baseCost
		for w0 := 0; w0 < in.hours; w0 += W {
			w1 := min(in.hours, w0+W)
			var D int64
			for t := w0; t < w1; t++ {
				D += in.dfr[t]
			}
			y := make([]int64, w1-w0)
			wbest := int64(math.MaxInt64)
			var place func(t int, left int64)
			place = func(t int, left int64) {
				if t == w1 {
					if left != 0 {
						return
					}
					var c int64
					for h := w0; h < w1; h++ {
						c += bestHour(in, h, r, y[h-w0])
					}
					wbest = min(wbest, c)
					return
				}
				limit := max(0, in.peak-in.firm[t]-in.intr[t])
				if W == 1 {
					y[t-w0] = in.dfr[t]
					place(t+1, 0)
					return
				}
				for v := int64(0); v <= min(left, limit); v++ {
					y[t-w0] = v
					place(t+1, left-v)
				}
			}
			if W == 1 {
				place(w0, 0)
			} else {
				place(w0, D)
			}
			total += wbest
		}
		best = min(best, total)
	}
	return best
}

// bestHour tries every split of the hour's interruptible work.
func bestHour(in *classInput, t int, r, y int64) int64 {
	best := int64(math.MaxInt64)
	for a := int64(0); a <= in.intr[t]; a++ { // a: interruptible GPUs not on spot
		if in.sp == nil && a != in.intr[t] {
			continue
		}
		c := max(0, in.firm[t]+a+y-r)*in.od[t] + (in.intr[t]-a)*spotPrice(in, t)
		best = min(best, c)
	}
	return best
}

// TestFixedBaseAgrees: with a least base kept (the sensitivity's "base
// kept" cost), every solver finds the same least cost.
func TestFixedBaseAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genRequest(t, 12, 4, true, true)
		in, err := newClassInput(req, req.Demand.Classes[0])
		if err != nil {
			t.Fatal(err)
		}
		fixed := rapid.Int64Range(0, 6).Draw(t, "fixed")
		dec, _, err := solveClass(in, SolverDecomposed, &fixed)
		if err != nil {
			t.Fatal(err)
		}
		lps, _, err := solveClass(in, SolverLP, &fixed)
		if err != nil {
			t.Fatal(err)
		}
		if dec.cost != lps.cost || dec.r < fixed && in.rMax > 0 {
			t.Fatalf("decomposed %d (r %d), lp %d (r %d), fixed %d", dec.cost, dec.r, lps.cost, lps.r, fixed)
		}
		if !in.shifting() && !in.spotting() {
			ldc, _, err := solveClass(in, SolverLDC, &fixed)
			if err != nil || ldc.cost != dec.cost {
				t.Fatalf("ldc %d, decomposed %d: %v", ldc.cost, dec.cost, err)
			}
		}
	})
}
