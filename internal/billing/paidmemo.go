package billing

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PaidMemo remembers one PaidUntil answer for a lease and answers again
// without pricing anything while it still holds. The fleet asks for the
// paid boundary of every machine at every step, each time at a later
// instant, and the answer only changes when a boundary is passed:
// PaidUntil(p, start, t) is the same boundary b for every t from an
// instant t0 that gave b up to b itself (the billed seconds are the used
// seconds rounded up, and rounding up any used time in [used(t0), billed]
// gives the same billed time; leaving a term early never becomes cheaper
// as the time used grows). The zero value is empty.
//
// A plan must not change while memos of it are kept: the memo knows a plan
// by its pointer.
type PaidMemo struct {
	plan      *core.PricePlan
	start     time.Time
	from, end time.Time
	ok        bool
}

// PaidUntil is billing.PaidUntil(p, start, now), from the memo when now
// lies between the instant the memo was made for and the boundary it
// found.
func (m *PaidMemo) PaidUntil(p *core.PricePlan, start, now time.Time) (time.Time, error) {
	if m.ok && m.plan == p && m.start == start && !now.Before(m.from) && !now.After(m.end) {
		return m.end, nil
	}
	b, err := PaidUntil(p, start, now)
	if err != nil {
		m.ok = false
		return b, err
	}
	*m = PaidMemo{plan: p, start: start, from: now, end: b, ok: true}
	return b, nil
}
