package server

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// counting counts the polls of one loop: only a leader polls.
type counting struct {
	provider.Provider
	polls atomic.Int64
}

func (c *counting) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	c.polls.Add(1)
	return c.Provider.Poll(ctx, now)
}

// waitPending waits until n goroutines wait on the manual clock: every
// loop has finished its tick and sleeps until the next.
func (w *world) waitPending(n int) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a hang guard, not a synchronisation
	for w.clk.Pending() != n {
		if time.Now().After(deadline) {
			w.t.Fatalf("%d waiters on the clock, want %d", w.clk.Pending(), n)
		}
		runtime.Gosched()
	}
}

// TestRunOneLeader runs two loops on one SQLite file: one leads and runs
// the job, the other waits; when the leader stops, the other takes over.
func TestRunOneLeader(t *testing.T) {
	w := newWorld(t)
	second, err := sqlite.Open(context.Background(), w.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pa, pb := &counting{Provider: w.cloud}, &counting{Provider: w.cloud}
	la, err := NewLoop(Config{Store: w.st, Provider: pa, Offers: hourly(), Clock: w.clk, Log: log, Engine: engine.Config{}, Executor: VirtualTime{}})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := NewLoop(Config{Store: second, Provider: pb, Offers: hourly(), Clock: w.clk, Log: log, Engine: engine.Config{}, Executor: VirtualTime{}})
	if err != nil {
		t.Fatal(err)
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- la.Run(ctxA) }()
	w.waitPending(1) // a leads and sleeps
	go func() { doneB <- lb.Run(ctxB) }()
	w.waitPending(2) // b waits for the lock
	w.submit("j1", core.TierCore, 10*time.Minute)
	for range 60 { // 5 minutes
		w.clk.Advance(DefaultTick)
		w.waitPending(2)
	}
	if pa.polls.Load() == 0 || pb.polls.Load() != 0 {
		t.Fatalf("polls: a %d, b %d; want only a", pa.polls.Load(), pb.polls.Load())
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	for range 24 * 60 { // two hours
		w.clk.Advance(DefaultTick)
		w.waitPending(1)
	}
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	if pb.polls.Load() == 0 {
		t.Error("b never took over")
	}
	if j := w.job("j1"); j.State != core.JobSucceeded {
		t.Errorf("job %s", j.State)
	}
	if n, m := len(w.leases()), len(w.cloud.Machines()); n != 1 || m != 1 {
		t.Errorf("%d leases, %d machines", n, m)
	}
}
