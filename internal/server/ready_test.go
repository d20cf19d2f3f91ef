package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// faulty is a provider whose Poll fails while fail is set, and waits for
// unblock while block is set.
type faulty struct {
	provider.Provider
	fail    atomic.Bool
	block   atomic.Bool
	unblock chan struct{}
}

func (f *faulty) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	if f.block.Load() {
		select {
		case <-f.unblock:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fail.Load() {
		return nil, errors.New("poll: injected failure")
	}
	return f.Provider.Poll(ctx, now)
}

// runLoop runs a loop of the world's store on p in the background until
// the test ends.
func (w *world) runLoop(p provider.Provider) *Loop {
	w.t.Helper()
	l, err := NewLoop(Config{Store: w.st, Provider: p, Offers: hourly(), Clock: w.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}, Executor: VirtualTime{}})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	w.t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			w.t.Error(err)
		}
	})
	return l
}

// TestReadyFollowsTheLoop: /readyz's view of the loop. Ready while it
// ticks; not ready once ReadyFailures attempts in a row failed (the loop
// retries each tick, and schedules nothing meanwhile); ready again after
// one tick succeeds; not ready while a tick hangs past staleAfter.
func TestReadyFollowsTheLoop(t *testing.T) {
	w := newWorld(t)
	p := &faulty{Provider: w.cloud, unblock: make(chan struct{})}
	l := w.runLoop(p)
	w.waitPending(1)
	if err := l.Ready(); err != nil {
		t.Fatalf("ready after a first tick: %v", err)
	}

	p.fail.Store(true)
	for i := 1; i <= ReadyFailures; i++ {
		w.clk.Advance(DefaultTick)
		w.waitPending(1) // the tick failed; the loop waits to lead again
		err := l.Ready()
		if i < ReadyFailures && err != nil {
			t.Fatalf("not ready after %d failures: %v", i, err)
		}
		if i == ReadyFailures && (err == nil || !strings.Contains(err.Error(), "injected failure")) {
			t.Fatalf("after %d failures Ready = %v, want the latest failure", i, err)
		}
	}
	if n := counter(t, l.metrics.failures); n != ReadyFailures {
		t.Errorf("gpufleet_loop_failures_total = %v, want %d", n, ReadyFailures)
	}

	p.fail.Store(false)
	for l.Ready() != nil {
		w.clk.Advance(DefaultTick)
		w.waitPending(1)
		if w.clk.Now().After(t0.Add(time.Minute)) {
			t.Fatalf("not ready a minute after the failures stopped: %v", l.Ready())
		}
	}

	p.block.Store(true)
	w.clk.Advance(DefaultTick) // the next tick hangs in Poll
	for range 100 {
		if w.clk.Pending() == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.clk.Advance(staleAfter(DefaultTick) - DefaultTick - time.Second) // a second short of staleAfter since the last tick
	if err := l.Ready(); err != nil {
		t.Fatalf("not ready within staleAfter of the last tick: %v", err)
	}
	w.clk.Advance(2 * time.Second)
	if err := l.Ready(); err == nil || !strings.Contains(err.Error(), "no successful tick") {
		t.Errorf("Ready with a tick hung past staleAfter = %v", err)
	}
	p.block.Store(false)
	close(p.unblock)
	w.waitPending(1)
	if err := l.Ready(); err != nil {
		t.Errorf("not ready once the hung tick ended: %v", err)
	}
}

// TestReadyFollower: a replica that does not lead is ready (while its
// store answers, which the API checks), whatever its own loop did: only
// the leader schedules.
func TestReadyFollower(t *testing.T) {
	w := newWorld(t)
	w.runLoop(w.cloud)
	w.waitPending(1) // the leader ticks and sleeps
	second, err := sqlite.Open(context.Background(), w.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	p := &faulty{Provider: w.cloud, unblock: make(chan struct{})}
	p.fail.Store(true)
	l, err := NewLoop(Config{Store: second, Provider: p, Offers: hourly(), Clock: w.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}, Executor: VirtualTime{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() { stop(); <-done }()
	w.waitPending(2) // the follower waits for the lock
	w.submit("j1", core.TierCore, time.Minute)
	for range 3 * ReadyFailures {
		w.clk.Advance(DefaultTick)
		w.waitPending(2)
		if err := l.Ready(); err != nil {
			t.Fatalf("follower not ready: %v", err)
		}
	}
	if n := counter(t, l.metrics.failures); n != 0 {
		t.Errorf("follower counted %v failures", n)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestReplicaNamesTheLeader: a leader records itself on taking the lock
// (term 1), a follower names it, and when the leader stops the follower
// takes the lock at its next try, records itself (term 2) and says so.
func TestReplicaNamesTheLeader(t *testing.T) {
	w := newWorld(t)
	second, err := sqlite.Open(context.Background(), w.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	start := func(st store.Store, name string) (*Loop, func()) {
		l, err := NewLoop(Config{Store: st, Provider: w.cloud, Offers: hourly(), Clock: w.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Engine: engine.Config{}, Executor: VirtualTime{}, Replica: name})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		var once sync.Once
		return l, func() {
			once.Do(func() {
				stop()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
		}
	}
	a, stopA := start(w.st, "replica-a")
	defer stopA()
	w.waitPending(1) // a leads and waits for its next tick
	b, stopB := start(second, "replica-b")
	defer stopB()
	w.waitPending(2) // b found the lock taken and waits to try again

	self, leading, leader := a.Replica()
	if self != "replica-a" || !leading || leader.Replica != "replica-a" || leader.Term != 1 {
		t.Fatalf("leader says %q leading=%v leader=%+v", self, leading, leader)
	}
	self, leading, leader = b.Replica()
	if self != "replica-b" || leading || leader.Replica != "replica-a" || leader.Term != 1 || !leader.Since.Equal(t0) {
		t.Fatalf("follower says %q leading=%v leader=%+v", self, leading, leader)
	}

	stopA() // gives the lock up
	w.clk.Advance(DefaultTick)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, leading, _ := b.Replica(); leading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower did not take over a tick after the leader stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, _, leader = b.Replica()
	want := store.Leadership{Replica: "replica-b", Since: t0.Add(DefaultTick), Term: 2}
	if leader != want {
		t.Errorf("new leader's record %+v, want %+v", leader, want)
	}
	stored, err := w.st.Loop().LoadLeader(context.Background())
	if err != nil || stored != want {
		t.Errorf("stored leader %+v (%v), want %+v", stored, err, want)
	}
}
