package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// loadCountingStore counts whole-state loads (ListLiveUnits) through its
// transactions and fails the next SaveUnits while failSave is set.
type loadCountingStore struct {
	store.Store
	loads    *int
	failSave *bool
}

func (s loadCountingStore) Tx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Tx(ctx, func(tx store.Tx) error { return fn(loadCountingTx{tx, s.loads, s.failSave}) })
}

type loadCountingTx struct {
	store.Tx
	loads    *int
	failSave *bool
}

func (t loadCountingTx) Units() store.Units {
	return loadCountingUnits{t.Tx.Units(), t.loads, t.failSave}
}

type loadCountingUnits struct {
	store.Units
	loads    *int
	failSave *bool
}

func (u loadCountingUnits) ListLiveUnits(ctx context.Context) ([]store.Unit, error) {
	*u.loads++
	return u.Units.ListLiveUnits(ctx)
}

func (u loadCountingUnits) SaveUnits(ctx context.Context, units ...store.Unit) error {
	if *u.failSave {
		*u.failSave = false
		return errors.New("disk full (injected)")
	}
	return u.Units.SaveUnits(ctx, units...)
}

// TestTickKeepsItsState: the loop loads its state whole once, then each
// tick reads only the jobs submitted or cancelled since (the store's
// inbox): work submitted between ticks runs, a cancel through the store
// stops its job. A tick that fails after changing its state drops it:
// the next loads whole again and the loop goes on, every job ending as
// it should; so does a restart.
func TestTickKeepsItsState(t *testing.T) {
	var loads int
	var failSave bool
	path := t.TempDir() + "/loop.db"
	w := newWorldOn(t, func() (store.Store, error) {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		return loadCountingStore{s, &loads, &failSave}, err
	})
	ctx := context.Background()
	for i := range 6 {
		w.submit(fmt.Sprintf("j%d", i), core.TierCore, 20*time.Minute)
	}
	w.run(10 * time.Minute)
	if loads != 1 {
		t.Errorf("10 minutes of ticks loaded the state whole %d times, want once", loads)
	}
	w.submit("late", core.TierCore, 20*time.Minute)
	w.submit("dropped", core.TierOffline, 20*time.Hour)
	w.run(time.Minute)
	if _, err := w.st.Jobs().CancelJob(ctx, "dropped", w.clk.Now()); err != nil {
		t.Fatal(err)
	}
	w.run(time.Minute)
	if s := w.job("dropped").State; s != core.JobCancelled {
		t.Errorf("dropped is %s a minute after its cancel, want cancelled", s)
	}
	if us, _ := w.st.Units().ListUnits(ctx, "dropped"); len(us) != 1 || us[0].State != core.JobCancelled {
		t.Errorf("dropped's units after the cancel: %+v, want one cancelled", us)
	}
	if loads != 1 {
		t.Errorf("ticks after submissions and a cancel loaded the state whole %d times, want still once", loads)
	}

	// A tick that fails to save: its changes are not kept.
	w.submit("after-failure", core.TierCore, 10*time.Minute)
	w.run(3 * time.Minute) // a machine for it on its way
	failSave = true
	for failSave {
		w.clk.Advance(DefaultTick)
		if err := w.loop.Tick(ctx); err == nil && failSave {
			continue // nothing to save this tick
		} else if err == nil {
			t.Fatal("a tick whose unit save failed reported no error")
		}
	}
	before := loads
	w.run(time.Minute)
	if loads != before+1 {
		t.Errorf("after a failed tick the state was loaded whole %d times, want once", loads-before)
	}
	w.restart()
	w.run(3 * time.Hour)
	for _, id := range []string{"j0", "j1", "j2", "j3", "j4", "j5", "late", "after-failure"} {
		if s := w.job(id).State; s != core.JobSucceeded {
			t.Errorf("%s is %s, want succeeded", id, s)
		}
	}
}

// unitsByKey finds the units it is asked for, sharded or not, a job id
// with '#' in it included, and no other.
func TestUnitsByKey(t *testing.T) {
	st := &engine.State{}
	add := func(id string, shards int) {
		j := &core.Job{ID: id, Shards: shards}
		for s := range max(shards, 1) {
			st.Units = append(st.Units, &engine.Unit{Unit: sched.Unit{Job: j, Shard: s}})
		}
	}
	add("solo", 0)
	add("wide", 3)
	add("odd#1", 0)
	add("odd", 2)
	got := unitsByKey(st, map[string]bool{"solo": true, "wide#2": true, "odd#1": true, "gone": true})
	var keys []string
	for k, u := range got {
		if u.Key() != k {
			t.Errorf("%s holds unit %s", k, u.Key())
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if fmt.Sprint(keys) != "[odd#1 solo wide#2]" {
		t.Errorf("found %v", keys)
	}
	// odd#1 names both the job "odd#1" and shard 1 of "odd": the key is
	// ambiguous, and the last unit of that key in st.Units wins, as a map
	// of every unit's key would have it.
	if u := got["odd#1"]; u.Job.ID != "odd" {
		t.Errorf("odd#1 is job %s's unit", u.Job.ID)
	}
}
