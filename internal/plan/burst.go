package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// BurstLease is a committed lease that covers part of the burst instead
// of on-demand hours: Count GPUs leased from StartHour for Hours hours on
// Term (a mix of the class's fixed terms, such as "1 week" or "2 days").
type BurstLease struct {
	Term      string
	Count     int64
	StartHour int
	// Hours is the stretch the leases cover; PaidHours what they pay for
	// (at least Hours; the last lease may run past it).
	Hours, PaidHours int64
	// PerGPU is one GPU's leases; Cost = Count × PerGPU.
	PerGPU, Cost core.Micros
}

// fixedCover is the cheapest way to cover h consecutive hours with the
// class's fixed terms, for every h up to a limit: an unbounded covering
// knapsack in hours, as in [ChooseTerm] but for all lengths at once.
type fixedCover struct {
	terms []PeriodPrice
	cost  []int64 // per length; inf when no term covers it
	last  []int   // term of the last lease
}

func newFixedCover(terms []PeriodPrice, hours int) *fixedCover {
	fc := &fixedCover{cost: make([]int64, hours+1), last: make([]int, hours+1)}
	for _, p := range terms {
		if !p.PayAsYouGo() && p.Seconds%3600 == 0 && p.Price > 0 {
			fc.terms = append(fc.terms, p)
		}
	}
	for h := 1; h <= hours; h++ {
		fc.cost[h], fc.last[h] = inf, -1
		for j, p := range fc.terms {
			prev := max(0, h-int(p.Seconds/3600))
			if fc.cost[prev] == inf {
				continue
			}
			if c := satAdd(fc.cost[prev], int64(p.Price)); c < fc.cost[h] {
				fc.cost[h], fc.last[h] = c, j
			}
		}
	}
	return fc
}

// mix describes the leases that cover h hours and the hours they pay for.
func (fc *fixedCover) mix(h int) (string, int64) {
	counts := make([]int64, len(fc.terms))
	var paid int64
	for h > 0 {
		j := fc.last[h]
		counts[j]++
		paid += fc.terms[j].Seconds / 3600
		h -= int(fc.terms[j].Seconds / 3600)
	}
	var parts []string
	for j := len(fc.terms) - 1; j >= 0; j-- {
		if counts[j] > 0 {
			parts = append(parts, countName(counts[j], fc.terms[j].Name))
		}
	}
	return strings.Join(parts, " + "), paid
}

// applyBurstLeases replaces on-demand hours of s with committed leases of
// the class's terms where they cost less. The on-demand profile is cut
// into lanes (lane k is busy in the hours with at least k on-demand GPUs)
// and each lane's busy runs are covered by a dynamic program over the
// runs: each run on demand, or a group of consecutive runs (gaps included)
// by the cheapest fixed-lease mix for its span, of at most twice the
// longest term. This is exact per lane, not over the whole profile (a
// lease may serve two lanes' runs better), and it never costs more than
// on demand. s.cost is updated.
func (in *classInput) applyBurstLeases(s *classSolution, fc *fixedCover) {
	if len(fc.terms) == 0 || !in.hasOD {
		return
	}
	var longest int64
	for _, p := range fc.terms {
		longest = max(longest, p.Seconds/3600)
	}
	maxSpan := int(min(int64(in.hours), 2*longest))
	peak := slices.Max(s.od)
	type run struct {
		a, b int   // hours [a, b)
		od   int64 // on-demand cost of the run
	}
	type key struct{ start, hours int }
	leases := map[key]int64{}
	var saved int64
	for k := int64(1); k <= peak; k++ {
		var runs []run
		for t := 0; t < in.hours; t++ {
			if s.od[t] < k {
				continue
			}
			if n := len(runs); n > 0 && runs[n-1].b == t {
				runs[n-1].b++
				runs[n-1].od += in.od[t]
				continue
			}
			runs = append(runs, run{a: t, b: t + 1, od: in.od[t]})
		}
		m := len(runs)
		f := make([]int64, m+1)
		from := make([]int, m+1) // group start, or -1: run j on demand
		for j := 1; j <= m; j++ {
			f[j], from[j] = f[j-1]+runs[j-1].od, -1
			for i := j; i >= 1; i-- {
				span := runs[j-1].b - runs[i-1].a
				if span > maxSpan {
					break
				}
				if c := satAdd(f[i-1], fc.cost[span]); c < f[j] {
					f[j], from[j] = c, i
				}
			}
		}
		var odCost int64
		for _, r := range runs {
			odCost += r.od
		}
		if f[m] >= odCost {
			continue
		}
		saved += odCost - f[m]
		for j := m; j >= 1; {
			i := from[j]
			if i < 0 {
				j--
				continue
			}
			a, b := runs[i-1].a, runs[j-1].b
			leases[key{a, b - a}]++
			for t := a; t < b; t++ {
				if s.od[t] >= k {
					s.leased[t]++
				}
			}
			j = i - 1
		}
	}
	if saved == 0 {
		return
	}
	for t := range s.od {
		s.od[t] -= s.leased[t]
	}
	keys := make([]key, 0, len(leases))
	for k := range leases {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y key) int {
		if x.start != y.start {
			return x.start - y.start
		}
		return x.hours - y.hours
	})
	for _, k := range keys {
		term, paid := fc.mix(k.hours)
		per := fc.cost[k.hours]
		n := leases[k]
		s.leases = append(s.leases, BurstLease{Term: term, Count: n, StartHour: k.start, Hours: int64(k.hours), PaidHours: paid,
			PerGPU: core.Micros(per), Cost: core.Micros(per * n)})
		s.leaseCost += per * n
	}
	s.cost -= saved
}

// withBurstLeases solves the class and then covers the burst with leases;
// since cheaper bursts can make a smaller base pay, it then tries smaller
// bases one at a time while the total falls (a local search: with leases
// the cost need not be convex in the base).
func withBurstLeases(in *classInput, s classSolution, fixed *int64) (classSolution, error) {
	fc := newFixedCover(in.committed, in.hours)
	if len(fc.terms) == 0 || !in.hasOD {
		return s, nil
	}
	best := s
	in.applyBurstLeases(&best, fc)
	lo := int64(0)
	if fixed != nil {
		lo = *fixed
	}
	for r := best.r - 1; r >= lo; r-- {
		c, err := in.evaluate(r, true)
		if err != nil {
			return classSolution{}, err
		}
		in.applyBurstLeases(&c, fc)
		if c.cost >= best.cost {
			break
		}
		best = c
	}
	return best, nil
}

func (b BurstLease) String() string {
	return fmt.Sprintf("%d × %s from hour %d", b.Count, b.Term, b.StartHour)
}
