package server

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// countingStore counts the units written through its transactions.
type countingStore struct {
	store.Store
	saved *int
}

func (s countingStore) Tx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Tx(ctx, func(tx store.Tx) error { return fn(countingTx{tx, s.saved}) })
}

type countingTx struct {
	store.Tx
	saved *int
}

func (t countingTx) Units() store.Units { return countingUnits{t.Tx.Units(), t.saved} }

type countingUnits struct {
	store.Units
	saved *int
}

func (u countingUnits) SaveUnits(ctx context.Context, units ...store.Unit) error {
	*u.saved += len(units)
	return u.Units.SaveUnits(ctx, units...)
}

// TestTickWritesOnlyChangedUnits: a tick writes the units it changed and
// no other, so a queue that waits for machines costs no write per tick;
// what is written is still every change (the job runs to the end).
func TestTickWritesOnlyChangedUnits(t *testing.T) {
	var saved int
	path := t.TempDir() + "/loop.db"
	w := newWorldOn(t, func() (store.Store, error) {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		return countingStore{s, &saved}, err
	})
	const shards = 20
	j := core.Job{ID: "wide", Team: "a", Tier: core.TierRegular, Shards: shards, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU},
		EstDuration: 30 * time.Minute, Submit: w.clk.Now()}
	if _, _, err := w.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
		t.Fatal(err)
	}
	// The machines take 2 minutes: meanwhile the queue waits unchanged.
	w.run(time.Minute)
	if saved != 0 {
		t.Errorf("a minute of ticks while %d units wait for machines wrote %d units, want 0", shards, saved)
	}
	w.run(3 * time.Hour)
	// Each unit is written when placed and when it succeeds.
	if want := 2 * shards; saved != want {
		t.Errorf("placing and finishing %d units wrote %d units, want %d", shards, saved, want)
	}
	us, err := w.st.Units().ListUnits(context.Background(), "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.State != core.JobSucceeded {
			t.Errorf("unit %s#%d is %s after its run, want succeeded", u.JobID, u.Shard, u.State)
		}
	}
	if got := w.job("wide").State; got != core.JobSucceeded {
		t.Errorf("job is %s, want succeeded", got)
	}
}
