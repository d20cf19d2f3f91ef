package audit

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
)

// leaseInfo is a lease priced: its offer, plan, span, bill and the bill's
// part in each period.
type leaseInfo struct {
	Lease
	offer *core.Offer
	plan  *core.PricePlan
	span  billing.Span
	bill  billing.Bill
	parts []core.Micros // parts[i] is period i's
	// minMult and maxMult are the lowest and highest time-of-use
	// multipliers of the plan over the week (10000 without windows).
	minMult, maxMult int64
}

type runInfo struct {
	Run
	idx   int
	job   *core.Job
	lease *leaseInfo
	to    time.Time
}

type gpuKey struct {
	lease string
	gpu   int
}

// Audit audits in: the periods of [in.From, in.To), their lines, jobs and recommendations.
func Audit(in Input) (Report, error) {
	in.Config = in.Config.Defaults()
	if err := in.validate(); err != nil {
		return Report{}, err
	}
	if in.Location == nil {
		in.Location = time.UTC
	}
	now := in.Now
	if now.IsZero() {
		now = in.To
	}
	windows := Periods(in.From, in.To, in.Location, in.Period)
	a := &auditor{in: in, cfg: in.Config, now: now, windows: windows}
	if err := a.index(); err != nil {
		return Report{}, err
	}
	rep := Report{From: in.From.UTC(), To: in.To.UTC(), Location: in.Location.String(), Period: in.Period, Team: in.Team,
		Currency: in.Currency, Config: in.Config}
	for i := range windows {
		pr, err := a.period(i)
		if err != nil {
			return Report{}, fmt.Errorf("audit %s: %w", windows[i].Label, err)
		}
		rep.Periods = append(rep.Periods, pr)
		rep.Total.Add(pr.Summary)
		rep.Recommendations = append(rep.Recommendations, pr.Recommendations...)
		rep.Saving += pr.Saving
	}
	sortRecs(rep.Recommendations)
	if rep.Recommendations == nil {
		rep.Recommendations = []Recommendation{}
	}
	return rep, nil
}

func sortRecs(rs []Recommendation) {
	slices.SortStableFunc(rs, func(x, y Recommendation) int {
		if c := cmp.Compare(y.Saving, x.Saving); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
}

type auditor struct {
	in      Input
	cfg     Config
	now     time.Time
	windows []Window
	offers  map[string]*core.Offer
	leases  map[string]*leaseInfo
	order   []*leaseInfo // by id
	jobs    map[string]*core.Job
	runs    []*runInfo
	samples map[gpuKey][]core.Sample
	rates   map[string]modelRate
}

// modelRate is a GPU model's cheapest on-demand price per GPU-hour in the
// catalog, and that offer's memory.
type modelRate struct {
	model   string
	perHour core.Micros
	memMiB  int64
	offerID string
}

func (a *auditor) index() error {
	in := a.in
	a.offers = map[string]*core.Offer{}
	a.rates = map[string]modelRate{}
	for i := range in.Offers {
		o := &in.Offers[i]
		a.offers[o.ID] = o
		if o.GPUs < 1 || o.GPUModel == "" {
			continue
		}
		if p, ok := o.Plan(core.OnDemand); ok && p.Per.Seconds() > 0 {
			// Per whole GPU-hour: a quarter-GPU slice's price times four.
			rate := core.Micros(core.MulDivHalfEven(int64(p.Price), core.Hour.Seconds()*int64(core.WholeGPU), p.Per.Seconds()*int64(o.CapMilli())))
			cur, seen := a.rates[o.GPUModel]
			if !seen || rate < cur.perHour || rate == cur.perHour && o.ID < cur.offerID {
				a.rates[o.GPUModel] = modelRate{model: o.GPUModel, perHour: rate, memMiB: o.GPUMemMiB, offerID: o.ID}
			}
		}
	}
	cuts := make([]time.Time, 0, len(a.windows)+1)
	for _, w := range a.windows {
		cuts = append(cuts, w.From)
	}
	cuts = append(cuts, a.windows[len(a.windows)-1].To)
	a.leases = map[string]*leaseInfo{}
	for i, l := range in.Leases {
		f := fmt.Sprintf("leases[%d]", i)
		if l.ID == "" {
			return &core.FieldError{Field: f + ".id", Value: "", Allowed: "a lease id"}
		}
		if a.leases[l.ID] != nil {
			return &core.FieldError{Field: f + ".id", Value: l.ID, Allowed: "an id not used by another lease"}
		}
		o := a.offers[l.OfferID]
		if o == nil {
			return &core.FieldError{Field: f + ".offer", Value: l.OfferID, Allowed: "an offer of the catalog"}
		}
		p, ok := o.Plan(l.Mode)
		if !ok {
			return &core.FieldError{Field: f + ".mode", Value: string(l.Mode), Allowed: fmt.Sprintf("a mode offer %s is rented in (%v)", o.ID, o.Modes())}
		}
		end := l.End
		if end.IsZero() {
			end = a.now
		}
		if end.Before(l.Start) {
			end = l.Start
		}
		cl := core.Lease{ID: l.ID, OfferID: l.OfferID, Mode: l.Mode, Start: l.Start, Earlier: l.Earlier}
		terms, err := billing.Terms(o, &cl, end, l.Reclaimed)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", f, l.ID, err)
		}
		li := &leaseInfo{Lease: l, offer: o, plan: p, span: billing.Span{Start: cl.FirstStart(), End: end, Reclaimed: l.Reclaimed}}
		li.minMult, li.maxMult = p.TimeOfUse.WeekRangeBP()
		// Each term is billed whole on its own plan; their parts add up.
		for _, t := range terms {
			parts, bill, err := billing.Split(t.Plan, t.Span, cuts)
			if err != nil {
				return fmt.Errorf("%s (%s): %w", f, l.ID, err)
			}
			if li.parts == nil {
				li.parts = make([]core.Micros, len(parts)-2)
			}
			for i, x := range parts[1 : len(parts)-1] {
				li.parts[i] += x
			}
			li.bill = li.bill.Then(bill)
		}
		a.leases[l.ID] = li
		a.order = append(a.order, li)
	}
	slices.SortFunc(a.order, func(x, y *leaseInfo) int { return cmp.Compare(x.ID, y.ID) })
	a.jobs = map[string]*core.Job{}
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if a.jobs[j.ID] != nil {
			return &core.FieldError{Field: fmt.Sprintf("jobs[%d].id", i), Value: j.ID, Allowed: "an id not used by another job"}
		}
		a.jobs[j.ID] = j
	}
	for i, r := range in.Runs {
		f := fmt.Sprintf("runs[%d]", i)
		j := a.jobs[r.JobID]
		if j == nil {
			return &core.FieldError{Field: f + ".job", Value: r.JobID, Allowed: "a job of the input"}
		}
		li := a.leases[r.LeaseID]
		if li == nil {
			return &core.FieldError{Field: f + ".lease", Value: r.LeaseID, Allowed: "a lease of the input"}
		}
		if r.Milli < 1 || r.Milli > core.WholeGPU {
			return &core.FieldError{Field: f + ".milli", Value: fmt.Sprint(r.Milli), Allowed: "1..1000 milli-GPUs"}
		}
		if len(r.GPUs) == 0 {
			return &core.FieldError{Field: f + ".gpus", Value: "", Allowed: "at least one GPU index"}
		}
		for _, g := range r.GPUs {
			if g < 0 || g >= li.offer.GPUs {
				return &core.FieldError{Field: f + ".gpus", Value: fmt.Sprint(r.GPUs), Allowed: fmt.Sprintf("GPU indexes 0..%d of lease %s", li.offer.GPUs-1, li.ID)}
			}
		}
		to := r.To
		if to.IsZero() {
			to = a.now
		}
		if to.Before(r.From) {
			return &core.FieldError{Field: f + ".to", Value: r.To.Format(time.RFC3339), Allowed: "a time not before from " + r.From.Format(time.RFC3339)}
		}
		if r.Unit == "" {
			r.Unit = r.JobID
		}
		a.runs = append(a.runs, &runInfo{Run: r, idx: i, job: j, lease: li, to: to})
	}
	a.samples = map[gpuKey][]core.Sample{}
	for _, s := range in.Samples {
		k := gpuKey{s.LeaseID, s.GPU}
		a.samples[k] = append(a.samples[k], s)
	}
	for _, ss := range a.samples {
		slices.SortStableFunc(ss, func(x, y core.Sample) int { return x.At.Compare(y.At) })
	}
	return nil
}

// segment is a stretch of time at one price and multiplier.
type segment struct {
	seconds int64
	price   core.Micros
	mult    int64
}

// segments cuts [a, b) where the plan's price or time-of-use multiplier
// may change: at spot series points and, with windows, at local hours.
func segments(p *core.PricePlan, a, b time.Time) []segment {
	a, b = a.Truncate(time.Second), b.Truncate(time.Second)
	var out []segment
	tou := p.TimeOfUse
	hasTOU := tou != nil && tou.Location != nil && len(tou.Windows) > 0
	for t := a; t.Before(b); {
		end := b
		price := p.Price
		for k, pt := range p.Series {
			if !pt.At.After(t) {
				price = pt.Price
			} else {
				end = minT(end, p.Series[k].At)
				break
			}
		}
		mult := int64(10000)
		if hasTOU {
			lt := t.In(tou.Location)
			next := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), 0, 0, 0, tou.Location).Add(time.Hour)
			if !next.After(t) {
				next = t.Add(time.Hour)
			}
			end = minT(end, next)
			mult = tou.MultiplierAt(t)
		}
		out = append(out, segment{seconds: end.Unix() - t.Unix(), price: price, mult: mult})
		t = end
	}
	return out
}

// weight is Σ price × multiplier × seconds over [a, b): what the billing
// engine's allocation weighs a use by.
func weight(p *core.PricePlan, a, b time.Time) *big.Int {
	w := new(big.Int)
	for _, s := range segments(p, a, b) {
		x := new(big.Int).Mul(big.NewInt(int64(s.price)), big.NewInt(s.mult))
		w.Add(w, x.Mul(x, big.NewInt(s.seconds)))
	}
	return w
}

// offPeakWeight is Σ price × (multiplier − floor) × seconds and the
// seconds with a multiplier above floor, over [a, b).
func offPeakWeight(p *core.PricePlan, a, b time.Time, floor int64) (*big.Int, int64) {
	w := new(big.Int)
	var peakSec int64
	for _, s := range segments(p, a, b) {
		if s.mult <= floor {
			continue
		}
		x := new(big.Int).Mul(big.NewInt(int64(s.price)), big.NewInt(s.mult-floor))
		w.Add(w, x.Mul(x, big.NewInt(s.seconds)))
		peakSec += s.seconds
	}
	return w, peakSec
}

func minT(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// largestRemainder splits total in proportion to weights (summing to sum)
// into integers that add up to total exactly; ties go to the earlier
// weight.
func largestRemainder(total core.Micros, weights []*big.Int, sum *big.Int) []core.Micros {
	out := make([]core.Micros, len(weights))
	if sum.Sign() == 0 {
		out[len(out)-1] = total
		return out
	}
	neg := total < 0
	t := big.NewInt(int64(total))
	if neg {
		t.Neg(t)
	}
	rems := make([]*big.Int, len(weights))
	var given int64
	for i, w := range weights {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(t, w), sum, new(big.Int))
		out[i] = core.Micros(q.Int64())
		rems[i] = r
		given += q.Int64()
	}
	order := make([]int, len(weights))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool { return rems[order[x]].Cmp(rems[order[y]]) > 0 })
	for k := int64(0); k < t.Int64()-given; k++ {
		out[order[k%int64(len(order))]]++
	}
	if neg {
		for i := range out {
			out[i] = -out[i]
		}
	}
	return out
}

// mulDivBig returns x × num / den rounded half to even (den > 0).
func mulDivBig(x core.Micros, num, den *big.Int) core.Micros {
	n := new(big.Int).Mul(big.NewInt(int64(x)), num)
	q, r := new(big.Int).QuoRem(n, den, new(big.Int))
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	switch c := r2.Cmp(den); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		if n.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return core.Micros(q.Int64())
}
