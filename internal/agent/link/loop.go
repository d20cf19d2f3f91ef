package link

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
)

// Loop keeps the agent in touch with the server: a heartbeat and a
// command fetch every Interval, and the outbox drained in order in
// between. When a call fails it backs off exponentially with full jitter
// (a wait drawn uniformly from [0, min(BackoffMax, BackoffBase·2ⁿ⁻¹)]
// after the n-th failure in a row) and, once the server answers again,
// heartbeats first.
//
// An error that is ErrRejected (the server refuses the agent's token) is
// not retried: Step records it (Err) and Run returns it, since the same
// token will be refused however long the loop waits.
//
// Step does one round and says how long to wait; Run repeats it. Tests
// call Step on a manual clock and see every wait.
type Loop struct {
	Up    Uplink
	Queue Queue
	// Clock tells the time; nil means the wall clock.
	Clock clock.Clock
	// Rand draws the jitter; seed it and log the seed to replay a run.
	// Nil means a generator seeded from the clock's start time.
	Rand *rand.Rand
	// Heartbeat builds the heartbeat to send; nil sends an empty one.
	Heartbeat func() Heartbeat
	// Commands carries out fetched commands; nil ignores them.
	Commands func(ctx context.Context, cmds []Command)
	// Interval between heartbeats and command fetches (10 s).
	Interval time.Duration
	// Batch is the most records one send carries (512).
	Batch int
	// MaxBatches bounds the sends of one Step (64), so a long backlog
	// does not starve heartbeats.
	MaxBatches int
	// BackoffBase and BackoffMax shape the backoff (1 s, 2 min).
	BackoffBase, BackoffMax time.Duration
	// Logger logs failures and recoveries; nil discards.
	Logger *slog.Logger

	failures int
	nextBeat time.Time // zero: heartbeat at the next step
	started  bool
	rejected error // the ErrRejected error that stopped the loop
}

func (l *Loop) init() {
	if l.started {
		return
	}
	l.started = true
	if l.Clock == nil {
		l.Clock = clock.Real{}
	}
	if l.Rand == nil {
		seed := uint64(l.Clock.Now().UnixNano())
		l.Rand = rand.New(rand.NewPCG(seed, seed>>1|1))
	}
	if l.Interval <= 0 {
		l.Interval = 10 * time.Second
	}
	if l.Batch <= 0 {
		l.Batch = 512
	}
	if l.MaxBatches <= 0 {
		l.MaxBatches = 64
	}
	if l.BackoffBase <= 0 {
		l.BackoffBase = time.Second
	}
	if l.BackoffMax <= 0 {
		l.BackoffMax = 2 * time.Minute
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
}

// Failures returns how many calls in a row have failed.
func (l *Loop) Failures() int { return l.failures }

// Err returns the error that stopped the loop for good (one that is
// ErrRejected), or nil.
func (l *Loop) Err() error { return l.rejected }

// Step heartbeats and fetches commands when due, sends what the outbox
// holds (up to MaxBatches sends), and returns how long to wait before
// the next step: 0 when more is waiting, the backoff after a failure.
func (l *Loop) Step(ctx context.Context) time.Duration {
	l.init()
	if l.rejected != nil {
		return 0
	}
	now := l.Clock.Now()
	if l.nextBeat.IsZero() || !now.Before(l.nextBeat) {
		hb := Heartbeat{}
		if l.Heartbeat != nil {
			hb = l.Heartbeat()
		}
		if err := l.Up.Heartbeat(ctx, hb); err != nil {
			return l.fail(ctx, fmt.Errorf("link: heartbeat: %w", err))
		}
		cmds, err := l.Up.FetchCommands(ctx)
		if err != nil {
			return l.fail(ctx, fmt.Errorf("link: fetch commands: %w", err))
		}
		if len(cmds) > 0 && l.Commands != nil {
			l.Commands(ctx, cmds)
		}
		l.nextBeat = now.Add(l.Interval)
	}
	more := false
	for i := 0; i < l.MaxBatches; i++ {
		recs, err := l.Queue.Peek(l.Batch)
		if err != nil {
			return l.fail(ctx, fmt.Errorf("link: outbox: %w", err))
		}
		if len(recs) == 0 {
			more = false
			break
		}
		run := headRun(recs)
		if run[0].Kind == KindEvent {
			err = l.Up.SendEvents(ctx, run)
		} else {
			err = l.Up.SendSamples(ctx, run)
		}
		if err != nil {
			return l.fail(ctx, fmt.Errorf("link: send %d %s records from seq %d: %w", len(run), run[0].Kind, run[0].Seq, err))
		}
		if err := l.Queue.Ack(run[len(run)-1].Seq); err != nil {
			return l.fail(ctx, fmt.Errorf("link: outbox: %w", err))
		}
		more = len(run) < len(recs) || len(recs) == l.Batch
	}
	if l.failures > 0 {
		l.Logger.Info("server reachable again", "after_failures", l.failures)
	}
	l.failures = 0
	if more {
		return 0
	}
	return max(l.nextBeat.Sub(l.Clock.Now()), 0)
}

// headRun returns the leading records of one class: events, or samples
// and summaries.
func headRun(recs []Record) []Record {
	isEvent := recs[0].Kind == KindEvent
	n := 1
	for n < len(recs) && (recs[n].Kind == KindEvent) == isEvent {
		n++
	}
	return recs[:n]
}

// fail counts a failure and returns the jittered backoff (nothing when
// ctx is done: that is the agent stopping, not the server failing). The next
// successful contact starts with a heartbeat: the server learns at once
// that the agent is back.
func (l *Loop) fail(ctx context.Context, err error) time.Duration {
	if ctx.Err() != nil {
		// Shutting down, not a failure of the server.
		return 0
	}
	l.failures++
	l.nextBeat = time.Time{}
	if errors.Is(err, ErrRejected) {
		l.rejected = err
		l.Logger.Error("the server rejects this agent's token: not retrying (give an agent token, --token or GPUFLEET_TOKEN)", "err", err)
		return 0
	}
	ceiling := l.Backoff(l.failures)
	wait := time.Duration(l.Rand.Int64N(int64(ceiling) + 1))
	l.Logger.Warn("link failed", "err", err, "failures", l.failures, "retry_in", wait)
	return wait
}

// Backoff returns the most a wait can be after n failures in a row.
func (l *Loop) Backoff(n int) time.Duration {
	l.init()
	if n <= 0 {
		return 0
	}
	ceiling := l.BackoffMax
	if shift := n - 1; shift < 40 {
		if c := l.BackoffBase << shift; c > 0 && c < ceiling {
			ceiling = c
		}
	}
	return ceiling
}

// Run steps until ctx is done, waiting as Step says or, while the server
// answers, until wake receives (new records to send). It returns nil when
// ctx is cancelled, and the error when the server rejects the token.
func (l *Loop) Run(ctx context.Context, wake <-chan struct{}) error {
	l.init()
	for {
		wait := l.Step(ctx)
		if l.rejected != nil {
			return l.rejected
		}
		if err := ctx.Err(); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		// While the server fails, new records do not cut the backoff
		// short: a fleet of agents would retry in step otherwise.
		w := wake
		if l.failures > 0 {
			w = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.Clock.After(wait):
		case <-w:
		}
	}
}
