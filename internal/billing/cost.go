package billing

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ErrEndBeforeStart is returned for a span that ends before it starts.
var ErrEndBeforeStart = errors.New("billing: end before start")

// Span is the billed life of a lease: from Start (launch) to End (release,
// reclaim, or the instant the cost is asked for). Billing works in whole
// seconds: Start is truncated and End rounded up to the second.
type Span struct {
	Start time.Time
	End   time.Time
	// Reclaimed marks a spot lease the provider took back: it is charged
	// to the reclaim, without rounding the last period up or applying the
	// minimum charge, since the provider ended it.
	Reclaimed bool
}

// Bill is what a lease costs under its plan.
type Bill struct {
	// Used is the seconds the lease was held.
	Used int64
	// Billed is the seconds charged: used time rounded up to the
	// granularity, at least the minimum charge, at least the committed
	// term (or its early-termination rule).
	Billed int64
	// PaidUntil is Start+Billed: the next billing boundary. Keeping the
	// lease until then costs nothing more.
	PaidUntil time.Time
	// Usage is the charge for the billed time, Fee an early-termination
	// fee; Amount = Usage + Fee.
	Usage  core.Micros
	Fee    core.Micros
	Amount core.Micros
}

// normalize truncates the span to whole seconds.
func normalize(s Span) (Span, error) {
	s.Start = s.Start.Truncate(time.Second)
	if t := s.End.Truncate(time.Second); t.Before(s.End) {
		s.End = t.Add(time.Second)
	}
	if s.End.Before(s.Start) {
		return s, fmt.Errorf("%w: start %s, end %s", ErrEndBeforeStart, s.Start.Format(time.RFC3339), s.End.Format(time.RFC3339))
	}
	return s, nil
}

// billedSeconds applies granularity, minimum charge and committed terms to
// used seconds. It returns the billed seconds and any fee.
func billedSeconds(p *core.PricePlan, used int64, reclaimed bool) (int64, core.Micros) {
	g := p.Granularity
	ceil := func(n, g int64) int64 {
		if n <= 0 {
			return g // a started lease is charged at least one increment
		}
		return (n + g - 1) / g * g
	}
	if p.Term > 0 {
		switch {
		case used >= p.Term:
			// Past the term the lease continues at the plan's rate, one
			// granularity step at a time (a monthly term renews monthly).
			if used == p.Term {
				return p.Term, 0
			}
			return p.Term + ceil(used-p.Term, g), 0
		case p.EarlyTermination != nil:
			// Settling used time that rounds up to the whole term is not
			// leaving early: no fee.
			if settled := ceil(used, p.EarlyTermination.Granularity); settled < p.Term {
				return settled, p.EarlyTermination.Fee
			}
			return p.Term, 0
		default:
			return p.Term, 0
		}
	}
	if reclaimed {
		return used, 0
	}
	return max(ceil(used, g), p.MinCharge), 0
}

// Cost returns the bill of a lease held over s under plan p.
func Cost(p *core.PricePlan, s Span) (Bill, error) { return cost(newRater(p), s) }

// cost is Cost with the plan's rater r.
func cost(r rater, s Span) (Bill, error) {
	p := r.p
	s, err := normalize(s)
	if err != nil {
		return Bill{}, err
	}
	used := secondsBetween(s.Start, s.End)
	billed, fee := billedSeconds(p, used, s.Reclaimed)
	charge := func(billed int64) core.Micros {
		until := s.Start.Add(time.Duration(billed) * time.Second)
		return core.Micros(core.DivHalfEven(r.integral(s.Start, until), r.denominator(), false))
	}
	usage := charge(billed)
	if p.Term > 0 && billed < p.Term {
		// Leaving early never costs more than holding to the term: whoever
		// would pay more simply keeps the lease until it ends.
		if full := charge(p.Term); usage+fee >= full {
			billed, usage, fee = p.Term, full, 0
		}
	}
	until := s.Start.Add(time.Duration(billed) * time.Second)
	return Bill{Used: used, Billed: billed, PaidUntil: until, Usage: usage, Fee: fee, Amount: usage + fee}, nil
}

// PaidUntil returns the next billing boundary of a lease started at start,
// as of now: the end of the time already paid for. It is Cost's
// PaidUntil, without pricing the span unless leaving a committed term
// early makes the boundary depend on the price: the fleet asks it of
// every idle machine at every step.
func PaidUntil(p *core.PricePlan, start, now time.Time) (time.Time, error) {
	s, err := normalize(Span{Start: start, End: now})
	if err != nil {
		return time.Time{}, err
	}
	billed, _ := billedSeconds(p, secondsBetween(s.Start, s.End), false)
	if p.Term > 0 && billed < p.Term {
		b, err := Cost(p, s)
		return b.PaidUntil, err
	}
	return s.Start.Add(time.Duration(billed) * time.Second), nil
}

// Split divides a lease's bill among the consecutive intervals cut by
// cuts (for example calendar days or months), by when the billed time
// fell. The parts sum exactly to the bill: part i is the rounded
// cumulative cost up to cut i minus the rounded cumulative cost up to cut
// i-1. An early-termination fee falls in the interval containing the end.
// Cuts must be increasing; cuts outside the billed span yield zero parts.
func Split(p *core.PricePlan, s Span, cuts []time.Time) ([]core.Micros, Bill, error) {
	b, err := Cost(p, s)
	if err != nil {
		return nil, b, err
	}
	for i := 1; i < len(cuts); i++ {
		if !cuts[i].After(cuts[i-1]) {
			return nil, b, &core.FieldError{Field: fmt.Sprintf("cuts[%d]", i), Value: cuts[i].Format(time.RFC3339), Allowed: "increasing times"}
		}
	}
	s, _ = normalize(s)
	r := newRater(p)
	den := r.denominator()
	parts := make([]core.Micros, len(cuts)+1)
	var acc core.U128
	prevRounded := core.Micros(0)
	t := s.Start
	for i := 0; i <= len(cuts); i++ {
		upto := b.PaidUntil
		if i < len(cuts) && cuts[i].Before(upto) {
			upto = cuts[i]
		}
		if upto.After(t) {
			acc = acc.Add(r.integral(t, upto))
			t = upto
		}
		rounded := core.Micros(core.DivHalfEven(acc, den, false))
		parts[i] = rounded - prevRounded
		prevRounded = rounded
	}
	if b.Fee != 0 {
		parts[feeIndex(cuts, s.End)] += b.Fee
	}
	return parts, b, nil
}

func feeIndex(cuts []time.Time, end time.Time) int {
	for i, c := range cuts {
		if end.Before(c) {
			return i
		}
	}
	return len(cuts)
}

// CostIn returns the part of a lease's bill that falls in [from, to).
func CostIn(p *core.PricePlan, s Span, from, to time.Time) (core.Micros, error) {
	if to.Before(from) {
		return 0, fmt.Errorf("%w: interval from %s to %s", ErrEndBeforeStart, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if to.Equal(from) {
		_, err := Cost(p, s)
		return 0, err
	}
	parts, _, err := Split(p, s, []time.Time{from, to})
	if err != nil {
		return 0, err
	}
	return parts[1], nil
}
