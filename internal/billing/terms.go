package billing

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TermSpan is one term of a lease with its plan and span.
type TermSpan struct {
	Plan *core.PricePlan
	Span Span
}

// Terms are lease l's terms on offer o, oldest first, each with its
// plan and span: the earlier ones (core.Lease.Earlier) from each start
// to the next, the current one from l.Start to end (reclaimed: the
// provider took it back at end).
func Terms(o *core.Offer, l *core.Lease, end time.Time, reclaimed bool) ([]TermSpan, error) {
	out := make([]TermSpan, 0, len(l.Earlier)+1)
	for i, t := range l.Earlier {
		next := l.Start
		if i+1 < len(l.Earlier) {
			next = l.Earlier[i+1].Start
		}
		p, ok := o.Plan(t.Mode)
		if !ok {
			return nil, &core.FieldError{Field: fmt.Sprintf("earlier[%d].mode", i), Value: string(t.Mode), Allowed: fmt.Sprintf("a mode offer %s is rented in (%v)", o.ID, o.Modes())}
		}
		out = append(out, TermSpan{Plan: p, Span: Span{Start: t.Start, End: next}})
	}
	p, ok := o.Plan(l.Mode)
	if !ok {
		return nil, &core.FieldError{Field: "mode", Value: string(l.Mode), Allowed: fmt.Sprintf("a mode offer %s is rented in (%v)", o.ID, o.Modes())}
	}
	return append(out, TermSpan{Plan: p, Span: Span{Start: l.Start, End: end, Reclaimed: reclaimed}}), nil
}

// LeaseBills are lease l's terms on offer o held until end (Terms) and
// the bill of each, billed whole on its own plan.
func LeaseBills(o *core.Offer, l *core.Lease, end time.Time, reclaimed bool) ([]TermSpan, []Bill, error) {
	ts, err := Terms(o, l, end, reclaimed)
	if err != nil {
		return nil, nil, err
	}
	bills := make([]Bill, len(ts))
	for i, t := range ts {
		if bills[i], err = Cost(t.Plan, t.Span); err != nil {
			return nil, nil, err
		}
	}
	return ts, bills, nil
}

// LeaseCost is the bill of lease l on offer o held until end: the sum of
// its terms' bills (LeaseBills). Used and Billed add up; PaidUntil is the
// current term's.
func LeaseCost(o *core.Offer, l *core.Lease, end time.Time, reclaimed bool) (Bill, error) {
	_, bills, err := LeaseBills(o, l, end, reclaimed)
	var sum Bill
	for _, b := range bills {
		sum = sum.Then(b)
	}
	return sum, err
}

// Then is the bill of b's term followed by c's: amounts and times add
// up, and the boundary is c's.
func (b Bill) Then(c Bill) Bill {
	return Bill{Used: b.Used + c.Used, Billed: b.Billed + c.Billed, PaidUntil: c.PaidUntil,
		Usage: b.Usage + c.Usage, Fee: b.Fee + c.Fee, Amount: b.Amount + c.Amount}
}
