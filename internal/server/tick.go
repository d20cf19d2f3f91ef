package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	fleetpolicy "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/loop"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Tick runs one step of the loop at the clock's now: it loads the state
// (kept between ticks while this replica leads, live.go), sets what the
// budgets and the joined machines say, and runs loop.Turn — the
// simulator's turn — with the store as its record (turn, below).
//
// A panic in the step (the engine refuses to decide on a state whose
// capacity accounting is broken, say one a changed catalog made) is a
// failed tick with the reason and the stack in the log, not a dead
// process: a server that crashed on it would crash again at every start
// on the same stored state, while a failed tick shows on /readyz and in
// gpufleet_loop_failures_total and is retried at the next tick.
func (l *Loop) Tick(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			l.cfg.Log.Error("control loop: tick panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("tick: panic: %v", p)
		}
		if err != nil {
			l.live = nil // it may hold what the store does not: load afresh
		}
	}()
	return l.tick(ctx)
}

func (l *Loop) tick(ctx context.Context) error {
	if l.reconcileDue {
		// A release failed: the provider still holds a machine the store
		// has ended. Reconcile releases it again; the tick goes on either
		// way, and a failed reconcile is tried at the next.
		if err := l.Reconcile(ctx); err != nil {
			l.cfg.Log.Warn("reconcile after a failed release failed; the next tick tries again", "err", err)
		} else {
			l.reconcileDue = false
		}
	}
	now := l.cfg.Clock.Now()
	began := time.Now() // latency is wall time, whatever the loop's clock
	st, ls, err := l.loadState(ctx)
	if err != nil {
		return err
	}
	st.Offers, st.TimeOfUse = l.cfg.RentOffers, l.cfg.TimeOfUse
	l.setSpent(ctx, st, now) // the ledger's month-to-date spend, for budgets (ledger.go)
	l.setJoined(ctx, st)     // machines joined by hand, leased before renting (joined.go)
	t := &turn{l: l, base: newBaseline(st), loaded: ls.Version}
	err = loop.Turn(ctx, st, l.cfg.Provider, now, l.cfg.Engine, t, t.hooks(ctx, now))
	if t.committed {
		l.metrics.observe(st, t.ag.agents, now, time.Since(began))
	}
	if err != nil {
		return fmt.Errorf("tick: %w", err)
	}
	l.keepState(st, t.version)
	return nil
}

// turn is the server's side of one loop.Turn (a loop.Driver): the
// agents' reports and the executor's exits as inputs, the store as the
// record of what was decided and acquired.
type turn struct {
	l    *Loop
	base *baseline
	// loaded is the loop state's version as loaded; version is its
	// version once saved.
	loaded, version int64
	ag              *agentTick
	committed       bool
	// refused are the engine's refusals for capacity before Acquire,
	// which saves the loop state again only when they changed.
	refused []core.Refusal
	// ended are the leases refused with a join token that can never be
	// used now, revoked with the acquisitions.
	ended []string
}

// hooks make each requested lease's join token and forget it once the
// provider answered.
func (t *turn) hooks(ctx context.Context, now time.Time) loop.Hooks {
	l := t.l
	return loop.Hooks{
		Bootstrap: func(le *engine.Lease) (provider.Bootstrap, error) { return l.bootstrap(ctx, le, now) },
		Answered: func(le *engine.Lease, _ provider.Machine, boot provider.Bootstrap, err error) {
			delete(l.joins, le.ID) // asked and answered: no retry will need it
			if err != nil && boot.JoinToken != "" {
				t.ended = append(t.ended, le.ID) // refused: its join token can never be used
			}
		},
	}
}

// Inputs applies the agents' reports and their silence (agents.go), puts
// back in the queue the units of machines that ended while the loop was
// away (reconcile marked them failed, reclaimed or vanished), stops the
// units of cancelled jobs, and ends the units the executor saw exit.
func (t *turn) Inputs(ctx context.Context, st *engine.State, now time.Time) ([]core.Event, error) {
	ag, events, err := t.l.agentsBefore(ctx, st, now)
	if err != nil {
		return nil, err
	}
	t.ag = ag
	live := map[string]bool{}
	for _, le := range st.Leases {
		if !le.State.Final() {
			live[le.ID] = true
		}
	}
	for _, u := range st.Units {
		if u.State != core.JobRunning && u.State != core.JobCheckpointing {
			continue
		}
		for _, p := range u.Parts {
			if !live[p.LeaseID] {
				engine.RequeueUnit(st, u, now)
				events = append(events, core.Event{At: now, Kind: "unit.requeued", Subject: u.Key(),
					Reason: fmt.Sprintf("its lease %s ended while the loop was not running: back to the queue from its last checkpoint", p.LeaseID)})
				break
			}
		}
	}
	for _, u := range st.Units {
		switch {
		case u.Job.State == core.JobCancelled && !u.State.Final():
			engine.CancelUnit(st, u, now)
			events = append(events, core.Event{At: now, Kind: "unit.cancelled", Subject: u.Key(), Reason: "its job was cancelled"})
		case u.State == core.JobRunning && t.l.cfg.Executor != nil && !ag.agentDriven(u):
			ex, ended := t.l.cfg.Executor.Ended(u, now)
			if !ended {
				continue
			}
			attrs := map[string]string{"exit_code": strconv.Itoa(ex.Code)}
			if ex.Code == 0 {
				engine.FinishUnit(st, u, ex.At)
				events = append(events, core.Event{At: ex.At, Kind: "unit.succeeded", Subject: u.Key(), Attrs: attrs, Reason: ex.Reason})
				continue
			}
			engine.FailUnit(st, u, ex.At)
			events = append(events, core.Event{At: ex.At, Kind: "unit.failed", Subject: u.Key(), Attrs: attrs, Reason: ex.Reason})
		}
	}
	return events, nil
}

// Decided adds the reasons of waiting units no offer can ever run.
func (t *turn) Decided(ctx context.Context, _ *engine.State, d *engine.Decisions) []core.Event {
	return t.l.unrunnableEvents(ctx, *d, d.Now)
}

// Commit persists the turn's decisions in one transaction before any
// machine is touched: only the units and leases it changed are written,
// so a queue or a fleet nothing touched costs no write. The demand
// history the fleet prices committed terms on is saved with the loop
// state: a restart carries on from it.
func (t *turn) Commit(ctx context.Context, st *engine.State, tu loop.Turned) error {
	l, now, d := t.l, tu.Now, &tu.Decisions
	l.demand = st.Demand
	isNew := make(map[string]bool, len(tu.Created))
	for _, c := range tu.Created {
		isNew[c.ID] = true
	}
	jobs := jobStates(st)
	units := t.base.Changed()
	err := l.cfg.Store.Tx(ctx, func(tx store.Tx) error {
		if len(tu.Events) > 0 {
			if _, err := tx.Events().AppendEvents(ctx, tu.Events...); err != nil {
				return err
			}
		}
		if err := keepAlerts(ctx, tx, d.Alerts, d.Cleared, now); err != nil {
			return err
		}
		for _, le := range st.Leases {
			sl := leaseFromEngine(le)
			if isNew[le.ID] {
				sl.Requested = now
				if err := tx.Leases().CreateLease(ctx, sl); err != nil {
					return err
				}
				continue
			}
			if !t.base.LeaseChanged(le) {
				continue
			}
			if err := tx.Leases().UpdateLease(ctx, sl); err != nil {
				return err
			}
			if le.State.Final() && l.cfg.PublicURL != "" {
				if err := revokeEnded(ctx, tx, []string{le.ID}, now); err != nil {
					return err
				}
			}
		}
		if len(units) > 0 {
			if err := tx.Units().SaveUnits(ctx, units...); err != nil {
				return err
			}
		}
		for id, s := range jobs {
			j, err := tx.Jobs().GetJob(ctx, id)
			if err != nil {
				return err
			}
			if j.State == s || j.State.Final() {
				continue
			}
			if _, err := tx.Jobs().TransitionJob(ctx, id, s, now); err != nil {
				return err
			}
		}
		if err := t.ag.persist(ctx, tx, st); err != nil {
			return err
		}
		v, err := tx.Loop().SaveLoop(ctx, loopFromEngine(st, t.loaded))
		t.version = v
		return err
	})
	if err != nil {
		return fmt.Errorf("persist decisions: %w", err)
	}
	t.committed = true
	t.ag.committed(ctx)
	l.notify(ctx, d.Alerts, now)
	if len(jobs) > 0 {
		// The kept state's jobs are the store's: as written.
		for _, u := range st.Units {
			if s, ok := jobs[u.Job.ID]; ok && !u.Job.State.Final() {
				u.Job.State = s
			}
		}
	}
	// What Acquire is about to change: the refusals, and the join
	// tokens of leases no longer waiting for a machine.
	t.refused = slices.Clone(st.Refused)
	if len(l.joins) > 0 {
		waiting := map[string]bool{}
		for _, le := range st.Leases {
			if le.State == core.LeaseRequested {
				waiting[le.ID] = true
			}
		}
		for id := range l.joins {
			if !waiting[id] {
				delete(l.joins, id)
			}
		}
	}
	return nil
}

// ReleaseFailed logs and goes on: the next tick reconciles, which
// releases the machine again (Loop.reconcileDue).
func (t *turn) ReleaseFailed(pid string, err error) error {
	t.l.cfg.Log.Warn("release failed; the next tick releases it again", "provider_id", pid, "err", err)
	t.l.reconcileDue = true
	return nil
}

// Acquired saves what the provider answered, with the loop state when
// the refusals for capacity changed (engine.OnRefused, OnLaunched). A
// lease whose acquisition was postponed stays requested: the next tick
// asks again with the same client token.
func (t *turn) Acquired(ctx context.Context, st *engine.State, now time.Time, got loop.Acquired) error {
	l := t.l
	for id, err := range got.Postponed {
		l.cfg.Log.Warn("acquire postponed; retrying next tick", "lease", id, "err", err)
	}
	if len(got.Changed) == 0 {
		return nil
	}
	version := t.version
	saved := version
	err := l.cfg.Store.Tx(ctx, func(tx store.Tx) error {
		saved = version
		for _, le := range got.Changed {
			if err := tx.Leases().UpdateLease(ctx, leaseFromEngine(le)); err != nil {
				return err
			}
		}
		if err := revokeEnded(ctx, tx, t.ended, now); err != nil {
			return err
		}
		if !sameRefusals(t.refused, st.Refused) {
			// A refusal for capacity holds across restarts, as the
			// simulator keeps it across steps.
			v, err := tx.Loop().SaveLoop(ctx, loopFromEngine(st, version))
			if err != nil {
				return err
			}
			saved = v
		}
		_, err := tx.Events().AppendEvents(ctx, got.Events...)
		return err
	})
	if err != nil {
		return fmt.Errorf("save acquisitions: %w", err)
	}
	t.version = saved
	return nil
}

// sameRefusals reports whether a and b hold the same refusals.
func sameRefusals(a, b []core.Refusal) bool {
	return slices.EqualFunc(a, b, func(x, y core.Refusal) bool {
		return x.Offer == y.Offer && x.Mode == y.Mode && x.Until.Equal(y.Until) && x.Wait == y.Wait
	})
}

// jobStates derives each job's state from its live units: succeeded when
// all have, failed or cancelled when one has, running while one runs.
// Jobs already in that state as loaded are left out: the tick reads and
// writes only the jobs that move.
func jobStates(st *engine.State) map[string]core.JobState {
	type agg struct {
		job                                      *core.Job
		n, succeeded, running, failed, cancelled int
	}
	by := map[string]*agg{}
	for _, u := range st.Units {
		a := by[u.Job.ID]
		if a == nil {
			a = &agg{job: u.Job}
			by[u.Job.ID] = a
		}
		a.n++
		switch u.State {
		case core.JobSucceeded:
			a.succeeded++
		case core.JobRunning, core.JobCheckpointing:
			a.running++
		case core.JobFailed:
			a.failed++
		case core.JobCancelled:
			a.cancelled++
		}
	}
	out := map[string]core.JobState{}
	for id, a := range by {
		var s core.JobState
		switch {
		case a.cancelled > 0:
			s = core.JobCancelled
		case a.failed > 0:
			s = core.JobFailed
		case a.succeeded == a.n:
			s = core.JobSucceeded
		case a.running > 0:
			s = core.JobRunning
		}
		if s != "" && s != a.job.State {
			out[id] = s
		}
	}
	return out
}

// unrunnableEvents reports the waiting units that no offer of the catalog
// (within the provider's capacity) can ever run, by fleet.Feasible, the
// rule submissions are refused by: a job accepted before the catalog or
// the capacity changed would otherwise wait with no word of why. Each
// unit's reason is an event once (again after a restart); a unit that
// becomes runnable, or stops waiting, is forgotten.
//
// On the static pool alone (nothing can be rented: the engine leases
// joined machines only) the offers are the pool's machines, and a unit
// that one of them could run but none free can gets a unit.waiting event
// saying so, once, instead of a failed lease every tick.
func (l *Loop) unrunnableEvents(ctx context.Context, d engine.Decisions, now time.Time) []core.Event {
	var events []core.Event
	offers, capacity := l.cfg.RentOffers, l.cfg.Capacity
	pool, isPool := l.cfg.Provider.(*AgentPool)
	if isPool && len(d.Waiting) > 0 {
		n, err := pool.Machines(ctx)
		if err != nil {
			l.cfg.Log.Warn("the pool's machines not counted; waiting units not judged", "err", err)
			return nil
		}
		offers, capacity = fleetpolicy.PoolOffers(offers, n)
	}
	served := map[string]bool{} // units a machine is acquired for this step
	for _, a := range d.Acquire {
		for _, u := range a.For {
			served[u] = true
		}
	}
	// The shards of a job are alike: whether an offer can run them is
	// asked once a job, and a unit's key (a string made for a shard) is
	// made only when there is something to record or forget.
	feasible := map[*core.Job]error{}
	waiting := map[string]bool{} // the keys made: every waiting unit's once l.unrunnable holds any
	for _, w := range d.Waiting {
		err, asked := feasible[w.Unit.Job]
		if !asked {
			err = fleetpolicy.Feasible(w.Unit.Job, offers, capacity)
			feasible[w.Unit.Job] = err
		}
		if err == nil && !isPool && len(l.unrunnable) == 0 {
			continue // runnable, and nothing recorded to forget
		}
		key := w.Unit.Key()
		waiting[key] = true
		if isPool && served[key] {
			continue
		}
		kind, reason := "unit.unrunnable", ""
		switch {
		case err == nil && !isPool:
			delete(l.unrunnable, key)
			continue
		case err == nil:
			kind, reason = "unit.waiting", "waits for a free machine of the static pool that fits it ("+fleetpolicy.PoolSummary(offers)+"): none is free now, and nothing is rented"
		case isPool && len(offers) == 0:
			reason = "no machine of the static pool can ever run it: no agent with a catalog offer has joined"
		case isPool:
			reason = "no machine of the static pool can ever run it (" + fleetpolicy.PoolSummary(offers) + "): " + err.Error()
		default:
			reason = "no offer can ever run it: " + err.Error()
		}
		if l.unrunnable[key] == reason {
			continue
		}
		l.unrunnable[key] = reason
		events = append(events, core.Event{At: now, Kind: kind, Subject: key, Reason: reason})
	}
	for key := range l.unrunnable {
		if !waiting[key] {
			delete(l.unrunnable, key)
		}
	}
	return events
}
