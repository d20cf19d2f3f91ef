package server

import (
	"context"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/store"
)

// liveState is the engine state the leading loop keeps between ticks, as
// the simulator keeps its own: after a tick that committed, it is what
// the store holds (the loop is the only writer of units and leases), so
// the next tick reads only what others changed — the jobs submitted or
// cancelled through the API, from the store's inbox — and the teams.
// Its cost follows the change, not the length of the queue.
//
// It is dropped, and the next tick loads the state whole, whenever it
// may differ from the store: a tick that failed after changing it, a
// reconcile (which writes leases itself), a new leadership, or a stored
// loop version other than the one it saved (another leader ticked).
type liveState struct {
	st *engine.State
	// version is the loop state's version the last tick saved.
	version int64
	// jobs are the live units' jobs, shared by their units, and units
	// how many live units each has.
	jobs  map[string]*core.Job
	units map[string]int
}

// newLiveState indexes st, just loaded whole, by job.
func newLiveState(st *engine.State, version int64) *liveState {
	lv := &liveState{st: st, version: version, jobs: map[string]*core.Job{}, units: map[string]int{}}
	for _, u := range st.Units {
		lv.jobs[u.Job.ID] = u.Job
		lv.units[u.Job.ID]++
	}
	return lv
}

// loadState returns the engine state for a tick and the stored loop
// state: the live state brought up to date when there is one, else the
// state loaded whole (and the inbox emptied, since the load has all it
// names). It runs in one transaction; the live state changes only after
// it committed.
func (l *Loop) loadState(ctx context.Context) (*engine.State, store.LoopState, error) {
	lv := l.live
	var (
		st    *engine.State
		ls    store.LoopState
		teams []core.Team
		fresh []store.Job  // jobs the live state has not seen
		known []store.Job  // jobs it has, as they are now
		units []store.Unit // fresh's units
	)
	err := l.cfg.Store.Tx(ctx, func(tx store.Tx) error {
		st, teams, fresh, known, units = nil, nil, nil, nil, nil
		ids, err := tx.Loop().TakeInbox(ctx)
		if err != nil {
			return err
		}
		if lv != nil {
			if ls, err = tx.Loop().LoadLoop(ctx); err != nil {
				return err
			}
		}
		if lv == nil || ls.Version != lv.version {
			st, ls, err = loadEngineState(ctx, tx, l.offer)
			return err
		}
		if teams, err = tx.Teams().ListTeams(ctx); err != nil {
			return err
		}
		got, err := tx.Jobs().GetJobs(ctx, ids)
		if err != nil {
			return err
		}
		byID := make(map[string]store.Job, len(got))
		for _, j := range got {
			byID[j.ID] = j
		}
		var freshIDs []string
		for _, id := range ids { // in the order they arrived
			j, ok := byID[id]
			switch {
			case !ok:
				continue
			case lv.jobs[j.ID] != nil:
				known = append(known, j)
			case !j.State.Final():
				fresh = append(fresh, j)
				freshIDs = append(freshIDs, j.ID)
			}
		}
		units, err = tx.Units().ListUnitsOf(ctx, freshIDs)
		return err
	})
	if err != nil {
		l.live = nil
		return nil, store.LoopState{}, fmt.Errorf("tick: %w", err)
	}
	if st != nil {
		l.live = newLiveState(st, ls.Version)
		return st, ls, nil
	}
	st = lv.st
	st.Teams = teams
	for _, j := range known {
		lv.jobs[j.ID].State = j.State // a cancel: the tick stops its units
	}
	// The new jobs' units join at the end, in the order they arrived,
	// which the engine takes in without building its view afresh.
	jobs := make(map[string]*core.Job, len(fresh))
	for i := range fresh {
		jobs[fresh[i].ID] = &fresh[i].Job
	}
	for i := range units {
		u := &units[i]
		if u.State.Final() {
			continue
		}
		j := jobs[u.JobID]
		st.Units = append(st.Units, unitEngine(u, j))
		lv.jobs[j.ID] = j
		lv.units[j.ID]++
	}
	return st, ls, nil
}

// keepState keeps st as the live state after a tick that committed and
// saved the loop state as version, with the units and leases that ended
// removed (engine.Prune, which keeps the engine's view).
func (l *Loop) keepState(st *engine.State, version int64) {
	lv := l.live
	if lv == nil || lv.st != st {
		lv = newLiveState(st, version)
	}
	engine.Prune(st, func(u *engine.Unit) {
		id := u.Job.ID
		if lv.units[id]--; lv.units[id] <= 0 {
			delete(lv.units, id)
			delete(lv.jobs, id)
		}
	}, nil)
	lv.version = version
	l.live = lv
}
