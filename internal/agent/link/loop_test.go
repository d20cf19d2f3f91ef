package link_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/agent/link/fake"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

// memQueue is an in-memory outbox.
type memQueue struct {
	mu   sync.Mutex
	seq  uint64
	recs []link.Record
}

func (q *memQueue) sample(at time.Time, util int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.recs = append(q.recs, link.Record{Seq: q.seq, Kind: link.KindSample, Sample: &link.Sample{LeaseID: "L1", GPU: 0, At: at, UtilPct: util}})
}

func (q *memQueue) event(at time.Time, kind string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.recs = append(q.recs, link.Record{Seq: q.seq, Kind: link.KindEvent, Event: &core.Event{At: at, Kind: kind, Subject: "job-1"}})
}

func (q *memQueue) Peek(max int) ([]link.Record, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(max, len(q.recs))
	return append([]link.Record(nil), q.recs[:n]...), nil
}

func (q *memQueue) Ack(seq uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.recs) > 0 && q.recs[0].Seq <= seq {
		q.recs = q.recs[1:]
	}
	return nil
}

func (q *memQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.recs)
}

func seqs(recs []link.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d %s", r.Seq, r.Kind))
	}
	return out
}

func TestStepSendsInOrderByKind(t *testing.T) {
	c := clock.NewManual(t0)
	q := &memQueue{}
	q.sample(t0, 1)
	q.sample(t0, 2)
	q.event(t0, "job-started")
	q.sample(t0, 3)
	q.event(t0, "job-exited")
	q.event(t0, "job-started")
	srv := fake.New()
	var got []link.Command
	srv.Push(link.Command{ID: "c1", Kind: link.CommandRun, Job: link.JobSpec{ID: "job-2"}})
	l := &link.Loop{Up: srv, Queue: q, Clock: c, Batch: 2, Interval: 10 * time.Second,
		Heartbeat: func() link.Heartbeat { return link.Heartbeat{Agent: "a1", At: c.Now()} },
		Commands:  func(_ context.Context, cmds []link.Command) { got = append(got, cmds...) }}
	wait := l.Step(context.Background())
	if wait != 10*time.Second {
		t.Errorf("wait = %v, want the 10s to the next heartbeat", wait)
	}
	want := []string{"1 sample", "2 sample", "3 event", "4 sample", "5 event", "6 event"}
	if d := cmp.Diff(want, seqs(srv.Records())); d != "" {
		t.Errorf("server got (-want +got)\n%s", d)
	}
	if q.len() != 0 {
		t.Errorf("%d records left", q.len())
	}
	if len(srv.Heartbeats()) != 1 || srv.Heartbeats()[0].Agent != "a1" {
		t.Errorf("heartbeats = %+v", srv.Heartbeats())
	}
	if len(got) != 1 || got[0].ID != "c1" {
		t.Errorf("commands = %+v", got)
	}
	// Before the interval, a step sends what is new and no heartbeat.
	c.Advance(3 * time.Second)
	q.sample(c.Now(), 4)
	if wait := l.Step(context.Background()); wait != 7*time.Second {
		t.Errorf("wait = %v, want 7s", wait)
	}
	if len(srv.Heartbeats()) != 1 || len(srv.Records()) != 7 {
		t.Errorf("heartbeats %d records %d, want 1 and 7", len(srv.Heartbeats()), len(srv.Records()))
	}
}

func TestBackoffWithFullJitter(t *testing.T) {
	run := func(seed uint64) []time.Duration {
		c := clock.NewManual(t0)
		srv := fake.New()
		srv.SetDown(true)
		l := &link.Loop{Up: srv, Queue: &memQueue{}, Clock: c, Rand: rand.New(rand.NewPCG(seed, 0)), BackoffBase: time.Second, BackoffMax: time.Minute}
		var waits []time.Duration
		for i := 0; i < 12; i++ {
			w := l.Step(context.Background())
			if l.Failures() != i+1 {
				t.Fatalf("failures = %d after %d failed steps", l.Failures(), i+1)
			}
			if limit := l.Backoff(i + 1); w < 0 || w > limit {
				t.Fatalf("wait %d = %v, outside [0, %v]", i+1, w, limit)
			}
			waits = append(waits, w)
			c.Advance(w)
		}
		return waits
	}
	a, b := run(42), run(42)
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("same seed, different waits (-first +second)\n%s", d)
	}
	if d := cmp.Diff(a, run(43)); d == "" {
		t.Error("different seeds drew the same waits")
	}
	l := &link.Loop{BackoffBase: time.Second, BackoffMax: time.Minute}
	var ceilings []time.Duration
	for n := 1; n <= 8; n++ {
		ceilings = append(ceilings, l.Backoff(n))
	}
	want := []time.Duration{1e9, 2e9, 4e9, 8e9, 16e9, 32e9, 60e9, 60e9}
	if d := cmp.Diff(want, ceilings); d != "" {
		t.Errorf("ceilings (-want +got)\n%s", d)
	}
	if l.Backoff(1000) != time.Minute {
		t.Errorf("Backoff(1000) = %v, want the cap", l.Backoff(1000))
	}
}

// TestPartitionHeals drives a loop and a sample producer on a manual
// clock through a 20 minute partition, lost replies and flapping: every
// sample and event arrives once, in order.
func TestPartitionHeals(t *testing.T) {
	c := clock.NewManual(t0)
	q := &memQueue{}
	srv := fake.New()
	l := &link.Loop{Up: srv, Queue: q, Clock: c, Rand: rand.New(rand.NewPCG(7, 7)), Batch: 16, Interval: 10 * time.Second,
		BackoffBase: time.Second, BackoffMax: 30 * time.Second}
	ctx := context.Background()
	nextStep, nextSample := t0, t0
	produced := 0
	end := t0.Add(40 * time.Minute)
	for {
		now := nextStep
		if nextSample.Before(now) {
			now = nextSample
		}
		if now.After(end) {
			break
		}
		c.Set(now)
		min := now.Sub(t0)
		// The server is away from minute 5 to 25, answers but loses
		// replies now and then, and flaps around minute 30.
		srv.SetDown(min >= 5*time.Minute && min < 25*time.Minute)
		if min == 27*time.Minute {
			srv.LoseReplies(3)
		}
		if min == 30*time.Minute {
			srv.FailNext(5)
		}
		if !now.Before(nextSample) {
			produced++
			if produced%25 == 0 {
				q.event(now, "job-exited")
			} else {
				q.sample(now, produced%100)
			}
			nextSample = nextSample.Add(10 * time.Second)
		}
		if !now.Before(nextStep) {
			nextStep = now.Add(l.Step(ctx))
		}
	}
	c.Set(end)
	srv.SetDown(false)
	for i := 0; q.len() > 0; i++ {
		if i > 100 {
			t.Fatalf("outbox not drained: %d left", q.len())
		}
		c.Advance(l.Step(ctx))
	}
	got := srv.Records()
	if len(got) != produced {
		t.Fatalf("server applied %d records, produced %d", len(got), produced)
	}
	for i, r := range got {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d: lost, duplicated or reordered", i, r.Seq)
		}
		isEvent := (i+1)%25 == 0
		if (r.Kind == link.KindEvent) != isEvent || (!isEvent && r.Sample.UtilPct != (i+1)%100) {
			t.Fatalf("record %d = %+v, not what was produced", i, r)
		}
	}
	if srv.Duplicates() == 0 {
		t.Error("no duplicate was sent: the lost replies did not exercise the server's dedup")
	}
	// After healing, the first thing the agent said was a heartbeat.
	if hb := srv.Heartbeats(); len(hb) < 2 {
		t.Errorf("heartbeats = %d", len(hb))
	}
}

func TestRunWakesAndStops(t *testing.T) {
	c := clock.NewManual(t0)
	q := &memQueue{}
	srv := fake.New()
	l := &link.Loop{Up: srv, Queue: q, Clock: c, Interval: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	changed := srv.Changed()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, wake) }()
	<-changed // the first heartbeat
	changed = srv.Changed()
	q.sample(c.Now(), 50)
	wake <- struct{}{}
	<-changed // the sample, sent without the clock moving
	if got := srv.Records(); len(got) != 1 || got[0].Sample.UtilPct != 50 {
		t.Errorf("records = %+v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil on cancel", err)
	}
}

// TestRunBacksOffDespiteWakes: while the server fails, new records do not
// make the loop retry before its backoff is over.
func TestRunBacksOffDespiteWakes(t *testing.T) {
	c := clock.NewManual(t0)
	q := &memQueue{}
	srv := fake.New()
	srv.SetDown(true)
	l := &link.Loop{Up: srv, Queue: q, Clock: c, Rand: rand.New(rand.NewPCG(1, 2)), BackoffBase: time.Minute, BackoffMax: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, wake) }()
	// The first step fails; Run then waits on the clock alone.
	for c.Pending() == 0 {
		runtime.Gosched()
	}
	calls := srv.Calls()
	select {
	case wake <- struct{}{}:
		t.Fatal("Run took a wake while backing off")
	case <-time.After(50 * time.Millisecond): // proving a negative: nobody receives
	}
	if srv.Calls() != calls {
		t.Errorf("calls went from %d to %d without the backoff elapsing", calls, srv.Calls())
	}
	cancel()
	<-done
}

// TestRunStopsOnRejectedToken: a 401 or a 403 (a revoked token, or one
// that is not an agent token) ends Run with an error that is ErrRejected
// after one call, while other failures (a 500, a partition) keep being
// retried with backoff.
func TestRunStopsOnRejectedToken(t *testing.T) {
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			c := clock.NewManual(t0)
			srv := fake.New()
			srv.Reject(status)
			l := &link.Loop{Up: srv, Queue: &memQueue{}, Clock: c, BackoffBase: time.Second, BackoffMax: time.Minute}
			done := make(chan error, 1)
			go func() { done <- l.Run(context.Background(), nil) }()
			select {
			case err := <-done:
				if !errors.Is(err, link.ErrRejected) {
					t.Errorf("Run = %v, want an error that is link.ErrRejected", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Run still retrying a %d after 5 s (%d calls)", status, srv.Calls())
			}
			if srv.Calls() != 1 {
				t.Errorf("%d calls, want 1: a refused token is not retried", srv.Calls())
			}
			if w := l.Step(context.Background()); w != 0 || srv.Calls() != 1 || l.Err() == nil {
				t.Errorf("Step after the rejection: wait %v, %d calls, Err %v; want no call and the error kept", w, srv.Calls(), l.Err())
			}
		})
	}
	for _, err := range []error{&link.Error{Status: 500}, &link.Error{Status: 429}, fake.ErrDown} {
		if errors.Is(err, link.ErrRejected) {
			t.Errorf("%v is ErrRejected; want it retried", err)
		}
	}
}
