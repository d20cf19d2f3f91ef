package engine

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// renewWindow is how long after a committed machine's boundary the term
// it renewed on may still be chosen: the first step after the boundary
// chooses it (a server ticks well within it; a replay steps just after
// every boundary, Decisions.Boundary). A loop that was down longer keeps
// the term the machine held, as before the rule.
const renewWindow = 30 * time.Minute

// renewals are the committed machines that passed a billing boundary
// past the end of their term within renewWindow, and so renewed, for which
// another of their offer's terms costs less than the one they hold for
// the work that cannot leave them (fleet.RenewalTerm): running units
// that are not interruptible, to their estimated ends. A machine whose
// long work ends renews on its shortest term again; one whose core work
// runs on for weeks renews on a week. Also the next boundary of a
// committed machine with work on it, after now.
func renewals(v *view, alloc []core.Milli, now time.Time) ([]fleet.Renewal, time.Time) {
	var out []fleet.Renewal
	var next time.Time
	var busy []time.Time // by node, built when first needed
	for n, l := range v.leaseOf {
		if !v.nodes[n].Committed {
			continue
		}
		if now.Before(l.renewNext) {
			// No boundary passed since the last look (most steps).
			if alloc[n] > 0 && (next.IsZero() || l.renewNext.Before(next)) {
				next = l.renewNext
			}
			continue
		}
		paid, err := l.paidNow.PaidUntil(l.Plan, l.Start, now)
		if err != nil {
			continue
		}
		l.renewNext = paid
		if alloc[n] > 0 && paid.After(now) && (next.IsZero() || paid.Before(next)) {
			next = paid // an idle machine's steps come with its release (fleet.Releases)
		}
		// A renewal is a boundary at or after the end of the term, passed
		// just now (the first look since); a machine that emptied since
		// renews on the shortest.
		at := paid.Add(-time.Duration(l.Plan.Granularity) * time.Second)
		if at.Before(l.Start.Add(time.Duration(l.Plan.Term)*time.Second)) || now.Sub(at) > renewWindow {
			continue
		}
		if busy == nil {
			busy = make([]time.Time, len(v.nodes))
			for _, a := range v.running {
				if a.Job.Interruptible {
					continue // it can move, or be preempted
				}
				end, ok := a.EstEnd()
				if !ok {
					continue
				}
				for _, pt := range a.Parts {
					if end.After(busy[pt.Node]) {
						busy[pt.Node] = end
					}
				}
			}
		}
		p, cost, ok := fleet.RenewalTerm(l.Offer, at, busy[n])
		if !ok || p.Mode == l.Plan.Mode {
			continue
		}
		out = append(out, fleet.Renewal{LeaseID: l.ID, At: at, Mode: p.Mode, Reason: fleet.RenewalReason(p, cost, at, busy[n])})
	}
	return out, next
}

// renew puts lease l on the plan r names from r.At, a boundary of the
// plan it held: what it held until then becomes an earlier term, billed
// whole (core.Lease.Earlier).
func renew(l *Lease, r fleet.Renewal) {
	p, ok := l.Offer.Plan(r.Mode)
	if !ok || !r.At.After(l.Start) {
		return
	}
	l.Earlier = append(l.Earlier, core.Term{Mode: l.Mode, Start: l.Start})
	l.Mode, l.Plan, l.Start = r.Mode, p, r.At
	l.CommittedEnd = r.At.Add(time.Duration(p.Term) * time.Second)
	l.renewNext = time.Time{} // its boundaries are the new term's
}
