// Package clock gives the I/O loops of gpufleet their sense of time. Pure
// decision code never calls time.Now: it takes now as an argument, and the
// loops around it read an injected Clock, real in production and manual in
// tests and the simulator.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and wakes a caller after a delay.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now returns the current time.
func (Real) Now() time.Time { return time.Now() }

// After waits for d on the wall clock.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Manual is a clock that moves only when told to. Its After channels fire
// when Advance or Set passes their deadline.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

var _ Clock = (*Manual)(nil)

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// After returns a channel that receives the clock's time once it reaches
// now+d. A non-positive d fires at once.
func (m *Manual) After(d time.Duration) <-chan time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- m.now
		return ch
	}
	m.waiters = append(m.waiters, waiter{at: m.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock forward by d.
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now().Add(d)) }

// Set moves the clock to t (which may be earlier: a clock that jumps back
// is a case the loops must survive) and fires every waiter now due, in
// deadline order.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t
	sort.SliceStable(m.waiters, func(i, j int) bool { return m.waiters[i].at.Before(m.waiters[j].at) })
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if !w.at.After(t) {
			w.ch <- t
			continue
		}
		kept = append(kept, w)
	}
	m.waiters = kept
}

// Pending returns how many After channels have not fired yet.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiters)
}
