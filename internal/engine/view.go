package engine

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/capacity"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// The live view. A replay takes millions of steps over a fleet whose
// nodes seldom change (2% of the steps of a 200,000-job replay see a
// machine come or go), and each step changes a unit or two; building the
// whole picture at every step — every node's GPUs, every running unit's
// share of them — was most of a step's time. So the view built at one
// step is kept, and every change the engine makes to a unit (Apply,
// FinishUnit, Prune) updates it: the unit leaves the view's lists before
// the change (leave) and enters the one its new state calls for after
// (enter). Units appended to State.Units are taken in at the next Step
// (sync). Anything that changes which leases are nodes — a machine ready,
// reclaimed, released, failed — makes the next Step build afresh: sync
// notices it, and the On* handlers say so (State.changed).
//
// The view's lists are kept in the order a fresh build gives (State.Units
// order, by seq), so the scheduler sees the very picture it saw when
// every step built one: decisions do not change (TestDecisionHash).
// checkView compares the live view with a fresh build at every step; the
// engine's and the simulator's tests run with it on (CheckViews).

// place says which of the live view's lists holds a unit.
type place uint8

const (
	// outOfView: neither running nor waiting (finished, cancelled, new).
	outOfView place = iota
	// countedOnly: running, its parts counted in Lease.runs, but not all
	// of them on nodes (a machine leaving the fleet), so not in the
	// running list (neither preempted nor moved); its share of the parts
	// that are on nodes is taken from them all the same (heldParts).
	countedOnly
	// inRunning: in the view's running list, its share taken from nodes.
	inRunning
	// inQueue: in the view's queue.
	inQueue
)

// sync brings the live view up to date with changes made outside the
// engine's own functions that it can see cheaply: units appended to
// State.Units since it last looked are taken in. It reports false when
// the view cannot be kept — the units were reordered or removed other
// than by Prune, or the nodes changed (a lease became ready, ended or got
// a reclaim notice) — and the view must be built afresh.
func (sc *scratch) sync(st *State) bool {
	v := &sc.v
	if len(st.Units) < sc.nUnits || sc.nUnits > 0 && st.Units[sc.nUnits-1] != sc.lastUnit {
		return false
	}
	k := 0
	for _, l := range st.Leases {
		if isNode(l) {
			if k == len(v.leaseOf) || v.leaseOf[k] != l || l.node != k {
				return false
			}
			k++
		} else if l.node != -1 {
			return false
		}
	}
	if k != len(v.leaseOf) {
		return false
	}
	if len(st.Units) > sc.nUnits {
		st.stampLeases()
		leases := st.leaseIndex()
		for _, u := range st.Units[sc.nUnits:] {
			u.seq, u.where = sc.nextSeq, outOfView
			sc.nextSeq++
			st.setEstimate(u)
			v.enter(u, leases)
		}
		sc.nUnits, sc.lastUnit = len(st.Units), st.Units[len(st.Units)-1]
	}
	return true
}

// leave takes u out of st's live view before a change to its state or
// parts; enter puts it back as it is after the change. Both do nothing
// while the view is not live (the next Step builds afresh).
func (st *State) leave(u *Unit) {
	if sc := st.scratch; sc != nil && sc.live {
		if !sc.v.leave(u) {
			sc.live = false
		}
	}
}

// enter: see leave. leases maps the IDs of st.Leases to them.
func (st *State) enter(u *Unit, leases map[string]*Lease) {
	if sc := st.scratch; sc != nil && sc.live {
		sc.v.enter(u, leases)
	}
}

// enter adds u to the list its state calls for: a running unit is
// counted on the leases of its parts and, when they are all nodes, takes
// its share of them and joins the running list; a waiting one joins the
// queue.
func (v *view) enter(u *Unit, leases map[string]*Lease) {
	u.where = outOfView
	switch u.State {
	case core.JobRunning, core.JobCheckpointing:
		u.on = slices.Grow(u.on[:0], len(u.Parts))[:len(u.Parts)]
		onNodes := true
		for i, p := range u.Parts {
			l := leases[p.LeaseID]
			u.on[i] = l
			if l != nil {
				l.runs++
			}
			if l == nil || l.node < 0 {
				onNodes = false
			}
		}
		u.where = countedOnly
		if !onNodes {
			v.take(u, heldParts(u))
			return
		}
		u.where = inRunning
		var parts []sched.Part
		if len(u.Parts) > 0 {
			parts = make([]sched.Part, len(u.Parts))
			for i, p := range u.Parts {
				parts[i] = sched.Part{Node: u.on[i].node, GPUs: p.GPUs}
			}
		}
		v.take(u, parts)
		i := bySeq(v.runningOf, u.seq)
		v.running = slices.Insert(v.running, i, sched.Allocation{Unit: u.schedUnit(), Start: u.Start, LastCheckpoint: u.LastCheckpoint, Done: u.Done, Parts: parts})
		v.runningOf = slices.Insert(v.runningOf, i, u)
	case core.JobPending, core.JobPreempted, core.JobAdmitted:
		u.where = inQueue
		v.queue = slices.Insert(v.queue, bySeq(v.queue, u.seq), u)
	}
}

// leave undoes what enter did for u. It reports false when u is not
// where it says it is (a change made behind the engine's back): the view
// is then no longer to be trusted.
func (v *view) leave(u *Unit) bool {
	where := u.where
	u.where = outOfView
	switch where {
	case countedOnly, inRunning:
		for _, l := range u.on {
			if l != nil {
				l.runs--
			}
		}
		if where == countedOnly {
			v.give(u, heldParts(u))
			return true
		}
		i := bySeq(v.runningOf, u.seq) - 1
		if i < 0 || v.runningOf[i] != u {
			return false
		}
		v.give(u, v.running[i].Parts)
		v.running = slices.Delete(v.running, i, i+1)
		v.runningOf = slices.Delete(v.runningOf, i, i+1)
	case inQueue:
		i := bySeq(v.queue, u.seq) - 1
		if i < 0 || v.queue[i] != u {
			return false
		}
		v.queue = slices.Delete(v.queue, i, i+1)
	}
	return true
}

// heldParts are the parts of a countedOnly unit that are on nodes, by
// its leases as last resolved (Unit.on): the GPUs it holds that the
// scheduler could otherwise place on. A part on a machine leaving the
// fleet is not a node's; the others are, and stay taken until the run
// ends (a gang of several machines, one of them under a reclaim notice,
// runs on the others until the reclaim).
func heldParts(u *Unit) []sched.Part {
	var parts []sched.Part
	for i, l := range u.on {
		if l != nil && l.node >= 0 && i < len(u.Parts) {
			parts = append(parts, sched.Part{Node: l.node, GPUs: u.Parts[i].GPUs})
		}
	}
	return parts
}

// bySeq is the position in units (ordered by seq) of the first unit
// numbered after seq.
func bySeq(units []*Unit, seq uint64) int {
	return sort.Search(len(units), func(i int) bool { return units[i].seq > seq })
}

// take gives u's share of the nodes of parts to it: their GPUs' free
// capacity, the nodes' allocation and their lists of units.
func (v *view) take(u *Unit, parts []sched.Part) {
	r := &u.Job.Request
	end, known := estEnd(u)
	for _, p := range parts {
		occupy(&v.nodes[p.Node], r, p.GPUs)
		v.alloc[p.Node] += core.Milli(len(p.GPUs)) * r.MilliPerGPU
		v.addUse(u, p.Node, int64(len(p.GPUs))*int64(r.MilliPerGPU))
		v.on[p.Node] = append(v.on[p.Node], u)
		if known && end.After(v.end[p.Node]) {
			v.end[p.Node] = end
		}
	}
}

// estEnd is when u's current run is estimated to end (on its planned
// duration), if known.
func estEnd(u *Unit) (time.Time, bool) {
	if u.est <= 0 {
		return time.Time{}, false
	}
	return u.Start.Add(u.est), true
}

// give returns u's share of the nodes of parts: what take took
// (capacity.Give keeps a GPU shared while a fraction of it is taken).
func (v *view) give(u *Unit, parts []sched.Part) {
	r := &u.Job.Request
	end, known := estEnd(u)
	// Off the nodes' lists first (every entry: a unit may have two parts
	// on one node), so that what is left is the other units.
	for _, p := range parts {
		v.on[p.Node] = slices.DeleteFunc(v.on[p.Node], func(w *Unit) bool { return w == u })
	}
	for _, p := range parts {
		n := &v.nodes[p.Node]
		on := v.on[p.Node]
		v.alloc[p.Node] -= core.Milli(len(p.GPUs)) * r.MilliPerGPU
		v.addUse(u, p.Node, -int64(len(p.GPUs))*int64(r.MilliPerGPU))
		if err := capacity.Give(n, r, p.GPUs); err != nil {
			panic("engine: GPU capacity accounting broken on " + n.LeaseID + ": " + err.Error())
		}
		if known && !end.Before(v.end[p.Node]) {
			// It may have been the latest: find the latest of the rest.
			v.end[p.Node] = time.Time{}
			for _, w := range on {
				if e, ok := estEnd(w); ok && e.After(v.end[p.Node]) {
					v.end[p.Node] = e
				}
			}
		}
	}
}

// Prune removes finished units and ended leases from st, in order,
// calling unit and lease (when not nil) with each one removed, and keeps
// the live view: a caller that drops what is over to keep steps cheap
// (the simulator) calls it rather than filter the lists itself, which
// would make the next Step build afresh.
func Prune(st *State, unit func(*Unit), lease func(*Lease)) {
	sc := st.scratch
	synced := sc != nil && sc.live && len(st.Units) >= sc.nUnits && (sc.nUnits == 0 || st.Units[sc.nUnits-1] == sc.lastUnit)
	if synced && sc.ended == 0 {
		return // nothing ended through the engine since the last prune, and nothing else changed
	}
	if sc != nil {
		sc.ended = 0
	}
	kept := st.Units[:0]
	known, last := 0, (*Unit)(nil)
	n := 0
	if sc != nil {
		n = sc.nUnits
	}
	for i, u := range st.Units {
		if u.State.Final() {
			if u.where != outOfView {
				st.leave(u) // ended behind the engine's back
			}
			if unit != nil {
				unit(u)
			}
			continue
		}
		kept = append(kept, u)
		if i < n {
			known, last = known+1, u
		}
	}
	clear(st.Units[len(kept):]) // no pointers kept past the end
	st.Units = kept
	switch {
	case synced:
		sc.nUnits, sc.lastUnit = known, last
	case sc != nil:
		sc.live = false // changed behind the engine's back before: build afresh
	}
	leases := st.Leases[:0]
	for _, l := range st.Leases {
		if l.State.Final() {
			if lease != nil {
				lease(l)
			}
			continue
		}
		leases = append(leases, l)
	}
	clear(st.Leases[len(leases):])
	st.Leases = leases
}

// ended notes that a unit or a lease ended through the engine (Prune has
// something to remove).
func (st *State) ended() {
	if st.scratch != nil {
		st.scratch.ended++
	}
}

// checkViews turns checkView on for every build.
var checkViews bool

// CheckViews turns on (or off) a check at every Step that the live view
// is what a fresh build gives — nodes, GPUs, allocations, running and
// waiting units, the work counted per lease — panicking with the
// difference when it is not. For tests: it makes a step ten times as slow
// or more.
// It returns the setting before.
func CheckViews(on bool) (was bool) {
	was, checkViews = checkViews, on
	return was
}

// checkView compares st's live view, brought to now, with a fresh build.
func checkView(st *State, now time.Time) {
	live := &st.scratch.v
	nodeOf := make([]int, len(st.Leases))
	runs := make([]int, len(st.Leases))
	for i, l := range st.Leases {
		nodeOf[i], runs[i] = l.node, l.runs
	}
	var fresh scratch
	fresh.rebuild(st, now, false)
	f := &fresh.v
	f.refresh(now)
	var diffs []string
	diff := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	// Every unit in the view is planned on what the model says now
	// (durations.go): a finish that changed it re-planned its team.
	for _, u := range st.Units {
		if u.where != outOfView && u.est != st.Estimate(u) {
			diff("unit %s: planned on %s, the model says %s", u.Key(), u.est, st.Estimate(u))
		}
	}
	for i, l := range st.Leases {
		if l.node != nodeOf[i] || l.runs != runs[i] {
			diff("lease %s: node %d runs %d, fresh %d and %d", l.ID, nodeOf[i], runs[i], l.node, l.runs)
		}
		l.node, l.runs = nodeOf[i], runs[i]
	}
	if !slices.Equal(live.leaseOf, f.leaseOf) || !slices.Equal(live.cost, f.cost) || !slices.Equal(live.alloc, f.alloc) || !slices.EqualFunc(live.end, f.end, time.Time.Equal) {
		diff("nodes: leases, costs or allocations differ: %v %v, fresh %v %v", live.cost, live.alloc, f.cost, f.alloc)
	}
	for n := range min(len(live.nodes), len(f.nodes)) {
		if !reflect.DeepEqual(live.nodes[n], f.nodes[n]) {
			diff("node %d: %+v, fresh %+v", n, live.nodes[n], f.nodes[n])
		}
		a, b := slices.Clone(live.on[n]), slices.Clone(f.on[n])
		byKey := func(x, y *Unit) int { return strings.Compare(x.Key(), y.Key()) }
		slices.SortFunc(a, byKey)
		slices.SortFunc(b, byKey)
		if !slices.Equal(a, b) {
			diff("node %d: %d units on it, fresh %d", n, len(a), len(b))
		}
	}
	if !slices.Equal(live.runningOf, f.runningOf) || len(live.running) != len(f.running) {
		diff("running: %d units, fresh %d (or in another order)", len(live.runningOf), len(f.runningOf))
	} else {
		for i := range live.running {
			if !reflect.DeepEqual(live.running[i], f.running[i]) {
				diff("running %s: %+v, fresh %+v", live.running[i].Key(), live.running[i], f.running[i])
			}
		}
	}
	if !slices.Equal(live.queue, f.queue) || !slices.Equal(live.pendingOf, f.pendingOf) || !reflect.DeepEqual(live.pending, f.pending) && len(live.pending)+len(f.pending) > 0 {
		diff("queue: %d units, %d pending; fresh %d and %d", len(live.queue), len(live.pending), len(f.queue), len(f.pending))
	}
	if a, b := live.useByKey(), f.useByKey(); !maps.Equal(a, b) {
		diff("allocation per team and class: %v, fresh %v", a, b)
	}
	live.fill()
	f.fill()
	if !slices.Equal(live.paid, f.paid) {
		diff("paid: %v, fresh %v", live.paid, f.paid)
	}
	if len(diffs) > 0 {
		panic(fmt.Sprintf("engine: the live view at %s differs from a fresh build:\n%s", now.UTC().Format(time.RFC3339), strings.Join(diffs, "\n")))
	}
}

// useByKey is v.use by team and class, without the zero counts.
func (v *view) useByKey() map[teamClass]int64 {
	out := map[teamClass]int64{}
	for i, m := range v.use {
		if m != 0 {
			out[v.useKeys[i]] = m
		}
	}
	return out
}
