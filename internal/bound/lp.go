// Package bound computes lower bounds on what any fleet policy must pay
// to run a workload on a catalog. It is pure: no I/O, no clock.
//
// # The LP relaxation
//
// Time is cut into slots (an hour by default) from the first submission.
// A market is one offer in one billing mode. The linear program is:
//
//	min  Σ_{K,t,m flexible} p_{m,t} y_{K,t,m}  +  Σ_{c,b} P_c x_{c,b}
//	s.t. Σ_{t,m} y_{K,t,m}            = W_K        every class K      (work)
//	     Σ_m y_{K,t,m}               <= cap_{K,t}   every K, slot t   (rate)
//	     Σ_K y_{K,t,c}               <= h Σ_{b<=t<b+L_c} x_{c,b}       (capacity)
//	     y, x >= 0
//
// (h is the slot's length in hours: a GPU does h GPU-hours in a slot.)
// y_{K,t,m} is GPU-hours of class K's work done in slot t in market m
// (only markets whose offer the job may run on, core.Request.Admits,
// and machines big enough for the job — one machine when one holds it
// whole, see Admissible; spot only for interruptible work). A flexible market (on-demand, spot,
// a committed plan that may end early or renew in steps shorter than its
// term) charges p_{m,t} per GPU-hour: the lowest price per GPU-hour of
// the plan anywhere in the slot, time-of-use multiplier and spot series
// included. A committed market c (a term of L_c slots charged in full,
// renewed in whole terms) is bought as x_{c,b} GPUs for the term starting
// at slot b, at P_c per GPU (the term's charge at its lowest rate).
//
// A class is every job with the same admissible markets, the same
// interruptibility and the same window of slots; W_K is their GPU-hours
// of work (GPUs × share × shards × actual running time) and cap_{K,t}
// the GPU-hours they could do in slot t: their GPUs × the part of the
// slot inside their window. A job's window is [submit, submit + duration
// + Wait) — core and other non-deferrable work runs when it is submitted,
// give or take Wait for provisioning and queueing — and, for deferrable
// work, [submit, max(deadline, submit + duration) + Wait) (DeferSlack
// after the duration when it has no deadline).
//
// # Why it is a lower bound
//
// Take any policy that runs every job inside its window, and its leases.
// Its work per class, slot and market is a feasible y (the work is done,
// no job runs faster than its GPUs allow, nothing runs outside its
// window, a committed lease serves no more GPU-hours in a slot than it
// has GPUs there). A committed lease that starts at any instant s is, in
// GPU-hours per slot, exactly the mix (1-f)·block(⌊s⌋) + f·block(⌊s⌋+1)
// of two slot-aligned blocks (f the fraction of the slot past ⌊s⌋), at
// the same total price; a renewal is one more term. A flexible lease
// held for h hours is charged at least its lowest rate × h (billing
// rounds up, adds minimum charges and fees, never less). So every
// policy's bill is at least the LP's objective at some feasible point,
// hence at least the LP's optimum. Merging jobs into classes only sums
// constraints (a relaxation), and idle time, granularity, provisioning,
// machine size and gangs are ignored (relaxations too).
//
// The LP is not solved in its primal form. Dualising the capacity rows
// with prices γ_{c,t} >= 0 gives, by weak duality, for every γ with
// h Σ_{b<=t<b+L_c} γ_{c,t} <= P_c for every block b (no term is worth more
// than its price):
//
//	LP >= D(γ) = Σ_K min cost of W_K GPU-hours within cap_{K,·}
//	             at slot prices min(p_{m,t}, γ_{c,t}) over K's markets.
//
// D is concave; the bound is the best D(γ) found by a projected
// supergradient ascent starting from the uniform γ = P_c / (h L_c) (whose
// value is the price bound restricted to each job's window), every iterate
// made feasible again (see project). Whatever the number of iterations, the value
// returned is D at a feasible γ — a valid bound — and it approaches the LP
// optimum as the ascent converges. It is computed in float64 and reduced by
// a relative 1e-9 before rounding down to the micro, so floating-point
// error cannot push it above the true D(γ).
package bound

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Input is a workload and a catalog.
type Input struct {
	Jobs []*core.Job
	// Actual is each job's true running time by ID; EstDuration when a
	// job is not in it.
	Actual map[string]time.Duration
	Offers []core.Offer
}

// Options tune the relaxation; the zero value takes the defaults.
type Options struct {
	// Slot is the length of a time slot (1 hour). Committed terms are
	// rounded up to whole slots (a relaxation).
	Slot time.Duration
	// Wait widens every job's window past its natural end, for
	// provisioning and queueing (1 hour). A policy that keeps some job
	// out of its window longer than this is not covered by the bound.
	Wait time.Duration
	// DeferSlack is how far past its duration deferrable work without a
	// deadline may run (7 days).
	DeferSlack time.Duration
	// Iterations of the dual ascent (1000).
	Iterations int
	// Progress, if set, is called after each iteration of the ascent with
	// the iterations done and Iterations: the bound of a million jobs
	// takes minutes.
	Progress func(done, total int)
}

func (o Options) withDefaults() (Options, error) {
	if o.Slot == 0 {
		o.Slot = time.Hour
	}
	if o.Wait == 0 {
		o.Wait = time.Hour
	}
	if o.DeferSlack == 0 {
		o.DeferSlack = 7 * 24 * time.Hour
	}
	if o.Iterations == 0 {
		o.Iterations = 1000
	}
	switch {
	case o.Slot < time.Minute || time.Hour%o.Slot != 0 && o.Slot%time.Hour != 0:
		return o, &core.FieldError{Field: "slot", Value: o.Slot.String(), Allowed: "a divisor or multiple of 1h, at least 1m"}
	case o.Wait < 0:
		return o, &core.FieldError{Field: "wait", Value: o.Wait.String(), Allowed: ">= 0"}
	case o.DeferSlack < 0:
		return o, &core.FieldError{Field: "defer_slack", Value: o.DeferSlack.String(), Allowed: ">= 0"}
	case o.Iterations < 0 || o.Iterations > 100_000:
		return o, &core.FieldError{Field: "iterations", Value: strconv.Itoa(o.Iterations), Allowed: "0..100000"}
	}
	return o, nil
}

// Result is the bound and the size of what was solved.
type Result struct {
	// Cost is the LP lower bound.
	Cost core.Micros
	// Initial is the dual value at the uniform start (terms priced as if
	// used fully): what the ascent improved on.
	Initial core.Micros
	// Jobs with work, classes they merged into, slots, committed markets
	// (after removing dominated ones) and the dual prices γ solved for.
	Jobs, Classes, Slots, CommittedMarkets, DualPrices int
	// Iterations of the ascent run; Improved is the last that raised the
	// bound.
	Iterations, Improved int
}

// class is jobs merged: same signature, interruptibility and window.
type class struct {
	sig   int
	intr  bool
	a     int       // first slot
	cap   []float64 // GPU-hours per slot from a
	work  float64   // GPU-hours
	flexP []float64 // cheapest flexible price per GPU-hour per slot (shared)
}

// block is a committed market: a term of L slots at P per GPU.
type block struct {
	name string
	L    int
	// P is the term's price per GPU over the slot's length in hours: the
	// most a window of L slots of γ (per GPU-hour) may sum to.
	P     float64
	sigs  map[int]bool
	gamma []float64
	use   []float64
	clip  []float64 // γ above this is never used (max flexible price of its sigs)
}

type problem struct {
	hours   float64 // a slot's length in hours
	slots   int
	classes []*class
	blocks  []*block
	bySig   map[int][]int // sig -> blocks
	scratch []item
}

type item struct {
	price, cap float64
	slot, blk  int // blk -1: flexible
}

// LP returns the LP relaxation lower bound of in's workload on in's
// offers. Every job must have an admissible offer.
func LP(in Input, opt Options) (Result, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return Result{}, err
	}
	p, res, err := build(in, opt)
	if err != nil {
		return Result{}, err
	}
	if len(p.classes) == 0 {
		return res, nil
	}
	best := p.eval()
	res.Initial = toMicros(best)
	bestGamma := p.snapshot()
	// Polyak steps towards a target above the best value so far; the
	// target comes down when the ascent stalls.
	gap, cur, stall := 0.05*best, best, 0
	for k := 1; k <= opt.Iterations; k++ {
		p.ascend(best + gap - cur)
		cur = p.eval()
		if cur > best*(1+1e-7) {
			best, bestGamma, res.Improved, stall = cur, p.snapshot(), k, 0
		} else if stall++; stall >= 10 {
			gap, stall = gap/2, 0
			p.restore(bestGamma)
			cur = p.eval()
		}
		res.Iterations = k
		if opt.Progress != nil {
			opt.Progress(k, opt.Iterations)
		}
	}
	p.restore(bestGamma)
	res.Cost = toMicros(p.eval())
	return res, nil
}

func toMicros(v float64) core.Micros {
	v *= 1 - 1e-9
	return core.Micros(math.Floor(v * float64(core.MicrosPerUnit)))
}

// build turns jobs into classes and the catalog into per-class flexible
// prices and committed markets.
func build(in Input, opt Options) (*problem, Result, error) {
	var res Result
	if len(in.Jobs) == 0 {
		return &problem{}, res, nil
	}
	slot := opt.Slot
	t0 := in.Jobs[0].Submit
	for _, j := range in.Jobs {
		if j.Submit.Before(t0) {
			t0 = j.Submit
		}
	}
	t0 = t0.Truncate(slot)
	slotOf := func(t time.Time) float64 { return float64(t.Sub(t0)) / float64(slot) }
	hours := slot.Hours()

	type key struct {
		sig    int
		intr   bool
		a, end int
	}
	sigIDs := map[string]int{}
	var sigOffers [][]int
	classes := map[key]*class{}
	var order []key
	horizon := 0
	for _, j := range in.Jobs {
		d, ok := in.Actual[j.ID]
		if !ok {
			d = j.EstDuration
		}
		if d < 0 {
			return nil, res, &core.FieldError{Field: "job " + j.ID + " duration", Value: d.String(), Allowed: ">= 0"}
		}
		rate := float64(j.Request.GPUs) * float64(j.Request.MilliPerGPU) / float64(core.WholeGPU) * float64(max(j.Shards, 1))
		if rate <= 0 || d == 0 {
			continue
		}
		adm := Admissible(j, in.Offers)
		if len(adm) == 0 {
			return nil, res, fmt.Errorf("bound: job %s: no offer it may run on (GPU models %v, %d MiB per GPU, %s on %s)", j.ID, j.Request.Models, j.Request.MemPerGPUMiB, j.Request.Workload.Or(), core.FormatAccelerators(j.Request.Accelerators))
		}
		sk := fmt.Sprint(adm)
		sig, ok := sigIDs[sk]
		if !ok {
			sig = len(sigOffers)
			sigIDs[sk] = sig
			sigOffers = append(sigOffers, adm)
		}
		end := j.Submit.Add(d)
		if j.Deferrable {
			switch {
			case !j.Deadline.IsZero():
				if j.Deadline.After(end) {
					end = j.Deadline
				}
			default:
				end = end.Add(opt.DeferSlack)
			}
		}
		end = end.Add(opt.Wait)
		fa, fe := slotOf(j.Submit), slotOf(end)
		a, e := int(math.Floor(fa)), int(math.Ceil(fe))
		k := key{sig, j.Interruptible, a, e}
		c := classes[k]
		if c == nil {
			c = &class{sig: sig, intr: j.Interruptible, a: a, cap: make([]float64, e-a)}
			classes[k] = c
			order = append(order, k)
		}
		c.work += rate * d.Hours()
		for t := a; t < e; t++ {
			lo, hi := max(fa, float64(t)), min(fe, float64(t+1))
			if hi > lo {
				c.cap[t-a] += rate * (hi - lo) * hours
			}
		}
		horizon = max(horizon, e)
		res.Jobs++
	}
	p := &problem{hours: hours, slots: horizon, bySig: map[int][]int{}}
	res.Slots = horizon
	// Flexible prices per (sig, spot allowed) and committed markets.
	type flexKey struct {
		sig  int
		spot bool
	}
	flex := map[flexKey][]float64{}
	at := func(t int) time.Time { return t0.Add(time.Duration(t) * slot) }
	type blockKey struct {
		L    int
		sigs string
	}
	blocks := map[blockKey]*block{}
	// Which sigs admit each offer.
	offerSigs := make([]map[int]bool, len(in.Offers))
	for sig, adm := range sigOffers {
		for _, i := range adm {
			if offerSigs[i] == nil {
				offerSigs[i] = map[int]bool{}
			}
			offerSigs[i][sig] = true
		}
	}
	for i := range in.Offers {
		o := &in.Offers[i]
		if offerSigs[i] == nil {
			continue
		}
		for pi := range o.Plans {
			pl := &o.Plans[pi]
			if err := pl.Validate(); err != nil {
				return nil, res, fmt.Errorf("bound: offer %s plan %s: %w", o.ID, pl.Mode, err)
			}
			if pl.Committed() && pl.EarlyTermination == nil && pl.Granularity%pl.Term == 0 {
				L := int((time.Duration(pl.Term)*time.Second + slot - 1) / slot)
				// γ is a price per GPU-hour and a GPU does hours GPU-hours
				// in a slot, so a term's window of γ may sum to its price
				// per GPU over hours.
				P := termPrice(pl) / wholeGPUs(o) / hours
				var names []string
				for s := range offerSigs[i] {
					names = append(names, strconv.Itoa(s))
				}
				slices.Sort(names)
				bk := blockKey{L, strings.Join(names, ",")}
				if b := blocks[bk]; b == nil || P < b.P {
					blocks[bk] = &block{name: o.ID + " " + string(pl.Mode), L: L, P: P, sigs: offerSigs[i]}
				}
				continue
			}
			// Flexible: the plan's lowest rate per GPU-hour in each slot.
			prices := slotPrices(pl, wholeGPUs(o), horizon, at)
			for s := range offerSigs[i] {
				for _, spot := range []bool{false, true} {
					if pl.Mode == core.Spot && !spot {
						continue
					}
					fk := flexKey{s, spot}
					f := flex[fk]
					if f == nil {
						f = make([]float64, horizon)
						for t := range f {
							f[t] = math.Inf(1)
						}
						flex[fk] = f
					}
					for t, v := range prices {
						f[t] = min(f[t], v)
					}
				}
			}
		}
	}
	// Committed markets, cheapest first per (term, admissibility); drop
	// one that a market kept before it dominates: one that serves at
	// least its classes and covers its term, with as many of its own
	// terms as that takes, for no more. (Covering L slots with terms of
	// L' slots takes ⌈L/L'⌉ of them even fractionally: interval covering
	// is totally unimodular. A shorter term that is merely cheaper does
	// not dominate.) Dropping a dominated market leaves the LP's optimum
	// unchanged, and no market later in the order — dearer per slot —
	// can dominate one before it.
	var bl []*block
	for _, b := range blocks {
		bl = append(bl, b)
	}
	slices.SortFunc(bl, func(x, y *block) int {
		return cmp.Or(cmp.Compare(x.P/float64(x.L), y.P/float64(y.L)), cmp.Compare(x.L, y.L), cmp.Compare(x.name, y.name))
	})
	for _, b := range bl {
		dominated := false
		for _, q := range p.blocks {
			if float64((b.L+q.L-1)/q.L)*q.P <= b.P && subset(b.sigs, q.sigs) {
				dominated = true
				break
			}
		}
		if dominated {
			continue
		}
		b.gamma, b.use, b.clip = make([]float64, horizon), make([]float64, horizon), make([]float64, horizon)
		for t := range b.gamma {
			b.gamma[t] = b.P / float64(b.L)
		}
		p.blocks = append(p.blocks, b)
	}
	for bi, b := range p.blocks {
		for s := range b.sigs {
			p.bySig[s] = append(p.bySig[s], bi)
		}
	}
	for _, k := range order {
		c := classes[k]
		c.flexP = flex[flexKey{c.sig, c.intr}]
		if c.flexP == nil && len(p.bySig[c.sig]) == 0 {
			return nil, res, errors.New("bound: a class of jobs has no market it may use")
		}
		for _, bi := range p.bySig[c.sig] {
			b := p.blocks[bi]
			for t := range c.cap {
				v := math.Inf(1)
				if c.flexP != nil {
					v = c.flexP[c.a+t]
				}
				b.clip[c.a+t] = max(b.clip[c.a+t], v)
			}
		}
		p.classes = append(p.classes, c)
	}
	for _, b := range p.blocks {
		for t := range b.clip {
			if math.IsInf(b.clip[t], 1) || b.clip[t] == 0 {
				b.clip[t] = b.P // no flexible alternative: at most the whole term in one slot
			}
		}
		b.feasible()
	}
	res.Classes, res.CommittedMarkets = len(p.classes), len(p.blocks)
	res.DualPrices = len(p.blocks) * horizon
	return p, res, nil
}

func subset(a, b map[int]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// termPrice is a committed plan's charge for one term at its lowest rate.
func termPrice(pl *core.PricePlan) float64 {
	if pl.TimeOfUse == nil && len(pl.Series) == 0 {
		b, err := billing.Cost(pl, billing.Span{Start: time.Unix(0, 0), End: time.Unix(0, 0)})
		if err == nil {
			return b.Amount.Float()
		}
	}
	return minRate(pl) * float64(pl.Term) / 3600
}

// minRate is the plan's lowest price per machine-hour anywhere in time.
func minRate(pl *core.PricePlan) float64 {
	price := pl.Price
	for _, pt := range pl.Series {
		price = min(price, pt.Price)
	}
	mult := pl.TimeOfUse.FloorBP()
	return price.Float() * 3600 / float64(pl.Per.Seconds()) * float64(mult) / 10000
}

// slotPrices is the plan's lowest price per GPU-hour within each slot.
func slotPrices(pl *core.PricePlan, gpus float64, slots int, at func(int) time.Time) []float64 {
	out := make([]float64, slots)
	flat := pl.TimeOfUse == nil && len(pl.Series) == 0
	base := minRate(pl) / gpus
	for t := range out {
		if flat {
			out[t] = base
			continue
		}
		from, to := at(t), at(t+1)
		// The series' price in force at from, and any lower one starting
		// inside the slot.
		price := seriesMin(pl, from, to)
		mult := int64(10000)
		if pl.TimeOfUse != nil {
			mult = math.MaxInt64
			// Local hours change at most at quarter hours (zones are offset
			// by 15-minute multiples).
			for s := from; s.Before(to); s = s.Add(15 * time.Minute) {
				mult = min(mult, pl.TimeOfUse.MultiplierAt(s))
			}
		}
		out[t] = price.Float() * 3600 / float64(pl.Per.Seconds()) * float64(mult) / 10000 / gpus
	}
	return out
}

// seriesMin is the lowest price of pl in force at some instant of [from, to).
func seriesMin(pl *core.PricePlan, from, to time.Time) core.Micros {
	price := pl.Price // before the first point
	for _, pt := range pl.Series {
		if pt.At.After(from) {
			break
		}
		price = pt.Price
	}
	for _, pt := range pl.Series {
		if pt.At.After(from) && pt.At.Before(to) {
			price = min(price, pt.Price)
		}
	}
	return price
}

// eval returns D(γ) and records each committed market's use per slot.
func (p *problem) eval() float64 {
	for _, b := range p.blocks {
		clear(b.use)
	}
	total := 0.0
	for _, c := range p.classes {
		its := p.scratch[:0]
		blks := p.bySig[c.sig]
		for i, cp := range c.cap {
			if cp <= 0 {
				continue
			}
			t := c.a + i
			it := item{price: math.Inf(1), cap: cp, slot: t, blk: -1}
			if c.flexP != nil {
				it.price = c.flexP[t]
			}
			for _, bi := range blks {
				if g := p.blocks[bi].gamma[t]; g < it.price {
					it.price, it.blk = g, bi
				}
			}
			its = append(its, it)
		}
		slices.SortFunc(its, func(x, y item) int { return cmp.Compare(x.price, y.price) })
		left := c.work
		for _, it := range its {
			if left <= 0 {
				break
			}
			q := min(left, it.cap)
			total += q * it.price
			if it.blk >= 0 {
				p.blocks[it.blk].use[it.slot] += q
			}
			left -= q
		}
		p.scratch = its
	}
	return total
}

// ascend moves γ by a Polyak step of size delta (the hoped-for rise of
// the bound) along the supergradient (each market's use per slot), then
// makes it feasible again.
func (p *problem) ascend(delta float64) {
	norm := 0.0
	for _, b := range p.blocks {
		for _, u := range b.use {
			norm += u * u
		}
	}
	if norm == 0 || delta <= 0 {
		return
	}
	f := delta / norm
	for _, b := range p.blocks {
		for t, u := range b.use {
			if u > 0 {
				b.gamma[t] = min(b.gamma[t]+f*u, b.clip[t])
			}
		}
		b.project()
	}
}

// project makes γ feasible again after a step: each window of L slots
// that sums above P, left to right, gives its excess back evenly from its
// slots still above zero (the Euclidean projection onto that one window's
// constraint, kept non-negative), until no window is over or the passes
// run out; feasible then guards the result. Scaling every slot by its
// worst window instead (feasible alone) shrinks the slots the ascent has
// just raised as much as the idle ones, and the ascent stalled 1.1% below
// the exact optimum on the Helios excerpt; taken evenly, value moves
// between the slots of a window and it comes within 0.5%.
func (b *block) project() {
	H, L := len(b.gamma), min(b.L, len(b.gamma))
	g := b.gamma
	for pass := 0; pass < 20; pass++ {
		over := false
		s := 0.0
		for t := range L {
			s += g[t]
		}
		for w := 0; w+L <= H; w++ {
			if w > 0 {
				s += g[w+L-1] - g[w-1]
			}
			if s <= b.P*(1+1e-12) {
				continue
			}
			over = true
			ex := s - b.P
			for round := 0; ex > 1e-12*b.P && round < 50; round++ {
				n := 0
				for t := w; t < w+L; t++ {
					if g[t] > 0 {
						n++
					}
				}
				if n == 0 {
					break
				}
				d := ex / float64(n)
				for t := w; t < w+L; t++ {
					if g[t] > 0 {
						r := min(g[t], d)
						g[t] -= r
						ex -= r
					}
				}
			}
			s = 0 // afresh: the running sum drifts after the subtraction
			for t := w; t < w+L; t++ {
				s += g[t]
			}
		}
		if !over {
			break
		}
	}
	b.feasible()
}

// feasible scales γ so that no term's window of slots sums above its
// price: each slot by the worst window it is in, which leaves every
// window at most P.
func (b *block) feasible() {
	H, L := len(b.gamma), b.L
	if H == 0 {
		return
	}
	nw := max(H-L+1, 1) // windows starting at 0..H-L (or one if H < L)
	sums := make([]float64, nw)
	s := 0.0
	for t := 0; t < min(L, H); t++ {
		s += b.gamma[t]
	}
	sums[0] = s
	for w := 1; w < nw; w++ {
		s += b.gamma[w+L-1] - b.gamma[w-1]
		sums[w] = s
	}
	// worst[t] = max of sums[w] for w in [t-L+1, t] ∩ [0, nw).
	scale := make([]float64, H)
	dq := make([]int, 0, nw)
	w := 0
	for t := range H {
		for w < nw && w <= t {
			for len(dq) > 0 && sums[dq[len(dq)-1]] <= sums[w] {
				dq = dq[:len(dq)-1]
			}
			dq = append(dq, w)
			w++
		}
		for len(dq) > 0 && dq[0] < t-L+1 {
			dq = dq[1:]
		}
		scale[t] = 1
		if len(dq) > 0 && sums[dq[0]] > b.P {
			scale[t] = b.P / sums[dq[0]]
		}
	}
	for t := range b.gamma {
		b.gamma[t] *= scale[t]
	}
	// Guard against rounding: recheck, and shrink a hair if needed.
	worst := 0.0
	s = 0
	for t := 0; t < min(L, H); t++ {
		s += b.gamma[t]
	}
	worst = s
	for w := 1; w < nw; w++ {
		s += b.gamma[w+L-1] - b.gamma[w-1]
		worst = max(worst, s)
	}
	if worst > b.P {
		f := b.P / worst * (1 - 1e-12)
		for t := range b.gamma {
			b.gamma[t] *= f
		}
	}
}

func (p *problem) snapshot() [][]float64 {
	out := make([][]float64, len(p.blocks))
	for i, b := range p.blocks {
		out[i] = slices.Clone(b.gamma)
	}
	return out
}

func (p *problem) restore(g [][]float64) {
	for i, b := range p.blocks {
		copy(b.gamma, g[i])
	}
}

func (o Options) mustDefaults() Options {
	o, err := o.withDefaults()
	if err != nil {
		panic(err)
	}
	return o
}

// wholeGPUs is a machine of o's GPU capacity in whole GPUs (0.25 for a
// quarter-GPU slice): prices per GPU-hour divide by it.
func wholeGPUs(o *core.Offer) float64 { return float64(o.CapMilli()) / float64(core.WholeGPU) }
