package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// countingStore counts the units and lease updates written, and the
// jobs read one by one, through its transactions.
type countingStore struct {
	store.Store
	saved, leases, gets *int
}

func (s countingStore) Tx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Tx(ctx, func(tx store.Tx) error { return fn(countingTx{tx, s.saved, s.leases, s.gets}) })
}

type countingTx struct {
	store.Tx
	saved, leases, gets *int
}

func (t countingTx) Units() store.Units   { return countingUnits{t.Tx.Units(), t.saved} }
func (t countingTx) Leases() store.Leases { return countingLeases{t.Tx.Leases(), t.leases} }
func (t countingTx) Jobs() store.Jobs     { return countingJobs{t.Tx.Jobs(), t.gets} }

type countingJobs struct {
	store.Jobs
	gets *int
}

func (j countingJobs) GetJob(ctx context.Context, id string) (store.Job, error) {
	*j.gets++
	return j.Jobs.GetJob(ctx, id)
}

type countingLeases struct {
	store.Leases
	updated *int
}

func (l countingLeases) UpdateLease(ctx context.Context, le store.Lease) error {
	*l.updated++
	return l.Leases.UpdateLease(ctx, le)
}

type countingUnits struct {
	store.Units
	saved *int
}

func (u countingUnits) SaveUnits(ctx context.Context, units ...store.Unit) error {
	*u.saved += len(units)
	return u.Units.SaveUnits(ctx, units...)
}

// TestTickWritesOnlyChangedUnits: a tick writes the units and leases it
// changed and no other, so a queue that waits for machines costs no write
// per tick; what is written is still every change (the job runs to the
// end).
func TestTickWritesOnlyChangedUnits(t *testing.T) {
	var saved, leases, gets int
	path := t.TempDir() + "/loop.db"
	w := newWorldOn(t, func() (store.Store, error) {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		return countingStore{s, &saved, &leases, &gets}, err
	})
	const shards = 20
	j := core.Job{ID: "wide", Team: "a", Tier: core.TierCore, Shards: shards, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU},
		EstDuration: 30 * time.Minute, Submit: w.clk.Now()}
	if _, _, err := w.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
		t.Fatal(err)
	}
	// Core work waits a minute for free machines before more are rented,
	// and the machines take 2 minutes: meanwhile neither the queue nor the
	// machines on their way change.
	w.run(time.Minute + DefaultTick)
	if saved != 0 {
		t.Errorf("a minute of ticks while %d units wait wrote %d units, want 0", shards, saved)
	}
	rented := len(w.leases())
	if rented == 0 {
		t.Fatal("no machine rented for the queue after a minute")
	}
	leases = 0
	w.run(time.Minute)
	if saved != 0 || leases != 0 {
		t.Errorf("a minute of ticks while %d units wait for %d machines wrote %d units and updated %d leases, want none", shards, rented, saved, leases)
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

// TestTickReadsJobsAtOnce: a tick reads the jobs of its queue hundreds
// to a query, not one read per job, however many small jobs wait.
func TestTickReadsJobsAtOnce(t *testing.T) {
	var saved, leases, gets int
	path := t.TempDir() + "/loop.db"
	w := newWorldOn(t, func() (store.Store, error) {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		return countingStore{s, &saved, &leases, &gets}, err
	})
	const jobs = 30
	for i := range jobs {
		w.submit(fmt.Sprintf("j%d", i), core.TierRegular, time.Hour)
	}
	w.run(time.Minute)
	if gets != 0 {
		t.Errorf("a minute of ticks while %d jobs wait read jobs one by one %d times, want none", jobs, gets)
	}
	// Once they run, each job's new state is written once: the ticks
	// after read none of them again.
	w.run(30 * time.Minute)
	if s := w.job("j0").State; s != core.JobRunning {
		t.Fatalf("j0 is %s after 31 minutes, want running", s)
	}
	gets = 0
	w.run(time.Minute)
	if gets != 0 {
		t.Errorf("a minute of ticks while %d jobs run read jobs one by one %d times, want none", jobs, gets)
	}
}
