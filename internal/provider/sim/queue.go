package sim

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/provider"
)

type eventKind int

const (
	evReady eventKind = iota
	evFail
	evNotice
	evReclaim
	evAvail
)

// event is a change scheduled for a time. Events are never removed when
// a machine is released: live says whether one still applies.
type event struct {
	at   time.Time
	seq  uint64 // ties at one time go in scheduling order
	kind eventKind
	m    *machine
	// offer, available and limit, for evAvail.
	offer     *offerState
	available bool
	limit     int
}

// live reports whether e still applies to its machine.
func (e *event) live() bool {
	switch e.kind {
	case evReady, evFail:
		return e.m.m.State == provider.Provisioning
	case evNotice:
		return e.m.m.State == provider.Ready
	case evReclaim:
		return e.m.m.State == provider.Reclaiming && e.m.m.ReclaimAt.Equal(e.at)
	}
	return true
}

func (e *event) before(f *event) bool {
	if c := e.at.Compare(f.at); c != 0 {
		return c < 0
	}
	return e.seq < f.seq
}

// eventQueue is a binary min-heap of events by (at, seq).
type eventQueue []event

func (q *eventQueue) push(e event) {
	*q = append(*q, e)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{}
	h = h[:last]
	i := 0
	for {
		l, r, min := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].before(&h[min]) {
			min = l
		}
		if r < len(h) && h[r].before(&h[min]) {
			min = r
		}
		if min == i {
			break
		}
		h[i], h[min] = h[min], h[i]
		i = min
	}
	*q = h
	return top
}
