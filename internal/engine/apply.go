package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// index maps ids to the state's leases and units for one call.
type index struct {
	leases map[string]*Lease
	units  map[string]*Unit
	// on lists the running units per lease.
	on map[string][]*Unit
}

func newIndex(st *State) *index {
	ix := &index{leases: make(map[string]*Lease, len(st.Leases)), units: make(map[string]*Unit, len(st.Units)), on: map[string][]*Unit{}}
	for _, l := range st.Leases {
		ix.leases[l.ID] = l
	}
	for _, u := range st.Units {
		ix.units[u.Key()] = u
		if u.State == core.JobRunning || u.State == core.JobCheckpointing {
			for _, p := range u.Parts {
				ix.on[p.LeaseID] = append(ix.on[p.LeaseID], u)
			}
		}
	}
	return ix
}

// indexFor is newIndex restricted to what d refers to: the units it
// names and the running units of the leases it releases, found in one
// pass over the units (none when d names no unit and releases nothing),
// so that applying a step costs what the step decided, not the size of
// the state. Lookups of anything else find nothing, as they would not be
// made.
func indexFor(st *State, d *Decisions) *index {
	st.stampLeases()
	ix := &index{leases: st.leaseIndex()}
	n := len(d.Preempt) + len(d.Move) + len(d.Place) + len(d.Defer) + len(d.Alerts)
	if n == 0 && len(d.Release) == 0 {
		return ix
	}
	ix.units = make(map[string]*Unit, n)
	// The units Step found for its decisions are taken once checked (still
	// one of st.Units, under the key the decision names); the others are
	// searched for.
	gen := st.stampUnits()
	var want map[string]bool
	carry := func(key string, units []*Unit, i int) {
		if i < len(units) {
			if u := units[i]; u != nil && u.gen == gen && u.hasKey(key) {
				ix.units[key] = u
				return
			}
		}
		if want == nil {
			want = make(map[string]bool, n)
		}
		want[key] = true
	}
	for i, p := range d.Preempt {
		carry(p.Unit, d.preemptUnits, i)
	}
	for i, m := range d.Move {
		carry(m.Unit, d.moveUnits, i)
	}
	for i, p := range d.Place {
		carry(p.Unit, d.placeUnits, i)
	}
	for i, df := range d.Defer {
		carry(df.Unit.Key(), d.deferUnits, i)
	}
	for _, a := range d.Alerts {
		carry(a.Unit, nil, 0)
	}
	var released map[string]bool
	if len(d.Release) > 0 {
		released = make(map[string]bool, len(d.Release))
		for _, r := range d.Release {
			released[r.LeaseID] = true
		}
		ix.on = map[string][]*Unit{}
	}
	if want == nil && released == nil {
		return ix
	}
	for _, u := range st.Units {
		if want != nil {
			if k := u.Key(); want[k] {
				ix.units[k] = u
			}
		}
		if released != nil && (u.State == core.JobRunning || u.State == core.JobCheckpointing) {
			for _, p := range u.Parts {
				if released[p.LeaseID] {
					ix.on[p.LeaseID] = append(ix.on[p.LeaseID], u)
				}
			}
		}
	}
	return ix
}

// checkpointAt is the unit's last checkpoint as of now: with a checkpoint
// interval, the last multiple of it since the run started; without, the
// last recorded one.
func (u *Unit) checkpointAt(now time.Time) time.Time {
	ci := u.Job.CheckpointInterval
	last := u.LastCheckpoint
	if ci > 0 && now.After(u.Start) {
		if c := u.Start.Add(now.Sub(u.Start) / ci * ci); c.After(last) {
			last = c
		}
	}
	if last.Before(u.Start) {
		last = u.Start
	}
	return last
}

// RunsOn reports whether the unit has a part on the lease.
func (u *Unit) RunsOn(lease string) bool {
	for _, p := range u.Parts {
		if p.LeaseID == lease {
			return true
		}
	}
	return false
}

// stop ends a unit's run at now: the work up to its last checkpoint is
// kept, the rest is lost and counted.
func (u *Unit) stop(now time.Time, state core.JobState) {
	ck := u.checkpointAt(now)
	u.Done += ck.Sub(u.Start)
	u.LostMilliSeconds += int64(u.Milli()) * int64(now.Sub(ck)/time.Second)
	u.State, u.Parts, u.Since = state, nil, now
}

// Apply performs d on st as the actuator does once its provider calls
// succeed: units start, stop and wait; leases are requested and released.
// First it records the recent demand and the fair-share history up to
// d.Now (State.Demand, State.History: history.go).
// It returns the leases it created for the acquisitions, in state
// requested, for the caller to ask the provider for.
func Apply(st *State, d Decisions) []*Lease {
	now := d.Now
	recordDemand(st, now, d.DemandMilli)
	recorded := recordHistory(st, now, d.HalfLife)
	ix := indexFor(st, &d)
	// Every change to a unit goes through st.leave before and st.enter
	// after, which keep the live view (view.go).
	for _, p := range d.Preempt {
		if u := ix.units[p.Unit]; u != nil && u.State == core.JobRunning {
			st.leave(u)
			u.stop(now, core.JobPreempted)
			u.Preemptions++
			st.enter(u, ix.leases)
		}
	}
	for _, m := range d.Move {
		if u := ix.units[m.Unit]; u != nil && u.State == core.JobRunning {
			// A move checkpoints first: nothing is lost but the overhead.
			st.leave(u)
			u.Done += now.Sub(u.Start)
			u.State, u.Parts, u.Start, u.LastCheckpoint = core.JobRunning, m.Parts, now, now
			st.enter(u, ix.leases)
		}
	}
	for _, p := range d.Place {
		u := ix.units[p.Unit]
		if u == nil {
			continue
		}
		st.leave(u)
		u.State, u.Parts, u.Start, u.LastCheckpoint, u.DeferredUntil = core.JobRunning, p.Parts, now, now, time.Time{}
		st.enter(u, ix.leases)
		for _, part := range p.Parts {
			if l := ix.leases[part.LeaseID]; l != nil {
				l.IdleSince = time.Time{}
			}
		}
	}
	for _, df := range d.Defer {
		if u := ix.units[df.Unit.Key()]; u != nil {
			u.DeferredUntil = df.Until
		}
	}
	for _, r := range d.Release {
		l := ix.leases[r.LeaseID]
		if l == nil || l.State.Final() {
			continue
		}
		for _, u := range ix.on[l.ID] {
			if (u.State == core.JobRunning || u.State == core.JobCheckpointing) && u.RunsOn(l.ID) {
				st.leave(u)
				u.stop(now, core.JobPending) // moved units no longer run here
				st.enter(u, ix.leases)
			}
		}
		l.State, l.End = core.LeaseReleased, now
		st.freed(l)
		st.ended()
	}
	for _, r := range d.Renew {
		if l := ix.leases[r.LeaseID]; l != nil && !l.State.Final() {
			renew(l, r)
		}
	}
	var created []*Lease
	for _, a := range d.Acquire {
		p, ok := a.Offer.Plan(a.Mode)
		if !ok {
			continue
		}
		st.NextID++
		prefix := "L"
		if a.Joined {
			prefix = JoinedPrefix
		}
		l := &Lease{Lease: core.Lease{ID: fmt.Sprintf("%s%d", prefix, st.NextID), OfferID: a.Offer.ID, Mode: a.Mode, State: core.LeaseRequested}, Offer: a.Offer, Plan: p, node: -1}
		l.ClientToken, l.For = l.ID, a.For
		st.Leases = append(st.Leases, l)
		created = append(created, l)
	}
	for _, c := range d.Cleared {
		if c.Kind == "budget" {
			for k := range st.BudgetAlerted {
				if team, m, _ := strings.Cut(k, "@"); team == c.Team && m != BudgetMonth(now) {
					delete(st.BudgetAlerted, k)
				}
			}
		}
	}
	for _, a := range d.Alerts {
		switch {
		case a.Kind == "budget":
			if st.BudgetAlerted == nil {
				st.BudgetAlerted = map[string]bool{}
			}
			st.BudgetAlerted[a.Team+"@"+BudgetMonth(now)] = true
		case a.Action == fleet.IdleStop:
			if u := ix.units[a.Unit]; u != nil && (u.State == core.JobRunning || u.State == core.JobCheckpointing) {
				state := core.JobCancelled
				if a.Kind == "zombie" {
					state = core.JobFailed
				}
				st.leave(u)
				u.stop(now, state)
				u.End = now
				st.ended()
			}
		}
	}
	st.Ladder = d.Ladder
	if sc := st.scratch; sc == nil || !sc.live {
		countRuns(st) // no live view keeps the count
	}
	markIdle(st, now)
	noteUse(st, recorded)
	return created
}

// countRuns counts the parts of running units on every lease afresh
// (Lease.runs), as a build does: for Apply when no live view keeps it.
func countRuns(st *State) {
	gen := st.stampLeases()
	for _, l := range st.Leases {
		l.runs = 0
	}
	for _, u := range st.Units {
		if u.State == core.JobRunning || u.State == core.JobCheckpointing {
			for i := range u.Parts {
				if l := st.partLease(u, i, gen); l != nil {
					l.runs++
				}
			}
		}
	}
}

// markIdle sets IdleSince on every live lease that runs nothing, by
// Lease.runs (kept by the live view, or counted by countRuns).
func markIdle(st *State, now time.Time) {
	for _, l := range st.Leases {
		switch {
		case l.State.Final():
		case l.runs > 0:
			l.IdleSince = time.Time{}
		case l.IdleSince.IsZero() && !l.ReadyAt.IsZero():
			l.IdleSince = now
		}
	}
}

// OnLaunched records the provider's launch (billing starts) of a lease.
// Its offer's mode has room again: a refusal of it is forgotten.
func OnLaunched(st *State, leaseID, providerID string, at time.Time) {
	if l := st.lease(leaseID); l != nil && l.State == core.LeaseRequested {
		l.State, l.Start, l.ProviderID = core.LeaseProvisioning, at, providerID
		if l.Plan.Committed() {
			l.CommittedEnd = at.Add(time.Duration(l.Plan.Term) * time.Second)
		}
		if len(st.Refused) > 0 {
			st.Refused = fleet.Launched(st.Refused, l.OfferID, l.Mode)
		}
	}
}

// OnRefused records a lease the provider refused to launch for lack of
// capacity (provider.ErrCapacity): the lease fails, as OnFailed, and its
// offer's mode is not rented again until the refusal's wait is over or a
// machine of the offer ends (fleet.Refused).
func OnRefused(st *State, leaseID string, at time.Time) {
	if l := st.lease(leaseID); l != nil && !l.State.Final() {
		if l.Start.IsZero() {
			st.Refused = fleet.Refused(st.Refused, l.OfferID, l.Mode, at)
		}
		OnFailed(st, leaseID, at)
	}
}

// freed notes that l, a machine that was launched, ended: its place at
// the provider is free, so refusals of its offer no longer hold.
func (st *State) freed(l *Lease) {
	if len(st.Refused) > 0 && !l.Start.IsZero() {
		st.Refused = fleet.Freed(st.Refused, l.OfferID)
	}
}

// OnReady records that a lease can take work.
func OnReady(st *State, leaseID string, at time.Time) {
	if l := st.lease(leaseID); l != nil && !l.State.Final() {
		l.State, l.ReadyAt, l.IdleSince = core.LeaseReady, at, at
		st.changed() // a new node
	}
}

// OnFailed records a lease the provider could not deliver.
func OnFailed(st *State, leaseID string, at time.Time) {
	if l := st.lease(leaseID); l != nil && !l.State.Final() {
		l.State, l.End = core.LeaseFailed, at
		st.freed(l)
		st.changed()
		st.ended()
	}
}

// OnReclaimNotice handles a spot reclaim notice: every unit on the lease
// checkpoints now and will be requeued; units reclaimed too often or
// short of time before their deadline fall back to on-demand. It returns
// the decisions, each with its reason.
func OnReclaimNotice(st *State, leaseID string, now, reclaimAt time.Time, cfg Config) []fleet.Reclaim {
	ix := newIndex(st)
	l := ix.leases[leaseID]
	if l == nil || l.State.Final() {
		return nil
	}
	l.ReclaimAt = reclaimAt
	st.changed() // the node leaves; its units checkpoint
	var su []fleet.SpotUnit
	for _, u := range ix.on[leaseID] {
		remaining := st.Estimate(u) - u.Done - now.Sub(u.Start)
		su = append(su, fleet.SpotUnit{Unit: u.Key(), LeaseID: leaseID, Reclaims: u.Reclaims, Remaining: max(remaining, 0), Deadline: u.Job.Deadline})
	}
	rs := fleet.OnReclaimNotice(now, reclaimAt, su, cfg.Fleet)
	for _, r := range rs {
		u := ix.units[r.Unit]
		// The notice is the checkpoint signal: the work so far is saved.
		u.Done += now.Sub(u.Start)
		u.Start, u.LastCheckpoint, u.State = now, now, core.JobCheckpointing
		u.NoSpot = u.NoSpot || r.NoSpot
	}
	return rs
}

// OnReclaimed handles the reclaim itself: the lease ends, its units go
// back to the queue and resume from their checkpoints elsewhere.
func OnReclaimed(st *State, leaseID string, now time.Time) {
	ix := newIndex(st)
	l := ix.leases[leaseID]
	if l == nil || l.State.Final() {
		return
	}
	st.changed()
	for _, u := range ix.on[leaseID] {
		u.stop(now, core.JobPending)
		u.Reclaims++
	}
	l.State, l.End = core.LeaseReclaimed, now
	st.freed(l)
	st.ended()
}

// Finish marks a unit done.
func Finish(st *State, key string, now time.Time) {
	FinishUnit(st, st.unit(key), now)
}

// FinishUnit marks u, one of st's units, done: Finish for a caller that
// holds the unit already.
func FinishUnit(st *State, u *Unit, now time.Time) {
	if u != nil && !u.State.Final() {
		st.leave(u)
		u.Done += now.Sub(u.Start)
		u.State, u.Parts, u.End = core.JobSucceeded, nil, now
		st.ended()
		st.learnFrom(u)
	}
}

// recordDemand appends the step's demand to the state's history when it
// changed, and forgets what is older than fleet.DemandKeep (the point in
// force at the window's start stays).
func recordDemand(st *State, now time.Time, milli int64) {
	switch n := len(st.Demand); {
	case n > 0 && st.Demand[n-1].Milli == milli:
	case n > 0 && !st.Demand[n-1].At.Before(now):
		st.Demand[n-1].Milli = milli // a second step at the same instant
	default:
		st.Demand = append(st.Demand, fleet.DemandPoint{At: now, Milli: milli})
	}
	cut := now.Add(-fleet.DemandKeep)
	drop := 0
	for drop+1 < len(st.Demand) && !st.Demand[drop+1].At.After(cut) {
		drop++
	}
	st.Demand = st.Demand[drop:] // append copies the live part when it grows
}
