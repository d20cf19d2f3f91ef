package fleet

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Renewal is a decision that a committed machine, kept past a billing
// boundary At, renews there on its offer's plan Mode rather than on the
// one it held.
type Renewal struct {
	LeaseID string
	At      time.Time
	Mode    core.BillingMode
	Reason  string
}

// RenewalTerm is the committed plan of offer o a machine renewed at
// boundary at should hold from there, given that the work which cannot
// leave it (not interruptible, with an estimate) keeps it until busy:
// the plan under which that known need costs least, a term longer than
// the need paid whole and the rest of the need renewed on the shortest
// term. The need is a floor — the machine may be used longer — so a long
// term is chosen only where it costs no more than the short ones would
// for the work already known to hold the machine: a bet on nothing but
// the estimates. Ties go to the shorter term; a machine nothing holds
// past the boundary renews on the cheapest single term, the shortest on
// any price book where a longer term costs more. ok false: no committed
// plan could be priced.
func RenewalTerm(o *core.Offer, at, busy time.Time) (p *core.PricePlan, cost core.Micros, ok bool) {
	short := o.ShortestCommitted()
	if short == nil {
		return nil, 0, false
	}
	shortBill, ok := TermBill(at, short)
	if !ok {
		return nil, 0, false
	}
	need := max(busy.Sub(at), 0)
	// periods is how many short terms cover d (at least one: the
	// machine has renewed).
	periods := func(d time.Duration) int64 {
		t := time.Duration(short.Term) * time.Second
		return max(int64((d+t-1)/t), 1)
	}
	p, cost = short, shortBill*core.Micros(periods(need))
	for i := range o.Plans {
		q := &o.Plans[i]
		if !q.Committed() || q.Term <= short.Term {
			continue
		}
		bill, ok := TermBill(at, q)
		if !ok {
			continue
		}
		c := bill
		if rest := need - time.Duration(q.Term)*time.Second; rest > 0 {
			c += shortBill * core.Micros(periods(rest))
		}
		if c < cost || c == cost && q.Term < p.Term {
			p, cost = q, c
		}
	}
	return p, cost, true
}

// RenewalReason says why a machine renews on p at at.
func RenewalReason(p *core.PricePlan, cost core.Micros, at, busy time.Time) string {
	if !busy.After(at) {
		return fmt.Sprintf("renewed at %s on %s: no work that cannot move holds it past the boundary", at.UTC().Format(time.RFC3339), p.Mode)
	}
	return fmt.Sprintf("renewed at %s on %s: work that cannot move holds it until %s, %s on %s (the least for that need)", at.UTC().Format(time.RFC3339), p.Mode, busy.UTC().Format(time.RFC3339), cost, p.Mode)
}
