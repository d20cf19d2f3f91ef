package ledger

import (
	"encoding/binary"
	"hash/fnv"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
)

// This file is the part of the month-to-date ledger that reads no store:
// the spend computed from leases and runs however they are kept, when a
// control loop reads it again (Refresh), and Book, the leases and runs
// of a loop that keeps them in memory (the simulator) as the store keeps
// them. The server's loop (internal/server, ledger.go) and the
// simulator's (internal/sim) both set engine.State.Spent, what the
// team budgets see, through these, so budgets act the same in both.

// MonthStart is the first instant (UTC) of now's calendar month: the
// month the budgets, the dashboard's overview and LoadMonth count from.
func MonthStart(now time.Time) time.Time {
	start, _ := billing.MonthBounds(now.UTC(), time.UTC)
	return start
}

// MonthSpent is each team's spend this calendar month (UTC) as of now
// computed from leases and runs: Spent of the usage report over [month
// start, now) as of now. leases may hold any leases (those not held this
// month count nothing) and runs any runs (a run counts on the lease it
// names, if listed). MonthToDate is this function of what Load reads
// from a store.
func MonthSpent(now time.Time, leases []billing.UsageLease, runs []billing.UsageRun) (map[string]core.Micros, error) {
	now = now.UTC()
	start := MonthStart(now)
	u, err := Over(billing.UsageInput{From: start, To: now, Now: now, Leases: leases, Runs: runs}, start)
	if err != nil {
		return nil, err
	}
	return Spent(u), nil
}

// RefreshEvery is how often, in the loop's clock, a control loop reads
// the teams' month-to-date spend again when its launched leases have not
// changed.
const RefreshEvery = time.Minute

// Refresh is the rule for when a control loop reads the month-to-date
// spend its budgets see. Reading it costs a pass over every lease held
// this month and the runs on them, so a loop does not do it every step:
// it reads on its first step, on the first step of a new month, when the
// launched leases changed since the last read (one was launched, or
// ended: a launch can incur a committed term or a first billing period at
// once), when its clock went back, and otherwise once RefreshEvery of its
// clock has passed since the last read. Staleness bound: between reads
// the budgets see the spend as of at most RefreshEvery (or one step, if
// steps are further apart) before now, short by at most what the already
// launched leases accrued meanwhile. The zero Refresh is due at once.
type Refresh struct {
	// month is the first instant of the month of the last read, at its
	// time (zero: none yet), and leases the launched leases' fingerprint
	// (LaunchedLeases) then.
	month, at time.Time
	leases    uint64
}

// Due reports whether the spend must be read at now, launched being
// LaunchedLeases of the loop's leases now.
func (r *Refresh) Due(now time.Time, launched uint64) bool {
	return r.at.IsZero() || !MonthStart(now).Equal(r.month) || launched != r.leases || now.Sub(r.at) >= RefreshEvery || now.Before(r.at)
}

// Month is the first instant of the month of the last read (zero:
// none).
func (r *Refresh) Month() time.Time { return r.month }

// At is when the last read was (zero: none).
func (r *Refresh) At() time.Time { return r.at }

// Read records a read at now, successful or not (a failed read is tried
// again on the rule's next occasion, not at the next step).
func (r *Refresh) Read(now time.Time, launched uint64) {
	r.month, r.at, r.leases = MonthStart(now), now, launched
}

// LaunchedLeases fingerprints the launched live leases among leases:
// their ids and launch times, in any order. It changes when a lease is
// launched or ends, not when one only becomes ready or drains. Leases in
// a final state are left out whether or not the loop still holds them:
// the server loads only the live ones.
func LaunchedLeases(leases []*engine.Lease) uint64 {
	var sum, n uint64
	var buf [8]byte
	for _, le := range leases {
		if le.Start.IsZero() || le.State.Final() {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(le.ID))
		binary.LittleEndian.PutUint64(buf[:], uint64(le.Start.UnixNano()))
		h.Write(buf[:])
		sum += h.Sum64()
		n++
	}
	return sum ^ n*0x9e3779b97f4a7c15
}

// UsageLeases is an engine lease as the ledger counts it (what Load
// makes of a stored lease): one billing.UsageLease per term. An engine
// lease's terms are plans of its offer (it renews on no other), so
// billing.Terms cannot refuse them; were one missing, its current term
// alone would be counted.
func UsageLeases(l *engine.Lease) []billing.UsageLease {
	terms, err := billing.Terms(l.Offer, &l.Lease, l.End, l.State == core.LeaseReclaimed)
	if err != nil {
		terms = []billing.TermSpan{{Plan: l.Plan, Span: billing.Span{Start: l.Start, End: l.End, Reclaimed: l.State == core.LeaseReclaimed}}}
	}
	out := make([]billing.UsageLease, len(terms))
	for i, t := range terms {
		out[i] = billing.UsageLease{ID: l.ID, Plan: t.Plan, GPUs: l.Offer.GPUs, SliceMilli: l.Offer.SliceMilli, Start: t.Span.Start, End: t.Span.End,
			Reclaimed: t.Span.Reclaimed}
	}
	return out
}

// Book is the month's leases and runs of a loop that keeps its state in
// memory and drops what ended (the simulator, whose engine state is
// pruned), kept as the store keeps them for the server's ledger: every
// lease, and every run of a unit on its leases, a run ending when a
// running (or checkpointing) unit stops running, or starts again (a
// move, a restart from a checkpoint), at its new start, its end, or the
// time it went back to the queue (the store's job_units_run_ended
// trigger). A Book sees the units' runs by Observe, each time the loop
// would have saved its state (after every step), and Ended.
//
// Spent is MonthSpent of those leases and runs. A lease that has ended
// and has no run still open on it adds the same to the month's spend at
// every later instant of the month (the usage report adds up lease by
// lease, team by team), so the book settles it once: its share is kept
// as a sum and the lease and its runs are dropped. Each Spent then costs
// the leases still held and those with a run still open.
type Book struct {
	// ended are the leases the loop dropped that are not settled yet;
	// runs the closed runs by lease, open the runs in progress.
	ended []billing.UsageLease
	runs  map[string][]billing.UsageRun
	open  map[*engine.Unit]openRun
	// settled is the month's spend of the settled leases, month the
	// month it is of.
	settled map[string]core.Micros
	month   time.Time
}

// openRun is a unit's run in progress as last observed.
type openRun struct {
	start time.Time
	parts []engine.Assigned
}

// running reports whether u holds GPUs as a stored unit's run counts it.
func running(u *engine.Unit) bool {
	return (u.State == core.JobRunning || u.State == core.JobCheckpointing) && !u.Start.IsZero() && len(u.Parts) > 0
}

// Observe records the runs of units that ended since the last Observe
// and the runs that began.
func (b *Book) Observe(units []*engine.Unit) {
	if b.open == nil {
		b.open = map[*engine.Unit]openRun{}
	}
	for _, u := range units {
		o, was := b.open[u]
		on := running(u)
		if was && on && o.start.Equal(u.Start) {
			continue
		}
		if was {
			b.close(u, o)
		}
		if on {
			b.open[u] = openRun{start: u.Start, parts: append([]engine.Assigned(nil), u.Parts...)}
		}
	}
}

// Ended records what the loop drops: a unit (its run, if one was open,
// ends as Observe would end it) or a lease (nil for none).
func (b *Book) Ended(u *engine.Unit, l *engine.Lease) {
	if u != nil {
		if o, was := b.open[u]; was {
			b.close(u, o)
		}
	}
	if l != nil && !l.Start.IsZero() {
		b.ended = append(b.ended, UsageLeases(l)...)
	}
}

// close ends u's open run o as u now stands.
func (b *Book) close(u *engine.Unit, o openRun) {
	delete(b.open, u)
	end := u.Start
	if !running(u) {
		end = u.End
		if end.IsZero() {
			end = u.Since
		}
	}
	if !end.After(o.start) {
		return
	}
	if b.runs == nil {
		b.runs = map[string][]billing.UsageRun{}
	}
	for _, p := range o.parts {
		b.runs[p.LeaseID] = append(b.runs[p.LeaseID], billing.UsageRun{Team: u.Job.Team, LeaseID: p.LeaseID, GPUs: p.GPUs,
			MilliPerGPU: u.Job.Request.MilliPerGPU, From: o.start, To: end})
	}
}

// Spent is each team's spend this calendar month as of now: MonthSpent
// of the book's leases and runs and live, the loop's leases still held.
func (b *Book) Spent(now time.Time, live []*engine.Lease) (map[string]core.Micros, error) {
	if month := MonthStart(now); !month.Equal(b.month) || b.settled == nil {
		// What was settled ended last month: it adds nothing to this one.
		b.month, b.settled = month, map[string]core.Micros{}
	}
	openOn := map[string]bool{}
	for _, o := range b.open {
		for _, p := range o.parts {
			openOn[p.LeaseID] = true
		}
	}
	var leases []billing.UsageLease
	var runs []billing.UsageRun
	kept := b.ended[:0]
	for i := 0; i < len(b.ended); {
		// A lease's terms come one after the other (UsageLeases).
		id := b.ended[i].ID
		j := i + 1
		for j < len(b.ended) && b.ended[j].ID == id {
			j++
		}
		terms := b.ended[i:j]
		i = j
		if openOn[id] {
			kept = append(kept, terms...)
			leases = append(leases, terms...)
			runs = append(runs, b.runs[id]...)
			continue
		}
		spent, err := MonthSpent(now, terms, b.runs[id])
		if err != nil {
			return nil, err
		}
		for t, m := range spent {
			b.settled[t] += m
		}
		delete(b.runs, id)
	}
	clear(b.ended[len(kept):])
	b.ended = kept
	for _, l := range live {
		if !l.Start.IsZero() {
			leases = append(leases, UsageLeases(l)...)
			runs = append(runs, b.runs[l.ID]...)
		}
	}
	for u, o := range b.open {
		for _, p := range o.parts {
			runs = append(runs, billing.UsageRun{Team: u.Job.Team, LeaseID: p.LeaseID, GPUs: p.GPUs, MilliPerGPU: u.Job.Request.MilliPerGPU, From: o.start})
		}
	}
	out, err := MonthSpent(now, leases, runs)
	if err != nil {
		return nil, err
	}
	for t, m := range b.settled {
		out[t] += m
	}
	return out, nil
}
