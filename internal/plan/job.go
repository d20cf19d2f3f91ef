package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Bench is one measurement: GPUs of a model ran a small sample at
// SamplesPerSecond, all GPUs together.
type Bench struct {
	GPUModel         string
	GPUs             int
	SamplesPerSecond float64
}

// Scaling says how throughput grows with GPUs beyond a measured count. The
// zero value is linear scaling. At most one of the two fields is set.
type Scaling struct {
	// PerDoubling is the efficiency kept per doubling of GPUs, in (0, 1]:
	// 0.9 means 2n GPUs do 2 × 0.9 = 1.8 times the work of n, so n GPUs
	// do n^(1+log2 0.9) times the work of one. 0 means 1 (linear).
	PerDoubling float64
	// SerialFraction is Amdahl's serial part of the work, in [0, 1): with
	// fraction s, n GPUs are n / (1 + s(n-1)) times as fast as one.
	SerialFraction float64
}

// speedup returns how many times one GPU's throughput n GPUs give.
func (s Scaling) speedup(n int) float64 {
	x := float64(n)
	switch {
	case s.SerialFraction > 0:
		return x / (1 + s.SerialFraction*(x-1))
	case s.PerDoubling > 0 && s.PerDoubling != 1:
		return x * math.Pow(s.PerDoubling, math.Log2(x))
	}
	return x
}

// JobRequest asks which GPU model and count finish a job by its deadline
// at the least cost.
type JobRequest struct {
	// Benches are the measurements; each model benched is a candidate.
	Benches []Bench
	// Samples × Epochs is the work, in samples.
	Samples, Epochs int64
	// DeadlineSeconds is the time the job may take.
	DeadlineSeconds int64
	Scaling         Scaling
	// Offers are the catalog's offers; a benched model needs at least one
	// with an on-demand or committed plan.
	Offers []core.Offer
	// MaxGPUs is the most GPUs considered per model, 1..4096; 0 means 64.
	MaxGPUs int
}

// Validate reports the first problem with r as a *core.FieldError.
func (r JobRequest) Validate() error {
	if len(r.Benches) == 0 {
		return &core.FieldError{Field: "bench", Value: "", Allowed: "at least one measurement model:gpus:samples_per_s"}
	}
	for i, b := range r.Benches {
		f := func(n string) string { return fmt.Sprintf("bench[%d].%s", i, n) }
		switch {
		case b.GPUModel == "":
			return &core.FieldError{Field: f("gpu_model"), Value: "", Allowed: "a GPU model"}
		case b.GPUs < 1 || b.GPUs > 4096:
			return &core.FieldError{Field: f("gpus"), Value: fmt.Sprint(b.GPUs), Allowed: "1..4096 GPUs"}
		case !(b.SamplesPerSecond > 0) || math.IsInf(b.SamplesPerSecond, 0):
			return &core.FieldError{Field: f("samples_per_s"), Value: fmt.Sprint(b.SamplesPerSecond), Allowed: "a throughput > 0 samples per second"}
		}
		for j := range i {
			if r.Benches[j].GPUModel == b.GPUModel && r.Benches[j].GPUs == b.GPUs {
				return &core.FieldError{Field: f("gpus"), Value: fmt.Sprintf("%s:%d", b.GPUModel, b.GPUs), Allowed: "one measurement per model and GPU count"}
			}
		}
	}
	if r.Samples < 1 || r.Epochs < 1 || r.Samples > math.MaxInt64/r.Epochs {
		return &core.FieldError{Field: "samples", Value: fmt.Sprintf("%d × %d epochs", r.Samples, r.Epochs), Allowed: "samples >= 1 and epochs >= 1 whose product fits in 63 bits"}
	}
	if r.DeadlineSeconds < 1 || r.DeadlineSeconds > MaxLength {
		return &core.FieldError{Field: "deadline", Value: fmt.Sprint(r.DeadlineSeconds), Allowed: "1 second to 10 years"}
	}
	s := r.Scaling
	switch {
	case s.PerDoubling != 0 && s.SerialFraction != 0:
		return &core.FieldError{Field: "scaling", Value: fmt.Sprintf("per doubling %g, serial fraction %g", s.PerDoubling, s.SerialFraction), Allowed: "an efficiency per doubling or a serial fraction, not both"}
	case s.PerDoubling < 0 || s.PerDoubling > 1 || math.IsNaN(s.PerDoubling):
		return &core.FieldError{Field: "efficiency", Value: fmt.Sprint(s.PerDoubling), Allowed: "an efficiency per doubling in (0, 1]"}
	case s.SerialFraction < 0 || s.SerialFraction >= 1 || math.IsNaN(s.SerialFraction):
		return &core.FieldError{Field: "serial_fraction", Value: fmt.Sprint(s.SerialFraction), Allowed: "a serial fraction in [0, 1)"}
	}
	if r.MaxGPUs < 0 || r.MaxGPUs > 4096 {
		return &core.FieldError{Field: "max_gpus", Value: fmt.Sprint(r.MaxGPUs), Allowed: "0 (64) or 1..4096"}
	}
	return nil
}

// JobOption is one way to run the job: GPUs of a model on one offer.
type JobOption struct {
	GPUModel string
	GPUs     int
	// OfferID is the cheapest offer for it, Machines its machines
	// (GPUs rounded up to whole machines).
	OfferID  string
	Machines int
	// GPUsRented is Machines × the offer's GPUs per machine.
	GPUsRented int
	// SamplesPerSecond is the modelled throughput, Measured whether it is
	// a bench's own figure.
	SamplesPerSecond float64
	Measured         bool
	// DurationSeconds is the work over the throughput, rounded up.
	DurationSeconds int64
	MeetsDeadline   bool
	// Term is the cheapest lease mix for Machines machines over the
	// duration; Cost its total.
	Term TermChoice
	Cost core.Micros
	// PaidGPUSeconds is GPUsRented × the leases' paid time, BusyGPUSeconds
	// GPUs × duration; IdleShareBP = 1 - busy/paid, in basis points:
	// GPUs rented but not used and lease time past the job's end.
	PaidGPUSeconds, BusyGPUSeconds int64
	IdleShareBP                    int64
	// EfficiencyBP is per-GPU throughput against the model's best
	// measured per-GPU throughput, in basis points.
	EfficiencyBP int64
}

// JobPlan is the answer to a [JobRequest].
type JobPlan struct {
	// WorkSamples is Samples × Epochs.
	WorkSamples int64
	// Options are a selection per model: its measured counts, powers of
	// two up to MaxGPUs, the fewest GPUs that meet the deadline and the
	// recommendation. Ordered by model, then GPUs.
	Options []JobOption
	// Recommended indexes Options: the cheapest option over every count
	// 1..MaxGPUs of every model that meets the deadline (ties: fewer
	// GPUs, then sooner); -1 when none does.
	Recommended int
	// Reason explains the recommendation against its neighbours.
	Reason string
}

// PlanJob sizes a job from benchmarks. For each benched model and each GPU
// count up to MaxGPUs it models the throughput (a measured count's own
// figure, else the nearest measured count below — or the smallest above —
// scaled by r.Scaling), the duration, and the cheapest lease mix on each
// of the model's offers ([ChooseTerm] over [PricesFromOffer], whole
// machines), and recommends the cheapest that meets the deadline.
//
// Throughput and duration are computed in float64 (the scaling laws are
// not rational); the duration is then a whole number of seconds and every
// amount is exact from there.
func PlanJob(r JobRequest) (JobPlan, error) {
	if err := r.Validate(); err != nil {
		return JobPlan{}, err
	}
	maxN := r.MaxGPUs
	if maxN == 0 {
		maxN = 64
	}
	var models []string
	for _, o := range r.Offers {
		if o.GPUModel != "" && !slices.Contains(models, o.GPUModel) {
			models = append(models, o.GPUModel)
		}
	}
	byModel := map[string][]Bench{}
	var order []string
	for _, b := range r.Benches {
		m, err := FindClass(models, b.GPUModel)
		if err != nil {
			return JobPlan{}, fmt.Errorf("plan job: bench %s:%d: %w", b.GPUModel, b.GPUs, err)
		}
		b.GPUModel = m
		if _, ok := byModel[m]; !ok {
			order = append(order, m)
		}
		byModel[m] = append(byModel[m], b)
	}
	work := r.Samples * r.Epochs
	plan := JobPlan{WorkSamples: work, Recommended: -1}
	var best *JobOption
	for _, m := range order {
		benches := byModel[m]
		slices.SortFunc(benches, func(a, b Bench) int { return a.GPUs - b.GPUs })
		perGPU := 0.0
		for _, b := range benches {
			perGPU = max(perGPU, b.SamplesPerSecond/float64(b.GPUs))
		}
		var all []JobOption
		for n := 1; n <= max(maxN, benches[len(benches)-1].GPUs); n++ {
			o, ok, err := jobOption(r, m, n, benches, perGPU, work)
			if err != nil {
				return JobPlan{}, fmt.Errorf("plan job: %s × %d: %w", m, n, err)
			}
			if !ok {
				continue
			}
			all = append(all, o)
			if o.MeetsDeadline && (best == nil || betterJob(o, *best)) {
				b := o
				best = &b
			}
		}
		if len(all) == 0 {
			return JobPlan{}, fmt.Errorf("plan job: %s: no option: no offer has an on-demand or committed price for it, or every duration is over 10 years", m)
		}
		show := map[int]bool{}
		for _, b := range benches {
			show[b.GPUs] = true
		}
		for n := 1; n <= maxN; n *= 2 {
			show[n] = true
		}
		for _, o := range all {
			if o.MeetsDeadline {
				show[o.GPUs] = true
				break
			}
		}
		for _, o := range all {
			if show[o.GPUs] || best != nil && best.GPUModel == m && best.GPUs == o.GPUs {
				plan.Options = append(plan.Options, o)
			}
		}
	}
	if best != nil {
		// The best may be in a model shown before it was found; add it if missing.
		i := slices.IndexFunc(plan.Options, func(o JobOption) bool { return o.GPUModel == best.GPUModel && o.GPUs == best.GPUs })
		if i < 0 {
			plan.Options = append(plan.Options, *best)
			slices.SortStableFunc(plan.Options, func(a, b JobOption) int {
				if a.GPUModel != b.GPUModel {
					return slices.Index(order, a.GPUModel) - slices.Index(order, b.GPUModel)
				}
				return a.GPUs - b.GPUs
			})
			i = slices.IndexFunc(plan.Options, func(o JobOption) bool { return o.GPUModel == best.GPUModel && o.GPUs == best.GPUs })
		}
		plan.Recommended = i
	}
	plan.Reason = jobReason(plan, r.DeadlineSeconds)
	return plan, nil
}

func betterJob(a, b JobOption) bool {
	switch {
	case a.Cost != b.Cost:
		return a.Cost < b.Cost
	case a.GPUs != b.GPUs:
		return a.GPUs < b.GPUs
	}
	return a.DurationSeconds < b.DurationSeconds
}

// throughput models n GPUs of a model from its benches.
func throughput(benches []Bench, n int, s Scaling) (float64, bool) {
	anchor := benches[0]
	for _, b := range benches {
		if b.GPUs == n {
			return b.SamplesPerSecond, true
		}
		if b.GPUs < n {
			anchor = b
		}
	}
	return anchor.SamplesPerSecond * s.speedup(n) / s.speedup(anchor.GPUs), false
}

func jobOption(r JobRequest, model string, n int, benches []Bench, perGPU float64, work int64) (JobOption, bool, error) {
	thr, measured := throughput(benches, n, r.Scaling)
	d := float64(work) / thr
	if near := math.Round(d); math.Abs(d-near) <= 1e-9*d {
		d = near
	}
	d = math.Ceil(d)
	if d > float64(MaxLength) || math.IsNaN(d) {
		return JobOption{}, false, nil
	}
	dur := max(1, int64(d))
	var best JobOption
	found := false
	for i := range r.Offers {
		o := &r.Offers[i]
		if o.GPUModel != model || o.GPUs < 1 {
			continue
		}
		prices, err := PricesFromOffer(o)
		if err != nil {
			return JobOption{}, false, err
		}
		if len(prices) == 0 {
			continue
		}
		machines := (n + o.GPUs - 1) / o.GPUs
		c, err := ChooseTerm(TermRequest{Length: dur, Count: machines, Prices: prices})
		if err != nil {
			return JobOption{}, false, err
		}
		opt := JobOption{
			GPUModel: model, GPUs: n, OfferID: o.ID, Machines: machines, GPUsRented: machines * o.GPUs,
			SamplesPerSecond: thr, Measured: measured, DurationSeconds: dur, MeetsDeadline: dur <= r.DeadlineSeconds,
			Term: c, Cost: c.Total,
		}
		paid, ok := mulInt(int64(opt.GPUsRented), c.PaidSeconds)
		if !ok {
			return JobOption{}, false, ErrOverflow
		}
		opt.PaidGPUSeconds, opt.BusyGPUSeconds = paid, int64(n)*dur
		opt.IdleShareBP = shareBP(paid-opt.BusyGPUSeconds, paid)
		opt.EfficiencyBP = int64(math.Round(thr / float64(n) / perGPU * bpOne))
		if !found || opt.Cost < best.Cost || opt.Cost == best.Cost && opt.PaidGPUSeconds < best.PaidGPUSeconds {
			best, found = opt, true
		}
	}
	return best, found, nil
}

// jobReason explains the recommendation: what it costs, why fewer GPUs
// will not do, and what more GPUs would cost and leave idle.
func jobReason(p JobPlan, deadline int64) string {
	if p.Recommended < 0 {
		fastest := p.Options[0]
		for _, o := range p.Options {
			if o.DurationSeconds < fastest.DurationSeconds {
				fastest = o
			}
		}
		return fmt.Sprintf("no option meets the %s deadline: the fastest shown, %d × %s, takes %s", FormatSpan(deadline), fastest.GPUs, fastest.GPUModel, FormatSpan(fastest.DurationSeconds))
	}
	rec := p.Options[p.Recommended]
	var b strings.Builder
	fmt.Fprintf(&b, "%d × %s on %s finishes in %s (deadline %s) for %s: %s", rec.GPUs, rec.GPUModel, rec.OfferID,
		FormatSpan(rec.DurationSeconds), FormatSpan(deadline), rec.Cost, rec.Term.Describe())
	if rec.Machines > 1 {
		fmt.Fprintf(&b, " on each of %d machines", rec.Machines)
	}
	fmt.Fprintf(&b, ", %s idle", pct(rec.IdleShareBP))
	var fewer, more *JobOption
	for i := range p.Options {
		o := &p.Options[i]
		if o.GPUModel != rec.GPUModel {
			continue
		}
		if o.GPUs < rec.GPUs {
			fewer = o
		}
		if o.GPUs > rec.GPUs && more == nil && o.GPUs >= 2*rec.GPUs {
			more = o
		}
	}
	if fewer != nil {
		if !fewer.MeetsDeadline {
			fmt.Fprintf(&b, "; %d GPUs would take %s, past the deadline", fewer.GPUs, FormatSpan(fewer.DurationSeconds))
		} else {
			fmt.Fprintf(&b, "; %d GPUs would also meet it but cost %s", fewer.GPUs, fewer.Cost)
		}
	}
	if more != nil {
		fmt.Fprintf(&b, "; %d GPUs would finish in %s but pay %s for %d GPUs × %s, %s of it idle", more.GPUs, FormatSpan(more.DurationSeconds),
			more.Cost, more.GPUsRented, FormatSpan(more.Term.PaidSeconds), pct(more.IdleShareBP))
		if d := more.Cost - rec.Cost; d > 0 {
			fmt.Fprintf(&b, " (+%s)", d)
		}
	}
	for _, o := range p.Options {
		if o.GPUModel != rec.GPUModel && o.MeetsDeadline {
			// The cheapest of each other model that meets the deadline.
			fmt.Fprintf(&b, "; the cheapest %s shown that meets it, %d GPUs, costs %s", o.GPUModel, o.GPUs, o.Cost)
			break
		}
	}
	return b.String()
}

// pct writes basis points as a percentage: 5000 → "50%", 4444 → "44.44%".
func pct(bp int64) string {
	s := core.Micros(bp * 10_000).String() // bp/100 percent
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}
