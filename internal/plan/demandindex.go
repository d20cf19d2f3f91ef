package plan

import (
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// DemandIndex answers how long demand stood at or above a level between
// two instants (Above) from prefix sums over the demand history, one
// series per level asked, kept from call to call so that a replay of
// millions of steps does not walk a week of history at each.
//
// The sums stay valid because the history only changes in three ways
// (engine.Apply): a point is appended later than the last, the last
// point is rewritten in place, and points are dropped from the front. A
// point's segment is summed only once the next point exists (it is
// closed then and never changes); the last point's segment is read from
// the history at each question. So an index serves one history: another
// (a history loaded afresh, replaced or shortened) is caught by matching
// the first point and the last closed one already indexed, time and
// level, and the index starts over; a change to a closed point between
// them is not caught and gives wrong answers.
//
// The zero DemandIndex is ready to use. Its answers are those of a walk
// over the history: it only ever holds what the history says.
type DemandIndex struct {
	// at is the start of every point indexed, in order, and milli its
	// level; the history's first point is at[0] after each sync.
	at     fifo[time.Time]
	milli  fifo[int64]
	levels map[int64]*levelSums
	clock  uint64
}

// levelSums is the prefix sums for one level: cum[i] is how long demand
// stood at or above it over the segments of points 0 … i−1 of at (the
// segment of point i runs from at[i] to at[i+1]).
type levelSums struct {
	cum  fifo[time.Duration]
	used uint64
}

// fifo is a slice that loses items at the front as the history does:
// the room they leave is reused when the back runs out of it, rather
// than a larger array made (a replay drops and adds a point at nearly
// every step).
type fifo[T any] struct {
	buf []T
	off int
}

// items is what the fifo holds, oldest first; valid until the next push.
func (f *fifo[T]) items() []T { return f.buf[f.off:] }

func (f *fifo[T]) len() int { return len(f.buf) - f.off }

func (f *fifo[T]) drop(n int) { f.off += min(n, f.len()) }

func (f *fifo[T]) push(v T) {
	if len(f.buf) == cap(f.buf) && f.off > 0 && f.off >= f.len() {
		f.buf = f.buf[:copy(f.buf, f.buf[f.off:])]
		f.off = 0
	}
	f.buf = append(f.buf, v)
}

func (f *fifo[T]) reset() { f.buf, f.off = f.buf[:0], 0 }

// maxIndexLevels bounds the levels kept: the least recently asked goes
// first. A replay asks about a few at a time (the committed capacity and
// the machines placed on top of it), and moves on as the fleet changes.
const maxIndexLevels = 64

// sync lines the index up with pts (oldest first): drops the points no
// longer in front of pts, appends the new ones, and starts over when pts
// are not the same history.
func (x *DemandIndex) sync(pts []core.DemandPoint) {
	if len(pts) == 0 {
		x.reset()
		return
	}
	at := x.at.items()
	drop := sort.Search(len(at), func(i int) bool { return !at[i].Before(pts[0].At) })
	if drop == len(at) || !at[drop].Equal(pts[0].At) {
		x.reset()
	} else if drop > 0 {
		x.at.drop(drop)
		x.milli.drop(drop)
		for _, s := range x.levels {
			s.cum.drop(drop)
		}
	}
	at, milli := x.at.items(), x.milli.items()
	if k := len(at); k > len(pts) || k > 0 && (milli[0] != pts[0].Milli || !at[k-1].Equal(pts[k-1].At)) ||
		k > 1 && milli[k-2] != pts[k-2].Milli {
		x.reset()
	}
	if k := x.milli.len(); k > 0 {
		x.milli.items()[k-1] = pts[k-1].Milli // the last may have been rewritten
	}
	for _, p := range pts[x.at.len():] {
		x.at.push(p.At)
		x.milli.push(p.Milli)
	}
}

func (x *DemandIndex) reset() {
	x.at.reset()
	x.milli.reset()
	clear(x.levels)
}

// sums is level's prefix sums over every closed segment of pts (the
// index synced to them): len(cum) = len(pts).
func (x *DemandIndex) sums(pts []core.DemandPoint, level int64) []time.Duration {
	x.clock++
	s := x.levels[level]
	if s == nil {
		if x.levels == nil {
			x.levels = map[int64]*levelSums{}
		}
		if len(x.levels) >= maxIndexLevels {
			x.evict()
		}
		s = &levelSums{}
		x.levels[level] = s
	}
	s.used = x.clock
	if s.cum.len() == 0 {
		// New, or behind the front: any origin serves, only differences
		// are read.
		s.cum.reset()
		if cap(s.cum.buf) < len(pts) {
			// Room for the whole history and the points to come: a level
			// is built at once, not grown by doubling.
			s.cum.buf = make([]time.Duration, 0, len(pts)+len(pts)/4)
		}
		s.cum.push(0)
	}
	for i := s.cum.len() - 1; i+1 < len(pts); i++ {
		c := s.cum.items()[i]
		if pts[i].Milli >= level {
			c += pts[i+1].At.Sub(pts[i].At)
		}
		s.cum.push(c)
	}
	return s.cum.items()
}

// evict drops the level asked least recently.
func (x *DemandIndex) evict() {
	var oldest int64
	var at uint64
	first := true
	for l, s := range x.levels {
		if first || s.used < at || s.used == at && l < oldest {
			oldest, at, first = l, s.used, false
		}
	}
	delete(x.levels, oldest)
}

// Above is how long demand stood at or above level milli-GPUs between
// from and to, from ≤ to ≤ now (pts oldest first, each holding until the
// next, the last until now): the time before the first point counts as
// none.
func (x *DemandIndex) Above(pts []core.DemandPoint, level int64, from, to time.Time) time.Duration {
	if len(pts) == 0 || !to.After(from) {
		return 0
	}
	x.sync(pts)
	cum := x.sums(pts, level)
	return x.upTo(pts, cum, level, to) - x.upTo(pts, cum, level, from)
}

// upTo is how long demand stood at or above level from the first point
// to t, counted from cum's origin.
func (x *DemandIndex) upTo(pts []core.DemandPoint, cum []time.Duration, level int64, t time.Time) time.Duration {
	// The point in force at t: the last that starts at or before it.
	j := sort.Search(len(pts), func(i int) bool { return pts[i].At.After(t) }) - 1
	if j < 0 {
		return cum[0]
	}
	if pts[j].Milli >= level {
		return cum[j] + t.Sub(pts[j].At)
	}
	return cum[j]
}
