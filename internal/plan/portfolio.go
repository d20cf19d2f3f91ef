package plan

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Solver names a method of [PlanPortfolio].
type Solver string

// The portfolio solvers. All of them find the same least cost for the
// model; they differ in what they can take and how fast they are.
const (
	// SolverAuto takes the load-duration curve where it applies and the
	// decomposed solver elsewhere.
	SolverAuto Solver = "auto"
	// SolverLDC is the exact closed form from the load-duration curve:
	// one class at a time, no spot, no shifting.
	SolverLDC Solver = "ldc"
	// SolverDecomposed is exact for the whole model at any size: a convex
	// search over each class's committed base, and for each base, the
	// cheapest placement of deferrable work window by window.
	SolverDecomposed Solver = "decomposed"
	// SolverLP is the linear program of the whole model solved by the
	// simplex method, with integer counts by branch and bound. Its dense
	// tableau limits it to MaxLPHours.
	SolverLP Solver = "lp"
)

// ParseSolver validates a solver name.
func ParseSolver(s string) (Solver, error) {
	switch Solver(s) {
	case SolverAuto, SolverLDC, SolverDecomposed, SolverLP:
		return Solver(s), nil
	case "":
		return SolverAuto, nil
	}
	return "", &core.FieldError{Field: "solver", Value: s, Allowed: "one of auto, ldc, decomposed, lp"}
}

// ErrNotApplicable is returned when a solver is asked for a case it does
// not cover: the load-duration curve with spot or shifting, the LP beyond
// MaxLPHours.
var ErrNotApplicable = errors.New("plan: solver does not apply")

// SpotModel prices the work lost to reclaims. A spot GPU is reclaimed at
// its plan's monthly rate (core.ReclaimModel, per 730 hours); each reclaim
// loses on average half a checkpoint interval of work plus the time to
// restart, which has to be run again. The expected cost of a useful spot
// GPU-hour is therefore the spot price × (1 + rate per hour × (checkpoint/2
// + restart)). A plan without a reclaim model is taken as never reclaimed.
type SpotModel struct {
	// CheckpointSeconds is the interval between checkpoints.
	CheckpointSeconds int64
	// RestartSeconds is the time from a reclaim to running again
	// elsewhere (provisioning, loading the checkpoint).
	RestartSeconds int64
}

// DefaultSpotModel checkpoints hourly and restarts in ten minutes.
var DefaultSpotModel = SpotModel{CheckpointSeconds: 3600, RestartSeconds: 600}

// PortfolioRequest asks for the cheapest way to rent for a demand series.
type PortfolioRequest struct {
	// Demand is the hourly demand per GPU class.
	Demand Series
	// Prices are the classes' prices ([Classes]); each demand class must
	// have one.
	Prices []ClassPrices
	// ShiftWindow is the length in hours of the windows deferrable work
	// may move within: consecutive blocks from hour 0 (24: within the
	// same day of the series). 0 means 24; 1 turns shifting off.
	ShiftWindow int
	// Spot prices reclaims.
	Spot SpotModel
	// Solver picks the method; "" is SolverAuto.
	Solver Solver
	// NoSensitivity skips the ±20% scenarios.
	NoSensitivity bool
	// BurstLeases covers on-demand bursts with the class's committed
	// terms (a weekly lease for a burst week) where that is cheaper, after
	// the solver; see [BurstLease]. Off, the burst is on demand and every
	// solver gives the same least cost.
	BurstLeases bool
	// Progress, if set, is called with the class solves done and their
	// number (each class once, and four times more for the sensitivity
	// scenarios), from the goroutines that solve them.
	Progress func(done, total int)
}

// Reservation is a committed base: Count GPUs of a class, each held for
// the whole series on the cheapest term mix.
type Reservation struct {
	GPUModel string
	Count    int64
	// Term describes the leases of one GPU: "1 month", "12 months",
	// "1 month + 14h hourly".
	Term string
	// PerGPU is what one GPU's leases cost; Cost = Count × PerGPU.
	PerGPU core.Micros
	Cost   core.Micros
}

// Baseline is what a simple way of renting would cost; OK is false where
// the catalog lacks the prices for it.
type Baseline struct {
	Cost core.Micros
	OK   bool
	// SavingBP is the plan's saving against it in basis points of the
	// baseline's cost (6500 is 65%).
	SavingBP int64
}

// Baselines are the ways of renting a plan is measured against.
type Baselines struct {
	// AllOnDemand rents every GPU-hour of demand on demand, at its hour.
	AllOnDemand Baseline
	// AllMonthly holds the peak number of GPUs on monthly terms for the
	// whole series (whole months, 730 h each).
	AllMonthly Baseline
	// PeakSized holds the peak number of GPUs for the whole series on the
	// cheapest term mix ([ChooseTerm] over every period, on demand too).
	PeakSized Baseline
}

// HourPlan is how one hour of one class is served.
type HourPlan struct {
	// Reserved is the committed GPUs busy this hour.
	Reserved int64
	// OnDemand and Spot are the GPUs rented this hour.
	OnDemand int64
	Spot     int64
	// Deferred is deferrable work run this hour, in GPUs: it may differ
	// from the demand's deferrable GPUs of the hour when work was shifted.
	Deferred int64
	// Leased is burst-lease GPUs busy this hour.
	Leased int64
}

// ClassPlan is the plan for one GPU class.
type ClassPlan struct {
	GPUModel string
	// Reserved is the committed base in GPUs, each held for the whole
	// series on Base's leases.
	Reserved int64
	// Base is the cheapest way to hold one GPU for the whole series.
	Base TermChoice
	// HasBase is false when no mix for the whole series holds a
	// committed lease; then nothing is reserved.
	HasBase bool
	// BreakEvenHours is the least number of on-demand hours (at the
	// cheapest list price) that cost as much as one committed GPU: a GPU
	// busy longer than that is cheaper reserved. 0 when it does not apply.
	BreakEvenHours int64
	// Hours are how each hour is served.
	Hours []HourPlan
	// GPU-hours: the demand and its parts, and how it was served.
	DemandGPUHours, FirmGPUHours, InterruptibleGPUHours, DeferrableGPUHours int64
	OnDemandGPUHours, SpotGPUHours                                          int64
	// ShiftedGPUHours is deferrable work run at another hour than asked.
	ShiftedGPUHours int64
	// OnDemandPeak is the most on-demand GPUs in any hour.
	OnDemandPeak int64
	// Peak is the most GPUs the demand uses in any hour.
	Peak int64
	// PaidGPUSeconds is what the plan pays for: the reserved GPUs' leases
	// (which may run past the series) and every rented GPU-hour.
	PaidGPUSeconds int64
	// IdleShareBP is the paid time not used by demand, in basis points.
	IdleShareBP int64
	// BurstLeases cover part of the burst with committed terms;
	// LeasedGPUHours is the demand they serve.
	BurstLeases    []BurstLease
	LeasedGPUHours int64
	// Costs: ReservedCost + OnDemandCost + BurstLeaseCost + SpotCost =
	// Cost. SpotOverhead is the part of SpotCost that pays for work lost
	// to reclaims.
	ReservedCost, OnDemandCost, BurstLeaseCost, SpotCost, SpotOverhead core.Micros
	Cost                                                               core.Micros
	Baselines                                                          Baselines
	// Reason explains the base and the burst in a sentence or two.
	Reason string
}

// Scenario is the plan for demand scaled by ChangeBP basis points (+2000:
// 20% more), re-planned, and what keeping the unscaled plan's committed
// base would cost.
type Scenario struct {
	ChangeBP     int64
	Reserved     []Reservation
	Cost         core.Micros
	OnDemandPeak int64
	SpotShareBP  int64
	// FixedBaseCost keeps at least the unscaled plan's reservations
	// (commitments made cannot be undone) and re-plans the rest for the
	// scaled demand: more reserved GPUs if they pay, on demand, spot and
	// shifting.
	FixedBaseCost core.Micros
}

// Portfolio is the cheapest portfolio for a demand series.
type Portfolio struct {
	// Start and Hours are the series'.
	Start time.Time
	Hours int
	// Method names the solver that produced the plan.
	Method  Solver
	Classes []ClassPlan
	// Reserved lists the committed base per class (classes with none are
	// left out).
	Reserved []Reservation
	// Cost is the expected cost: the sum of the classes' costs.
	Cost core.Micros
	// OnDemandPeak is the most on-demand GPUs in any one hour, all
	// classes together.
	OnDemandPeak int64
	// SpotShareBP is the share of demand GPU-hours served on spot.
	SpotShareBP int64
	// IdleShareBP is the share of paid GPU time not used by demand.
	IdleShareBP                    int64
	DemandGPUHours                 int64
	PaidGPUSeconds                 int64
	ShiftedGPUHours                int64
	Baselines                      Baselines
	Sensitivity                    []Scenario
	ReservedCost, OnDemandCost     core.Micros
	BurstLeaseCost                 core.Micros
	SpotCost, SpotOverhead         core.Micros
	OnDemandGPUHours, SpotGPUHours int64
}

// MaxLPHours is the longest series [SolverLP] takes: gonum's dense
// simplex re-factors a basis of about four rows per hour at every step,
// so its time grows about tenfold per doubling of hours (48 hours take
// under a second, 96 several).
const MaxLPHours = 72

// ErrOverflow is returned when a cost does not fit in int64 micro-units.
var ErrOverflow = errors.New("plan: cost overflows")

// classInput is one class's model: demand split into parts, prices per
// GPU-hour for every hour, the committed base's cost.
type classInput struct {
	model           string
	hours, window   int
	firm, intr, dfr []int64
	od              []int64 // per GPU-hour at each hour; bigM where the class has no on-demand plan
	hasOD           bool
	sp, rawSp       []int64 // effective and list spot price per GPU-hour; nil without spot
	peak            int64
	rMax            int64 // 0 without a base
	base            TermChoice
	hasBase         bool
	baseCost        int64 // per GPU
	odList          int64 // cheapest list on-demand per GPU-hour, 0 if none
	monthPrice      int64
	hasMonth        bool
	hasTOU          bool
	committed       []PeriodPrice // the class's fixed terms, for burst leases
	burst           bool
}

// classSolution is how a class is served: the base and each hour's rented
// GPUs and deferrable placement.
type classSolution struct {
	r                         int64
	od, spot, place, reserved []int64
	cost                      int64
	// leased is burst-lease GPUs busy per hour; leases and leaseCost
	// describe them (applyBurstLeases).
	leased    []int64
	leases    []BurstLease
	leaseCost int64
}

// PlanPortfolio returns the cheapest portfolio for r.Demand: per GPU class
// a committed base held for the whole series, on-demand GPUs for the hours
// above it, spot GPUs for interruptible work where spot is cheaper, and
// deferrable work moved within its window to hours where it costs least.
// Classes are independent: no constraint spans two classes, so each is
// solved alone and the portfolio is their sum. Every amount is recomputed
// exactly in micro-units from the solution's integer counts.
func PlanPortfolio(r PortfolioRequest) (Portfolio, error) {
	if err := r.Demand.Validate(); err != nil {
		return Portfolio{}, fmt.Errorf("plan portfolio: demand: %w", err)
	}
	solver := r.Solver
	if solver == "" {
		solver = SolverAuto
	}
	if _, err := ParseSolver(string(solver)); err != nil {
		return Portfolio{}, err
	}
	if r.ShiftWindow < 0 || r.ShiftWindow > MaxHours {
		return Portfolio{}, &core.FieldError{Field: "shift_window", Value: fmt.Sprint(r.ShiftWindow), Allowed: fmt.Sprintf("0 (24 hours) or 1..%d hours", MaxHours)}
	}
	if r.Spot.CheckpointSeconds < 0 || r.Spot.RestartSeconds < 0 || r.Spot.CheckpointSeconds > MaxLength || r.Spot.RestartSeconds > MaxLength {
		return Portfolio{}, &core.FieldError{Field: "spot", Value: fmt.Sprintf("checkpoint %d s, restart %d s", r.Spot.CheckpointSeconds, r.Spot.RestartSeconds), Allowed: "0..10 years each"}
	}
	inputs := make([]*classInput, len(r.Demand.Classes))
	for i, d := range r.Demand.Classes {
		in, err := newClassInput(r, d)
		if err != nil {
			return Portfolio{}, err
		}
		inputs[i] = in
	}
	solves := len(inputs)
	if !r.NoSensitivity {
		solves *= 5
	}
	var mu sync.Mutex // calls in order, one at a time
	solved := 0
	progress := func() {
		if r.Progress != nil {
			mu.Lock()
			defer mu.Unlock()
			solved++
			r.Progress(solved, solves)
		}
	}
	p, sols, err := solveAll(inputs, solver, nil, progress)
	if err != nil {
		return Portfolio{}, err
	}
	p.Start, p.Hours = r.Demand.Start, r.Demand.Hours
	if r.NoSensitivity {
		return p, nil
	}
	for _, change := range []int64{2000, -2000} {
		scaled := make([]*classInput, len(inputs))
		fixed := make([]int64, len(inputs))
		for i, in := range inputs {
			scaled[i] = in.scaled(change)
			fixed[i] = sols[i].r
		}
		sp, _, err := solveAll(scaled, solver, nil, progress)
		if err != nil {
			return Portfolio{}, fmt.Errorf("plan portfolio: demand %+d%%: %w", change/100, err)
		}
		fp, _, err := solveAll(scaled, solver, fixed, progress)
		if err != nil {
			return Portfolio{}, fmt.Errorf("plan portfolio: demand %+d%% with the base kept: %w", change/100, err)
		}
		p.Sensitivity = append(p.Sensitivity, Scenario{
			ChangeBP: change, Reserved: sp.Reserved, Cost: sp.Cost, OnDemandPeak: sp.OnDemandPeak,
			SpotShareBP: sp.SpotShareBP, FixedBaseCost: fp.Cost,
		})
	}
	return p, nil
}

// solveAll solves every class and sums the portfolio. fixed, when set,
// holds each class's least base; solved is called after each class.
func solveAll(inputs []*classInput, solver Solver, fixed []int64, solved func()) (Portfolio, []classSolution, error) {
	var p Portfolio
	method := solver
	sols := make([]classSolution, len(inputs))
	methods := make([]Solver, len(inputs))
	errs := make([]error, len(inputs))
	// Classes are independent and their inputs read-only, so they are
	// solved side by side; the results do not depend on the order.
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, in := range inputs {
		var rf *int64
		if fixed != nil {
			rf = &fixed[i]
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s, m, err := solveClass(in, solver, rf)
			if err == nil && in.burst {
				s, err = withBurstLeases(in, s, rf)
			}
			sols[i], methods[i], errs[i] = s, m, err
			solved()
		}()
	}
	wg.Wait()
	for i, in := range inputs {
		if errs[i] != nil {
			return Portfolio{}, nil, fmt.Errorf("plan portfolio: %s: %w", in.model, errs[i])
		}
		if solver == SolverAuto && (method == SolverAuto || methods[i] == SolverDecomposed) {
			method = methods[i]
		}
		cp, err := in.classPlan(sols[i])
		if err != nil {
			return Portfolio{}, nil, fmt.Errorf("plan portfolio: %s: %w", in.model, err)
		}
		p.Classes = append(p.Classes, cp)
	}
	p.Method = method
	if err := p.sum(inputs, sols); err != nil {
		return Portfolio{}, nil, err
	}
	return p, sols, nil
}

func (p *Portfolio) sum(inputs []*classInput, sols []classSolution) error {
	var ok = true
	add := func(a, b int64) int64 {
		s, o := addInt(a, b)
		ok = ok && o
		return s
	}
	hours := 0
	for _, in := range inputs {
		hours = max(hours, in.hours)
	}
	peakBy := make([]int64, hours)
	p.Baselines = Baselines{AllOnDemand: Baseline{OK: true}, AllMonthly: Baseline{OK: true}, PeakSized: Baseline{OK: true}}
	for i, c := range p.Classes {
		if c.Reserved > 0 {
			p.Reserved = append(p.Reserved, Reservation{GPUModel: c.GPUModel, Count: c.Reserved, Term: c.Base.Describe(), PerGPU: c.Base.Total, Cost: c.ReservedCost})
		}
		p.Cost = core.Micros(add(int64(p.Cost), int64(c.Cost)))
		p.ReservedCost = core.Micros(add(int64(p.ReservedCost), int64(c.ReservedCost)))
		p.OnDemandCost = core.Micros(add(int64(p.OnDemandCost), int64(c.OnDemandCost)))
		p.BurstLeaseCost = core.Micros(add(int64(p.BurstLeaseCost), int64(c.BurstLeaseCost)))
		p.SpotCost = core.Micros(add(int64(p.SpotCost), int64(c.SpotCost)))
		p.SpotOverhead = core.Micros(add(int64(p.SpotOverhead), int64(c.SpotOverhead)))
		p.DemandGPUHours = add(p.DemandGPUHours, c.DemandGPUHours)
		p.PaidGPUSeconds = add(p.PaidGPUSeconds, c.PaidGPUSeconds)
		p.ShiftedGPUHours = add(p.ShiftedGPUHours, c.ShiftedGPUHours)
		p.OnDemandGPUHours = add(p.OnDemandGPUHours, c.OnDemandGPUHours)
		p.SpotGPUHours = add(p.SpotGPUHours, c.SpotGPUHours)
		for t, v := range sols[i].od {
			peakBy[t] += v
		}
		for _, b := range []struct{ dst, src *Baseline }{
			{&p.Baselines.AllOnDemand, &c.Baselines.AllOnDemand},
			{&p.Baselines.AllMonthly, &c.Baselines.AllMonthly},
			{&p.Baselines.PeakSized, &c.Baselines.PeakSized},
		} {
			b.dst.OK = b.dst.OK && b.src.OK
			b.dst.Cost = core.Micros(add(int64(b.dst.Cost), int64(b.src.Cost)))
		}
	}
	if !ok {
		return ErrOverflow
	}
	for _, v := range peakBy {
		p.OnDemandPeak = max(p.OnDemandPeak, v)
	}
	p.SpotShareBP = shareBP(p.SpotGPUHours, p.DemandGPUHours)
	p.IdleShareBP = shareBP(p.PaidGPUSeconds-p.DemandGPUHours*3600, p.PaidGPUSeconds)
	for _, b := range []*Baseline{&p.Baselines.AllOnDemand, &p.Baselines.AllMonthly, &p.Baselines.PeakSized} {
		b.setSaving(p.Cost)
	}
	return nil
}

func (b *Baseline) setSaving(cost core.Micros) {
	if !b.OK {
		*b = Baseline{}
		return
	}
	if b.Cost > 0 {
		b.SavingBP = core.MulDivHalfEven(int64(b.Cost-cost), bpOne, int64(b.Cost))
	}
}

// shareBP returns a/b in basis points, half to even; 0 when b is 0.
func shareBP(a, b int64) int64 {
	if b == 0 {
		return 0
	}
	return core.MulDivHalfEven(a, bpOne, b)
}

// bigMFactor: without an on-demand plan an hour costs more than holding a
// GPU for the whole series, so the solvers never choose it.
func bigM(baseCost int64) int64 { return baseCost + 1 }

func newClassInput(r PortfolioRequest, d ClassDemand) (*classInput, error) {
	names := make([]string, len(r.Prices))
	for i, c := range r.Prices {
		names[i] = c.GPUModel
	}
	var prices *ClassPrices
	for i := range r.Prices {
		if r.Prices[i].GPUModel == d.GPUModel {
			prices = &r.Prices[i]
		}
	}
	if prices == nil {
		return nil, fmt.Errorf("plan portfolio: demand for %q: %w %q: the catalog rents %s", d.GPUModel, ErrUnknownClass, d.GPUModel, quoteList(names))
	}
	H := r.Demand.Hours
	in := &classInput{model: d.GPUModel, hours: H, window: r.ShiftWindow}
	if in.window == 0 {
		in.window = 24
	}
	in.firm = make([]int64, H)
	in.intr = make([]int64, H)
	in.dfr = make([]int64, H)
	for t := range H {
		in.intr[t] = at(d.Interruptible, t)
		in.dfr[t] = at(d.Deferrable, t)
		in.firm[t] = d.GPUs[t] - in.intr[t] - in.dfr[t]
		in.peak = max(in.peak, d.GPUs[t])
	}
	if len(prices.Periods) > 0 {
		c, err := ChooseTerm(TermRequest{Length: int64(H) * 3600, Count: 1, Prices: prices.Periods})
		if err != nil {
			return nil, fmt.Errorf("plan portfolio: %s: base term: %w", d.GPUModel, err)
		}
		in.base = c
		for _, pc := range c.Periods {
			if pp, _ := prices.Period(pc.Period); !pp.PayAsYouGo() {
				in.hasBase = true
			}
		}
		in.baseCost = int64(c.Total)
		if in.hasBase {
			in.rMax = in.peak
		}
		if m, ok := prices.Period(string(core.Month)); ok && !m.PayAsYouGo() {
			in.hasMonth, in.monthPrice = true, int64(m.Price)
		}
	}
	in.hasOD = len(prices.OnDemand) > 0
	in.committed, in.burst = prices.Committed(), r.BurstLeases
	if !in.hasOD && !in.hasBase {
		return nil, fmt.Errorf("plan portfolio: %s: the catalog has neither an on-demand plan nor a committed term for it", d.GPUModel)
	}
	in.od = make([]int64, H)
	if in.hasOD {
		if hp, ok := prices.Period(string(core.Hour)); ok && hp.PayAsYouGo() {
			in.odList = int64(hp.Price)
		}
	}
	for _, o := range prices.OnDemand {
		if t := o.Plan.TimeOfUse; t != nil && len(t.Windows) > 0 {
			in.hasTOU = true
		}
	}
	lost := 2*r.Spot.RestartSeconds + r.Spot.CheckpointSeconds // twice the loss per reclaim
	for t := range H {
		ts := r.Demand.Start.Add(time.Duration(t) * time.Hour)
		if !in.hasOD {
			in.od[t] = bigM(in.baseCost)
		} else {
			best := int64(math.MaxInt64)
			for _, o := range prices.OnDemand {
				best = min(best, int64(o.At(ts)))
			}
			in.od[t] = best
		}
		if len(prices.Spot) > 0 {
			if in.sp == nil {
				in.sp = make([]int64, H)
				in.rawSp = make([]int64, H)
			}
			best, raw := int64(math.MaxInt64), int64(0)
			for _, o := range prices.Spot {
				price := int64(o.At(ts))
				eff := price
				if rc := o.Plan.Reclaim; rc != nil && rc.MonthlyRateBP > 0 {
					den := int64(bpOne) * 2 * core.Month.Seconds()
					eff = core.MulDivHalfEven(price, den+rc.MonthlyRateBP*lost, den)
				}
				if eff < best {
					best, raw = eff, price
				}
			}
			in.sp[t], in.rawSp[t] = best, raw
		}
	}
	if in.sp == nil {
		// Without spot, interruptible work is firm work.
		for t := range H {
			in.firm[t] += in.intr[t]
			in.intr[t] = 0
		}
	}
	return in, nil
}

// scaled returns the input with every part of the demand scaled by
// (10000+changeBP)/10000, half to even.
func (in *classInput) scaled(changeBP int64) *classInput {
	c := *in
	c.firm, c.intr, c.dfr = make([]int64, in.hours), make([]int64, in.hours), make([]int64, in.hours)
	c.peak = 0
	for t := range in.hours {
		c.firm[t] = core.MulDivHalfEven(in.firm[t], bpOne+changeBP, bpOne)
		c.intr[t] = core.MulDivHalfEven(in.intr[t], bpOne+changeBP, bpOne)
		c.dfr[t] = core.MulDivHalfEven(in.dfr[t], bpOne+changeBP, bpOne)
		c.peak = max(c.peak, c.firm[t]+c.intr[t]+c.dfr[t])
	}
	if c.hasBase {
		c.rMax = c.peak
	}
	return &c
}

// shifting reports whether deferrable work can move at all.
func (in *classInput) shifting() bool {
	if in.window <= 1 {
		return false
	}
	return slices.ContainsFunc(in.dfr, func(v int64) bool { return v > 0 })
}

// spotting reports whether interruptible work may go to spot.
func (in *classInput) spotting() bool {
	return in.sp != nil && slices.ContainsFunc(in.intr, func(v int64) bool { return v > 0 })
}

func solveClass(in *classInput, solver Solver, fixed *int64) (classSolution, Solver, error) {
	switch solver {
	case SolverAuto:
		if !in.shifting() && !in.spotting() {
			s, err := solveLDC(in, fixed)
			return s, SolverLDC, err
		}
		s, err := solveDecomposed(in, fixed)
		return s, SolverDecomposed, err
	case SolverLDC:
		s, err := solveLDC(in, fixed)
		return s, SolverLDC, err
	case SolverDecomposed:
		s, err := solveDecomposed(in, fixed)
		return s, SolverDecomposed, err
	case SolverLP:
		s, err := solveLP(in, fixed)
		return s, SolverLP, err
	}
	return classSolution{}, "", fmt.Errorf("plan: unknown solver %q", solver)
}

// solveLDC is the exact answer without spot or shifting, from the
// load-duration curve: the k-th GPU is busy in the hours whose demand is
// at least k, and on demand those hours cost S_k = Σ_{t: d_t >= k} od_t.
// Holding it committed costs the base; so the k-th GPU is reserved if and
// only if S_k >= base. S_k falls as k grows, so the reserved GPUs are the
// first r, and the total cost r × base + Σ_{k>r} S_k is the least.
func solveLDC(in *classInput, fixed *int64) (classSolution, error) {
	if in.shifting() || in.spotting() {
		return classSolution{}, fmt.Errorf("%w: the load-duration curve takes no spot and no shifting", ErrNotApplicable)
	}
	var r int64
	if in.rMax > 0 {
		// bucket[k] = Σ od_t over hours whose demand is exactly k.
		bucket := make([]int64, in.peak+2)
		for t := range in.hours {
			d := in.firm[t] + in.dfr[t]
			s, ok := addInt(bucket[d], in.od[t])
			if !ok {
				return classSolution{}, ErrOverflow
			}
			bucket[d] = s
		}
		var sk int64 // S_k, from the top down
		for k := in.peak; k >= 1; k-- {
			s, ok := addInt(sk, bucket[k])
			if !ok {
				return classSolution{}, ErrOverflow
			}
			sk = s
			if sk >= in.baseCost {
				r = k
				break
			}
		}
	}
	if fixed != nil {
		// cost(r) is convex and least at the LDC's r, so the best base
		// of at least *fixed is the larger of the two.
		r = max(r, *fixed)
	}
	return in.evaluate(r, true)
}

// solveDecomposed minimises cost(r) over the integer base r. For a fixed
// base the hours of different shift windows do not interact, and within a
// window each hour's cost is a convex piecewise-linear function of the
// deferrable work placed in it (free on idle reserved GPUs, then at the
// price of moving interruptible work off them, then on demand), so
// filling the window's work into the cheapest marginal slots is optimal.
// cost(r) is convex (the partial minimum of a jointly convex cost), so a
// binary search on cost(r+1) - cost(r) finds its largest minimiser.
func solveDecomposed(in *classInput, fixed *int64) (classSolution, error) {
	memo := map[int64]int64{}
	cost := func(r int64) (int64, error) {
		if c, ok := memo[r]; ok {
			return c, nil
		}
		s, err := in.evaluate(r, false)
		if err != nil {
			return 0, err
		}
		memo[r] = s.cost
		return s.cost, nil
	}
	lo, hi := int64(0), in.rMax
	if fixed != nil {
		lo, hi = *fixed, max(*fixed, in.rMax)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		a, err := cost(mid)
		if err != nil {
			return classSolution{}, err
		}
		b, err := cost(mid + 1)
		if err != nil {
			return classSolution{}, err
		}
		if b > a {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return in.evaluate(lo, true)
}

// slot is a stretch of extra deferrable work an hour can take at one
// marginal price.
type slot struct {
	price int64
	// ord breaks ties: home slots (the work asked for at this hour)
	// first, then by hour.
	ord  int64
	hour int
	n    int64
}

// evaluate serves the demand with base r at least cost: deferrable work
// placed window by window, then each hour's firm and deferrable work on
// reserved GPUs first, interruptible work on the reserved GPUs left, the
// rest on demand or, for interruptible work where it is cheaper, on spot.
func (in *classInput) evaluate(r int64, detail bool) (classSolution, error) {
	s := classSolution{r: r}
	if detail {
		s.od, s.spot, s.place, s.reserved = make([]int64, in.hours), make([]int64, in.hours), make([]int64, in.hours), make([]int64, in.hours)
		s.leased = make([]int64, in.hours)
	}
	total, ok := mulInt(r, in.baseCost)
	if !ok {
		return s, ErrOverflow
	}
	W := in.window
	if !in.shifting() {
		W = 1
	}
	y := make([]int64, W)
	var slots []slot
	for w0 := 0; w0 < in.hours; w0 += W {
		w1 := min(in.hours, w0+W)
		var D int64
		for t := w0; t < w1; t++ {
			D += in.dfr[t]
		}
		if W == 1 || D == 0 {
			for t := w0; t < w1; t++ {
				y[t-w0] = in.dfr[t]
			}
		} else {
			slots = in.slots(slots[:0], r, w0, w1)
			// Idle reserved GPUs cost nothing: when they take all the
			// work, only their order (home first, then by hour) matters.
			var freeN int64
			for _, sl := range slots {
				if sl.price == 0 {
					freeN += sl.n
				}
			}
			if freeN >= D {
				slots = slices.DeleteFunc(slots, func(sl slot) bool { return sl.price != 0 })
			}
			slices.SortFunc(slots, func(a, b slot) int {
				if a.price != b.price {
					return cmpInt(a.price, b.price)
				}
				return cmpInt(a.ord, b.ord)
			})
			clear(y)
			for _, sl := range slots {
				if D == 0 {
					break
				}
				n := min(D, sl.n)
				y[sl.hour-w0] += n
				D -= n
			}
		}
		for t := w0; t < w1; t++ {
			n := in.firm[t] + y[t-w0]
			od := max(0, n-r)
			free := max(0, r-n)
			intrRes := min(free, in.intr[t])
			rest := in.intr[t] - intrRes
			var spot int64
			if in.sp != nil && in.sp[t] < in.od[t] {
				spot = rest
			} else {
				od += rest
			}
			var ok1, ok2 bool
			total, ok1 = mulAdd(total, od, in.od[t])
			total, ok2 = mulAdd(total, spot, spotPrice(in, t))
			if !ok1 || !ok2 {
				return s, ErrOverflow
			}
			if detail {
				s.od[t], s.spot[t], s.place[t] = od, spot, y[t-w0]
				s.reserved[t] = min(r, n) + intrRes
			}
		}
	}
	s.cost = total
	return s, nil
}

func spotPrice(in *classInput, t int) int64 {
	if in.sp == nil {
		return 0
	}
	return in.sp[t]
}

// slots lists, for hours [w0, w1), the stretches of extra deferrable work
// each hour can take and their marginal prices, nondecreasing within an
// hour: idle reserved GPUs (free), reserved GPUs interruptible work would
// otherwise use (at that work's next-cheapest price), then on demand, up
// to the class's peak in total. The first units of an hour, up to the
// deferrable work asked for there, are marked home so that ties keep work
// where it was.
func (in *classInput) slots(dst []slot, r int64, w0, w1 int) []slot {
	for t := w0; t < w1; t++ {
		u := max(0, in.peak-in.firm[t]-in.intr[t])
		free := max(0, r-in.firm[t])
		slack := max(0, free-in.intr[t])
		disp := min(free, in.intr[t])
		m := in.od[t]
		if in.sp != nil {
			m = min(m, in.sp[t])
		}
		home := in.dfr[t]
		for _, seg := range [3]struct{ price, n int64 }{{0, slack}, {m, disp}, {in.od[t], u}} {
			n := min(seg.n, u)
			u -= n
			if n == 0 {
				continue
			}
			if h := min(home, n); h > 0 {
				dst = append(dst, slot{price: seg.price, ord: int64(t), hour: t, n: h})
				home -= h
				n -= h
			}
			if n > 0 {
				dst = append(dst, slot{price: seg.price, ord: 1<<32 + int64(t), hour: t, n: n})
			}
		}
	}
	return dst
}

// classPlan turns a solution into the class's plan, every amount exact.
func (in *classInput) classPlan(s classSolution) (ClassPlan, error) {
	c := ClassPlan{GPUModel: in.model, Reserved: s.r, Base: in.base, HasBase: in.hasBase, Peak: in.peak}
	bad := false
	add := func(a, b int64) int64 {
		v, ok := addInt(a, b)
		bad = bad || !ok
		return v
	}
	madd := func(acc, n, p int64) int64 {
		v, ok := mulAdd(acc, n, p)
		bad = bad || !ok
		return v
	}
	c.Hours = make([]HourPlan, in.hours)
	var odCost, spCost, spRaw, aod int64
	for t := range in.hours {
		d := in.firm[t] + in.intr[t] + in.dfr[t]
		c.DemandGPUHours += d
		c.FirmGPUHours += in.firm[t]
		c.InterruptibleGPUHours += in.intr[t]
		c.DeferrableGPUHours += in.dfr[t]
		c.OnDemandGPUHours += s.od[t]
		c.SpotGPUHours += s.spot[t]
		c.ShiftedGPUHours += max(0, in.dfr[t]-s.place[t])
		c.OnDemandPeak = max(c.OnDemandPeak, s.od[t])
		c.Hours[t] = HourPlan{Reserved: s.reserved[t], OnDemand: s.od[t], Spot: s.spot[t], Deferred: s.place[t]}
		if s.leased != nil {
			c.Hours[t].Leased = s.leased[t]
			c.LeasedGPUHours += s.leased[t]
		}
		odCost = madd(odCost, s.od[t], in.od[t])
		if in.sp != nil {
			spCost = madd(spCost, s.spot[t], in.sp[t])
			spRaw = madd(spRaw, s.spot[t], in.rawSp[t])
		}
		aod = madd(aod, d, in.od[t])
	}
	if s.od != nil && !in.hasOD && c.OnDemandGPUHours > 0 {
		return ClassPlan{}, fmt.Errorf("plan: %s has no on-demand plan, yet the plan rents %d GPU-hours on demand", in.model, c.OnDemandGPUHours)
	}
	resCost := madd(0, s.r, in.baseCost)
	c.ReservedCost, c.OnDemandCost, c.SpotCost = core.Micros(resCost), core.Micros(odCost), core.Micros(spCost)
	c.SpotOverhead = core.Micros(spCost - spRaw)
	var leaseCost, leasePaid int64
	for _, l := range s.leases {
		leaseCost = add(leaseCost, int64(l.Cost))
		leasePaid = madd(leasePaid, l.Count, l.PaidHours*3600)
	}
	c.BurstLeases, c.BurstLeaseCost = s.leases, core.Micros(leaseCost)
	c.Cost = core.Micros(add(add(add(resCost, odCost), spCost), leaseCost))
	c.PaidGPUSeconds = add(add(madd(0, s.r, in.base.PaidSeconds), madd(0, add(c.OnDemandGPUHours, c.SpotGPUHours), 3600)), leasePaid)
	c.IdleShareBP = shareBP(c.PaidGPUSeconds-c.DemandGPUHours*3600, c.PaidGPUSeconds)
	c.Baselines.AllOnDemand = Baseline{Cost: core.Micros(aod), OK: in.hasOD}
	if in.hasMonth {
		months := ceilDiv(int64(in.hours)*3600, core.Month.Seconds())
		c.Baselines.AllMonthly = Baseline{Cost: core.Micros(madd(0, madd(0, in.peak, months), in.monthPrice)), OK: true}
	}
	c.Baselines.PeakSized = Baseline{Cost: core.Micros(madd(0, in.peak, in.baseCost)), OK: len(in.base.Periods) > 0}
	if bad {
		return ClassPlan{}, ErrOverflow
	}
	if s.cost != int64(c.Cost) {
		return ClassPlan{}, fmt.Errorf("plan: %s: solver cost %s differs from the plan's exact cost %s", in.model, core.Micros(s.cost), c.Cost)
	}
	for _, b := range []*Baseline{&c.Baselines.AllOnDemand, &c.Baselines.AllMonthly, &c.Baselines.PeakSized} {
		b.setSaving(c.Cost)
	}
	if in.hasBase && in.odList > 0 {
		c.BreakEvenHours = ceilDiv(in.baseCost, in.odList)
	}
	c.Reason = in.reason(c)
	return c, nil
}

// reason explains a class plan: the base against the break-even, the
// burst, spot and shifting.
func (in *classInput) reason(c ClassPlan) string {
	var b strings.Builder
	switch {
	case !in.hasBase:
		fmt.Fprintf(&b, "no committed term makes holding a GPU for %s cheaper than on demand, so nothing is reserved", FormatSpan(int64(in.hours)*3600))
	case c.Reserved == 0:
		fmt.Fprintf(&b, "nothing reserved: one GPU held for %s costs %s (%s)", FormatSpan(int64(in.hours)*3600), in.base.Total, in.base.Describe())
		if c.BreakEvenHours > 0 {
			fmt.Fprintf(&b, ", more than on demand unless it is busy %d h or more, which no GPU is", c.BreakEvenHours)
		}
	default:
		fmt.Fprintf(&b, "reserve %d GPU(s) on %s at %s each", c.Reserved, in.base.Describe(), in.base.Total)
		if c.BreakEvenHours > 0 {
			fmt.Fprintf(&b, " (at the list on-demand %s per hour a GPU busy %d h or more is cheaper committed)", core.Micros(in.odList), c.BreakEvenHours)
		}
		// The k-th GPU of the plan is busy in the hours whose load on
		// reserved and on-demand GPUs is at least k; on demand those
		// hours would cost S_k.
		busy := func(k int64) (hours, cost int64) {
			for t, h := range c.Hours {
				if h.Reserved+h.OnDemand >= k {
					hours++
					cost, _ = mulAdd(cost, 1, in.od[t])
				}
			}
			return hours, cost
		}
		h, s := busy(c.Reserved)
		fmt.Fprintf(&b, "; GPU %d is busy %d h, %s on demand", c.Reserved, h, core.Micros(s))
		if h, s := busy(c.Reserved + 1); h > 0 {
			fmt.Fprintf(&b, ", GPU %d only %d h, %s on demand", c.Reserved+1, h, core.Micros(s))
		}
	}
	if c.OnDemandGPUHours > 0 {
		fmt.Fprintf(&b, "; the burst above it is %d GPU-hours on demand, at most %d GPUs at once, for %s", c.OnDemandGPUHours, c.OnDemandPeak, c.OnDemandCost)
	}
	if len(c.BurstLeases) > 0 {
		var ls []string
		for _, l := range c.BurstLeases {
			ls = append(ls, l.String())
		}
		fmt.Fprintf(&b, "; %d GPU-hours of the burst on committed leases, cheaper than on demand (%s), for %s", c.LeasedGPUHours, strings.Join(ls, ", "), c.BurstLeaseCost)
	}
	if c.SpotGPUHours > 0 {
		fmt.Fprintf(&b, "; %d interruptible GPU-hours on spot for %s (%s of it for work lost to reclaims)", c.SpotGPUHours, c.SpotCost, c.SpotOverhead)
	}
	if c.ShiftedGPUHours > 0 {
		where := "to hours with idle reserved GPUs"
		if in.hasTOU {
			where = "to idle reserved GPUs and off-peak hours"
		}
		fmt.Fprintf(&b, "; %d deferrable GPU-hours moved within their %d-hour window %s", c.ShiftedGPUHours, in.window, where)
	}
	return b.String()
}

// mulAdd returns acc + n*p for non-negative values, false on overflow.
func mulAdd(acc, n, p int64) (int64, bool) {
	if n == 0 || p == 0 {
		return acc, true
	}
	m, ok := mulInt(n, p)
	if !ok {
		return 0, false
	}
	return addInt(acc, m)
}

// addInt adds non-negative values, false on overflow.
func addInt(a, b int64) (int64, bool) {
	s, carry := bits.Add64(uint64(a), uint64(b), 0)
	if carry != 0 || s > math.MaxInt64 {
		return 0, false
	}
	return int64(s), true
}
