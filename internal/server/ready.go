package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

// ReadyFailures is how many attempts in a row (a reconcile or a tick)
// may fail before Ready reports the loop not ready. One failure is
// retried at the next tick; three in a row is a loop that is stuck.
const ReadyFailures = 3

// staleAfter is how long a leading loop may go without a successful tick
// before Ready reports it not ready: ten ticks, and at least a minute,
// as a tick that waits on a slow provider is not a stuck loop.
func staleAfter(tick time.Duration) time.Duration {
	return max(10*tick, time.Minute)
}

// health is what Ready reads: whether this replica leads, and how its
// recent attempts went. Run and lead write it; Ready, called from HTTP
// handlers, reads it.
type health struct {
	mu sync.Mutex
	// leading: this replica holds the leadership lock; since is when it
	// took it.
	leading bool
	since   time.Time
	// leader is the leader as last recorded: this replica's record
	// while it leads, else the one it read when it last found the lock
	// taken (Term 0: none known).
	leader store.Leadership
	// lastOK is the end of the last successful tick (zero: none yet).
	lastOK time.Time
	// failures counts the failed attempts since the last successful tick
	// or the last time another replica was found leading; err is the
	// latest.
	failures int
	err      error
}

func (h *health) led(rec store.Leadership) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading, h.since, h.leader = true, rec.Since, rec
}

// following: another replica leads (leader, as recorded); this one is
// ready when its store answers, whatever its own attempts did before.
func (h *health) following(leader store.Leadership) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading, h.failures, h.err, h.leader = false, 0, nil, leader
}

func (h *health) ticked(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastOK, h.failures, h.err = now, 0, nil
}

// failed records a failed attempt; the loop no longer leads (lead gave
// the lock up) until it takes the lock again.
func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = false
	h.failures++
	h.err = err
}

// Ready reports whether the control loop does its work: nil when this
// replica follows another leader, or leads and ticks. It is not ready
// when the last ReadyFailures attempts failed (a loop that fails every
// tick schedules nothing, whatever the store says), or when it has led
// for longer than ten ticks (at least a minute) without a successful
// tick. The error says which, with the latest failure.
func (l *Loop) Ready() error {
	now := l.cfg.Clock.Now()
	h := &l.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures >= ReadyFailures {
		return fmt.Errorf("control loop: the last %d attempts failed, the latest: %w", h.failures, h.err)
	}
	if !h.leading {
		return nil
	}
	last := h.since
	if h.lastOK.After(last) {
		last = h.lastOK
	}
	if stale := staleAfter(l.cfg.Tick); now.Sub(last) > stale {
		return fmt.Errorf("control loop: leading, but no successful tick for %s (more than %s)", now.Sub(last).Round(time.Second), stale)
	}
	return nil
}

// Replica returns this replica's name, whether it leads the control
// loop, and the leader as last recorded (api.Replica, for /readyz). A
// replica that lost the lead (a store error) says so at once; it names
// the new leader once it finds the lock taken.
func (l *Loop) Replica() (self string, leading bool, leader store.Leadership) {
	h := &l.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return l.cfg.Replica, h.leading, h.leader
}
