package server

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// unitFromEngine returns what the store keeps of u.
func unitFromEngine(u *engine.Unit) store.Unit {
	out := store.Unit{
		JobID: u.Job.ID, Shard: u.Shard, State: u.State,
		Start: u.Start, LastCheckpoint: u.LastCheckpoint, Done: u.Done, Since: u.Since,
		DeferredUntil: u.DeferredUntil, Reclaims: u.Reclaims, Preemptions: u.Preemptions,
		NoSpot: u.NoSpot, LostMilliSeconds: u.LostMilliSeconds, End: u.End,
	}
	if u.Parts != nil {
		out.Parts = make([]store.Part, len(u.Parts))
		for i, p := range u.Parts {
			out.Parts[i] = store.Part{LeaseID: p.LeaseID, GPUs: slices.Clone(p.GPUs)}
		}
	}
	return out
}

// unitEngine returns u as the engine tracks it, for job (which must be u's).
func unitEngine(u *store.Unit, job *core.Job) *engine.Unit {
	out := &engine.Unit{
		Unit:  sched.Unit{Job: job, Shard: u.Shard},
		State: u.State, Start: u.Start, LastCheckpoint: u.LastCheckpoint, Done: u.Done, Since: u.Since,
		DeferredUntil: u.DeferredUntil, Reclaims: u.Reclaims, Preemptions: u.Preemptions,
		NoSpot: u.NoSpot, LostMilliSeconds: u.LostMilliSeconds, End: u.End,
	}
	if u.Parts != nil {
		out.Parts = make([]engine.Assigned, len(u.Parts))
		for i, p := range u.Parts {
			out.Parts[i] = engine.Assigned{LeaseID: p.LeaseID, GPUs: slices.Clone(p.GPUs)}
		}
	}
	return out
}

// baseline is the stored form of the units and leases a loop loaded, so
// that it writes back only the rows a tick changed: a long queue of
// pending units, or a fleet, that nothing touched costs no write at all.
// It holds units and leases by pointer, so a unit the engine prunes from
// State.Units is still compared (and its final state written).
type baseline struct {
	units     []*engine.Unit
	was       []store.Unit
	leasesWas map[*engine.Lease]store.Lease
}

// newBaseline records st's units and leases as they are now (as loaded,
// before any change).
func newBaseline(st *engine.State) *baseline {
	b := &baseline{units: slices.Clone(st.Units), was: make([]store.Unit, len(st.Units)), leasesWas: make(map[*engine.Lease]store.Lease, len(st.Leases))}
	for i, u := range st.Units {
		b.was[i] = unitFromEngine(u)
	}
	for _, l := range st.Leases {
		b.leasesWas[l] = leaseFromEngine(l)
	}
	return b
}

// LeaseChanged reports whether l's stored form differs from its
// baseline; a lease the baseline does not have is changed.
func (b *baseline) LeaseChanged(l *engine.Lease) bool {
	was, ok := b.leasesWas[l]
	if !ok {
		return true
	}
	now := leaseFromEngine(l)
	return !sameLease(&now, &was)
}

// sameLease reports whether a and b store the same lease row, times
// compared as instants.
func sameLease(a, b *store.Lease) bool {
	x, y := a.Lease, b.Lease
	return x.ID == y.ID && x.OfferID == y.OfferID && x.Mode == y.Mode && x.Start.Equal(y.Start) && x.CommittedEnd.Equal(y.CommittedEnd) &&
		x.End.Equal(y.End) && x.State == y.State && x.ClientToken == y.ClientToken && x.ProviderID == y.ProviderID &&
		a.Requested.Equal(b.Requested) && a.ReadyAt.Equal(b.ReadyAt) && a.ReclaimAt.Equal(b.ReclaimAt) && a.IdleSince.Equal(b.IdleSince) &&
		slices.Equal(a.For, b.For) && slices.EqualFunc(x.Earlier, y.Earlier, func(s, t core.Term) bool { return s.Mode == t.Mode && s.Start.Equal(t.Start) })
}

// Changed returns the stored form of every unit that differs from its
// baseline, in the order the baseline has them.
func (b *baseline) Changed() []store.Unit {
	var out []store.Unit
	for i, u := range b.units {
		if now := unitFromEngine(u); !sameUnit(&now, &b.was[i]) {
			out = append(out, now)
		}
	}
	return out
}

// sameUnit reports whether a and b store the same row. Times compare as
// instants (a loaded time has no monotonic reading, a fresh one may).
func sameUnit(a, b *store.Unit) bool {
	return a.JobID == b.JobID && a.Shard == b.Shard && a.State == b.State &&
		a.Start.Equal(b.Start) && a.LastCheckpoint.Equal(b.LastCheckpoint) && a.Done == b.Done && a.Since.Equal(b.Since) &&
		a.DeferredUntil.Equal(b.DeferredUntil) && a.Reclaims == b.Reclaims && a.Preemptions == b.Preemptions &&
		a.NoSpot == b.NoSpot && a.LostMilliSeconds == b.LostMilliSeconds && a.End.Equal(b.End) &&
		(a.Parts == nil) == (b.Parts == nil) &&
		slices.EqualFunc(a.Parts, b.Parts, func(p, q store.Part) bool { return p.LeaseID == q.LeaseID && slices.Equal(p.GPUs, q.GPUs) })
}

// leaseFromEngine returns what the store keeps of l; Requested is left
// for the caller (it is set once, by CreateLease, and never changes).
func leaseFromEngine(l *engine.Lease) store.Lease {
	return store.Lease{Lease: l.Lease, ReadyAt: l.ReadyAt, ReclaimAt: l.ReclaimAt, IdleSince: l.IdleSince, For: l.For}
}

// leaseEngine returns l as the engine tracks it, with its offer and plan found
// by offer. An offer missing from the catalog, or one without the lease's
// billing mode, is store.ErrNotFound: a restart must not silently drop a
// machine that is still billed.
func leaseEngine(l *store.Lease, offer func(id string) (*core.Offer, bool)) (*engine.Lease, error) {
	o, ok := offer(l.OfferID)
	if !ok {
		return nil, fmt.Errorf("lease %q: %w", l.ID, store.NotFound("offer", l.OfferID))
	}
	p, ok := o.Plan(l.Mode)
	if !ok {
		return nil, fmt.Errorf("lease %q: offer %q has no %s plan: %w", l.ID, l.OfferID, l.Mode, store.ErrNotFound)
	}
	return &engine.Lease{Lease: l.Lease, Offer: o, Plan: p, ReadyAt: l.ReadyAt, ReclaimAt: l.ReclaimAt, IdleSince: l.IdleSince,
		For: l.For}, nil
}

// loadEngineState reads what the loop needs to restart: live leases (with
// offers and plans resolved through offer), live units with their jobs,
// teams and the LoopState. Offers, time-of-use tariffs and GPU readings
// come from the catalog and the agents, not from here. Run it inside a Tx
// for one consistent snapshot.
func loadEngineState(ctx context.Context, a store.Aggregates, offer func(id string) (*core.Offer, bool)) (*engine.State, store.LoopState, error) {
	st := &engine.State{}
	leases, err := a.Leases().ListLiveLeases(ctx)
	if err != nil {
		return nil, store.LoopState{}, fmt.Errorf("load engine state: %w", err)
	}
	for i := range leases {
		l, err := leaseEngine(&leases[i], offer)
		if err != nil {
			return nil, store.LoopState{}, fmt.Errorf("load engine state: %w", err)
		}
		st.Leases = append(st.Leases, l)
	}
	units, err := a.Units().ListLiveUnits(ctx)
	if err != nil {
		return nil, store.LoopState{}, fmt.Errorf("load engine state: %w", err)
	}
	// The units come in submission order, a job's together: its id is
	// new when it differs from the last unit's.
	var ids []string
	for i := range units {
		if i == 0 || units[i].JobID != units[i-1].JobID {
			ids = append(ids, units[i].JobID)
		}
	}
	got, err := a.Jobs().GetJobs(ctx, ids)
	if err != nil {
		return nil, store.LoopState{}, fmt.Errorf("load engine state: %w", err)
	}
	jobs := make(map[string]*core.Job, len(got))
	for i := range got {
		jobs[got[i].ID] = &got[i].Job
	}
	if len(units) > 0 {
		st.Units = make([]*engine.Unit, 0, len(units))
	}
	for i := range units {
		u := &units[i]
		j, ok := jobs[u.JobID]
		if !ok {
			return nil, store.LoopState{}, fmt.Errorf("load engine state: unit %s#%d: %w", u.JobID, u.Shard, store.NotFound("job", u.JobID))
		}
		st.Units = append(st.Units, unitEngine(u, j))
	}
	if st.Teams, err = a.Teams().ListTeams(ctx); err != nil {
		return nil, store.LoopState{}, fmt.Errorf("load engine state: %w", err)
	}
	ls, err := a.Loop().LoadLoop(ctx)
	if err != nil {
		return nil, store.LoopState{}, fmt.Errorf("load engine state: %w", err)
	}
	st.NextID, st.Spent, st.History, st.HistoryAt, st.Ladder, st.BudgetAlerted = ls.NextID, ls.Spent, ls.History, ls.HistoryAt, ls.Ladder, ls.BudgetAlerted
	st.Demand, st.Refused = ls.Demand, ls.Refused
	st.Durations = durationsFromLoop(ls)
	return st, ls, nil
}

// durationsFromLoop is the duration model a saved loop state holds.
func durationsFromLoop(ls store.LoopState) plan.DurationModel {
	var m plan.DurationModel
	if len(ls.Runs) > 0 {
		m.Runs = make(map[string][]int64, len(ls.Runs))
		for _, r := range ls.Runs {
			m.Runs[plan.DurationKey(r.Team, r.Command)] = r.Seconds
		}
	}
	if len(ls.Ratios) > 0 {
		m.Ratios = ls.Ratios
	}
	return m
}

// durationsToLoop is m as the loop state saves it: runs in team and
// command order.
func durationsToLoop(m *plan.DurationModel) (runs []core.DurationRuns, ratios map[string][]int64) {
	for _, k := range slices.Sorted(maps.Keys(m.Runs)) {
		team, cmd := plan.SplitDurationKey(k)
		runs = append(runs, core.DurationRuns{Team: team, Command: cmd, Seconds: m.Runs[k]})
	}
	if len(m.Ratios) > 0 {
		ratios = m.Ratios
	}
	return runs, ratios
}

// loopFromEngine returns the store.LoopState of st, to be saved with version
// (the Version last loaded or saved).
func loopFromEngine(st *engine.State, version int64) store.LoopState {
	runs, ratios := durationsToLoop(&st.Durations)
	return store.LoopState{NextID: st.NextID, Spent: st.Spent, History: st.History, HistoryAt: st.HistoryAt, Demand: st.Demand, Runs: runs, Ratios: ratios, Refused: st.Refused, Ladder: st.Ladder, BudgetAlerted: st.BudgetAlerted, Version: version}
}
