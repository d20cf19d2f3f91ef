package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/capacity"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Config is the policy: the scheduler's and the fleet manager's settings.
type Config struct {
	Sched sched.Config
	Fleet fleet.Config
	// NoAcquire stops renting for demand (the reserved base is still
	// kept) and NoRelease stops releasing: a static fleet.
	NoAcquire, NoRelease bool
	// LearnDurations plans units on the durations learned from history
	// (State.Estimate: estimates corrected by their team's record, runs
	// without one predicted from their team's command) rather than on
	// their users' estimates as given (durations.go).
	LearnDurations bool
}

// Place is a placement by lease ID.
type Place struct {
	Unit   string
	Parts  []Assigned
	Reason string
}

// Preempt is a preemption by lease ID.
type Preempt struct {
	Unit             string
	LeaseID          string
	For              string
	LostMilliSeconds int64
	Reason           string
}

// Decisions is everything one Step decided. Events holds each decision
// as an audit event, in the order they were made.
type Decisions struct {
	Now          time.Time
	Place        []Place
	Preempt      []Preempt
	Defer        []sched.Deferral
	Reservations []sched.Reservation
	// Move is consolidation: units checkpointed and restarted elsewhere so
	// their sparse machines empty.
	Move    []Place
	Waiting []sched.Wait
	Acquire []fleet.Acquisition
	Release []fleet.Release
	Kept    []fleet.Release
	// Renew are committed machines kept past a boundary that renew there
	// on another of their offer's terms (renewals).
	Renew []fleet.Renewal
	// Boundary is the next billing boundary of a committed machine with
	// work on it (zero: none): a replay steps just after it, so that the
	// renewal there is decided as a server's next tick would.
	Boundary time.Time
	Reclaims []fleet.Reclaim
	Alerts   []fleet.Alert
	// Cleared are the alerts whose condition ended this step (an idle
	// GPU at work again or gone, a zombie gone, a budget warning of a
	// month that ended): who keeps alerts open closes these.
	Cleared []fleet.Alert
	Ladder  map[string]fleet.LadderState
	Events  []core.Event
	// placeUnits, preemptUnits, moveUnits and deferUnits are the state's
	// units Place, Preempt, Move and Defer concern, by position, as Step
	// found them: Apply (after checking them) and the simulator take them
	// rather than search every unit for the keys.
	placeUnits, preemptUnits, moveUnits, deferUnits []*Unit
	// UtilBP is the allocated share of ready GPUs after the placements.
	UtilBP int64
	// DemandMilli is the GPU share allocated after this step plus the
	// share still waiting for a machine: Apply records it in the state's
	// demand history.
	DemandMilli int64
	// HalfLife is the fair-share half-life Step decided under
	// (sched.Config.FairShareHalfLife): Apply decays State.History by it
	// and records the use since State.HistoryAt (history.go), so the
	// history Step's scheduler reads is the one Apply keeps. Zero
	// (decisions not made by Step): Apply records no history.
	HalfLife time.Duration
}

// view is the scheduler's picture of the state: the ready leases as
// nodes with the running work taken from their GPUs, the running units
// on them and the pending ones. It is built afresh when the fleet's nodes
// change and kept up to date in between by every change the engine makes
// to units (view.go: a replay takes millions of steps, and building the
// whole picture at each was most of its time).
type view struct {
	nodes   []core.Node
	cost    []core.Micros
	paid    []time.Time
	leaseOf []*Lease
	// alloc is the milli-GPU allocated on each node; on lists the running
	// units on each node (a unit on two GPUs of a node once per part);
	// end is the latest estimated end of their work (zero: none known).
	alloc   []core.Milli
	on      [][]*Unit
	end     []time.Time
	running []sched.Allocation
	// runningOf is the state's unit behind each running entry.
	runningOf []*Unit
	// queue is every unit that waits (pending, preempted or admitted),
	// deferred or not; pending are those of them not deferred at now.
	queue   []*Unit
	pending []sched.Unit
	// pendingOf is the state's unit behind each pending entry.
	pendingOf []*Unit
	// latest, units and cand are drainCandidates' working space.
	latest []time.Time
	units  []core.Milli
	cand   []bool
	// now is the time the view was last brought to; filled says fill has
	// run since.
	now    time.Time
	filled bool
	// use is the milli-GPU the running units hold per team and GPU class
	// (useKeys[i] is the team and class of use[i], useIx the index of
	// each): the fair-share history's count (history.go). Keys are only
	// ever added, so an index stays valid across rebuilds.
	use     []int64
	useKeys []teamClass
	useIx   map[teamClass]int
}

// scratch holds the live view and the buffers Step works in, kept in the
// State between steps. Nothing Step returns points into it.
type scratch struct {
	v     view
	gpus  []core.GPU
	parts []sched.Part
	alloc []core.Milli
	// machines is Step's list for the fleet manager; info the
	// scheduler's for the pending units.
	machines []fleet.Machine
	info     []sched.Waiting
	// live says v reflects the state: built, and kept up to date by the
	// engine's changes since (view.go). nUnits and lastUnit are how many
	// of State.Units the view knows and the last of them (units appended
	// after it are taken in at the next Step); nextSeq numbers them.
	live     bool
	nUnits   int
	lastUnit *Unit
	nextSeq  uint64
	// ended counts the units and leases ended through the engine since
	// the last Prune.
	ended int
	// gen is the last stampLeases stamp; byID maps the IDs of byIDOf (a
	// copy of State.Leases as it was, with byIDIDs their IDs then) to
	// them; empty byIDOf: rebuild it.
	gen     uint64
	byID    map[string]*Lease
	byIDOf  []*Lease
	byIDIDs []string
	// sched is the scheduler's own working space.
	sched sched.Scratch
	// used is v.use as the last Apply left it, valid (usedOK) while
	// usedAt is State.HistoryAt: the allocation in force since then
	// (history.go).
	used   []int64
	usedAt time.Time
	usedOK bool
	// demand answers how long State.Demand stood above a level, for the
	// renewal test and the fleet manager's outlook, without walking the
	// history at every step (plan.DemandIndex).
	demand plan.DemandIndex
}

// scratchOf returns st's scratch space, made on first use.
func (st *State) scratchOf() *scratch {
	if st.scratch == nil {
		st.scratch = &scratch{}
	}
	return st.scratch
}

// build returns st's view as of now: the live one brought up to date
// (view.go), or, when the nodes changed or the view is not live, one
// built afresh.
func build(st *State, now time.Time) *view {
	sc := st.scratchOf()
	if !sc.live || !sc.sync(st) {
		sc.rebuild(st, now, true)
	}
	sc.v.refresh(now)
	if checkViews {
		checkView(st, now)
	}
	return &sc.v
}

// rebuild builds sc's view afresh: ready leases become nodes, running
// units take their share of them, waiting units queue. With register it
// becomes st's live view: the units are numbered and placed in its lists.
// Without, it is a fresh picture for comparison (checkView).
func (sc *scratch) rebuild(st *State, now time.Time, register bool) {
	// A new view over the old one's storage: a field not named here
	// starts from zero, as in a view made afresh.
	old := sc.v
	gen := st.stampLeases()
	sc.v = view{nodes: old.nodes[:0], leaseOf: old.leaseOf[:0], cost: old.cost[:0], paid: old.paid[:0], alloc: old.alloc[:0], on: old.on[:0], end: old.end[:0],
		running: old.running[:0], runningOf: old.runningOf[:0], queue: old.queue[:0], pending: old.pending[:0], pendingOf: old.pendingOf[:0],
		latest: old.latest, units: old.units, cand: old.cand, now: now,
		use: old.use, useKeys: old.useKeys, useIx: old.useIx}
	v := &sc.v
	clear(v.use)
	gpuTotal := 0
	for _, l := range st.Leases {
		gpuTotal += l.Offer.GPUs
	}
	// One backing array for every node's GPUs; the nodes keep pointing
	// into it, so it must not move while they are added.
	gpus := slices.Grow(sc.gpus[:0], gpuTotal)
	for _, l := range st.Leases {
		l.node, l.runs = -1, 0
		if !isNode(l) {
			continue
		}
		l.node = len(v.nodes)
		n := core.Node{LeaseID: l.ID, OfferID: l.Offer.ID, GPUModel: l.Offer.GPUModel, GPUMemMiB: l.Offer.GPUMemMiB,
			Spot: l.Mode == core.Spot, Committed: l.Plan.Committed(), Joined: IsJoinedLease(l.ID),
			Accelerator: l.Offer.Accelerator, Capability: l.Offer.Capability, SliceMilli: l.Offer.SliceMilli}
		if short := l.Offer.ShortestCommitted(); n.Committed && short != nil {
			n.Renewal = time.Duration(short.Term) * time.Second
		}
		first := len(gpus)
		for g := 0; g < l.Offer.GPUs; g++ {
			// A slice is a GPU already shared down to its share: only
			// shares fit on it (see core.Node).
			gpus = append(gpus, core.GPU{Index: g, FreeMilli: l.Offer.MilliPerGPU(), FreeMemMiB: l.Offer.MemPerGPUMiB(), Shared: l.Offer.SliceMilli > 0})
		}
		n.GPUs = gpus[first:len(gpus):len(gpus)]
		v.nodes = append(v.nodes, n)
		v.leaseOf = append(v.leaseOf, l)
		v.cost = append(v.cost, marginalGPUHour(l))
		v.paid = append(v.paid, time.Time{})
		v.alloc = append(v.alloc, 0)
		v.end = append(v.end, time.Time{})
		if len(v.on) < cap(v.on) {
			v.on = v.on[:len(v.on)+1]
			v.on[len(v.on)-1] = v.on[len(v.on)-1][:0]
		} else {
			v.on = append(v.on, nil)
		}
	}
	sc.gpus = gpus
	// The running units' parts share one backing array too (a part list
	// is cut from it with its capacity capped, so no append spills into
	// a neighbour's).
	parts := sc.parts[:0]
	for i, u := range st.Units {
		if register {
			st.setEstimate(u)
		}
		where := outOfView
		switch u.State {
		case core.JobRunning, core.JobCheckpointing:
			where = countedOnly
			first := len(parts)
			ok := true
			for i := range u.Parts {
				l := st.partLease(u, i, gen)
				if l != nil {
					l.runs++ // work on it, a node or not (Apply's idle marks)
				}
				if l == nil || l.node < 0 {
					ok = false // on a machine leaving the fleet: not schedulable capacity
					continue
				}
				parts = append(parts, sched.Part{Node: l.node, GPUs: u.Parts[i].GPUs})
			}
			if !ok {
				// Not an allocation the scheduler may preempt or move, but
				// the GPUs it holds on nodes (a gang with a machine under a
				// reclaim notice) are held until its run ends: taken, or
				// other work would be placed on them.
				v.take(u, parts[first:])
				parts = parts[:first]
				break
			}
			where = inRunning
			a := sched.Allocation{Unit: u.schedUnit(), Start: u.Start, LastCheckpoint: u.LastCheckpoint, Done: u.Done}
			if len(parts) > first {
				a.Parts = parts[first:len(parts):len(parts)]
			}
			v.take(u, a.Parts)
			v.running = append(v.running, a)
			v.runningOf = append(v.runningOf, u)
		case core.JobPending, core.JobPreempted, core.JobAdmitted:
			where = inQueue
			v.queue = append(v.queue, u)
		}
		if register {
			u.seq, u.where = uint64(i), where
		}
	}
	sc.parts = parts
	if register {
		sc.live, sc.nUnits, sc.nextSeq, sc.lastUnit = true, len(st.Units), uint64(len(st.Units)), nil
		if len(st.Units) > 0 {
			sc.lastUnit = st.Units[len(st.Units)-1]
		}
	}
}

// isNode says whether the lease is schedulable capacity: ready, not
// ended and not under a reclaim notice.
func isNode(l *Lease) bool {
	return !l.State.Final() && !l.ReadyAt.IsZero() && l.ReclaimAt.IsZero()
}

// refresh brings the view's time-bound parts to now: the pending units
// are the queued ones not deferred past now, and what is paid on each
// node is worked out again when asked for (fill).
func (v *view) refresh(now time.Time) {
	v.now, v.filled = now, false
	v.pending, v.pendingOf = v.pending[:0], v.pendingOf[:0]
	for _, u := range v.queue {
		if u.DeferredUntil.After(now) {
			continue
		}
		su := u.schedUnit()
		if u.NoSpot && u.Job.Interruptible {
			// Keep it off spot: the scheduler sees it as non-interruptible.
			j := *su.Job
			j.Interruptible = false
			su.Job = &j
		}
		v.pending = append(v.pending, su)
		v.pendingOf = append(v.pendingOf, u)
	}
}

// fill works out what is paid on each node: on a committed one, up to the
// boundary after the latest estimated end of its work (or now); on
// others, nothing. Only scheduling and consolidation read it, so a step
// with nothing pending and nothing to drain (most steps) skips it. It
// does its work once per step.
func (v *view) fill() {
	if v.filled {
		return
	}
	v.filled = true
	now := v.now
	for n, l := range v.leaseOf {
		v.paid[n] = time.Time{}
		if !l.Plan.Committed() {
			continue
		}
		until := now
		if v.end[n].After(until) {
			until = v.end[n]
		}
		b, err := l.paidWork.PaidUntil(l.Plan, l.Start, until)
		if err != nil {
			b = time.Time{}
		}
		v.paid[n] = b
	}
}

// occupy takes a running unit's share from a node's GPUs, through the
// capacity module that the scheduler also uses. The units on a node were
// placed by the scheduler on this same accounting, so a refusal means the
// state is corrupt: panic rather than decide on it.
func occupy(n *core.Node, r *core.Request, gpus []int) {
	if err := capacity.Take(n, r, gpus); err != nil {
		panic("engine: GPU capacity accounting broken on " + n.LeaseID + ": " + err.Error())
	}
}

// marginalGPUHour is what one more GPU-hour on l costs: nothing on a
// committed term (it is paid whatever happens), else the plan's hourly
// price per whole GPU (a quarter-GPU slice's price times four).
func marginalGPUHour(l *Lease) core.Micros {
	if l.Plan.Committed() {
		return 0
	}
	return fleet.GPUHour(l.Plan, l.Offer)
}

// shapes lists the distinct machine shapes of the offers, for the
// scheduler's single-machine rule; computed once per offer list (a cache,
// the one thing Step writes to st).
func (st *State) shapes() sched.MachineShapes {
	if len(st.shapesOf) == len(st.Offers) && (len(st.Offers) == 0 || &st.shapesOf[0] == &st.Offers[0]) {
		return st.machineShapes
	}
	var out sched.MachineShapes
	for i := range st.Offers {
		s := sched.MachineShape{Hardware: st.Offers[i].Hardware(), GPUs: st.Offers[i].GPUs}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	st.shapesOf, st.machineShapes = st.Offers, out
	return out
}

// Step decides everything for now. It does not change st, beyond its
// working marks: the live view, and whether units are planned on learned
// durations (cfg.LearnDurations: durations.go).
func Step(st *State, now time.Time, cfg Config) Decisions {
	st.useLearning(cfg.LearnDurations)
	v := build(st, now)
	sc := st.scratchOf()
	d := Decisions{Now: now, HalfLife: cfg.Sched.FairShareHalfLife()}
	if len(v.pending) > 0 {
		v.fill() // Schedule decides nothing without pending work
	}
	// What the scheduler knows of each pending unit's wait: its
	// deadline's slack and its wait target are counted from these.
	info := sc.info[:0]
	for _, u := range v.pendingOf {
		info = append(info, sched.Waiting{Since: u.Since, Done: u.Done})
	}
	sc.info = info
	// pendingUnit and runningUnit (below) find the state's unit behind a
	// unit the scheduler decided on, among the pending or the running ones.
	var pendingOf, runningOf map[sched.Unit]*Unit
	pendingUnit := func(su sched.Unit) *Unit { return findUnit(su, v.pending, v.pendingOf, &pendingOf) }
	fcfg := cfg.Fleet.Defaults()
	var rentCost func(sched.Unit) core.Micros
	if !cfg.NoAcquire {
		rentCost = rentCosts(st, now, pendingUnit, fcfg, cfg.Sched.Defaults().RiskLead)
	}
	sd := sched.Schedule(&sched.State{Now: now, Nodes: v.nodes, Running: v.running, Pending: v.pending, PendingInfo: info, Teams: st.Teams,
		History: st.History, Spent: st.Spent, NodeCost: v.cost, NodePaidUntil: v.paid, RentCost: rentCost, TimeOfUse: st.TimeOfUse, Machines: st.shapes(), Scratch: &sc.sched}, cfg.Sched)
	event := func(kind, subject, reason string) {
		d.Events = append(d.Events, core.Event{At: now, Kind: kind, Subject: subject, Reason: reason})
	}
	// alloc is each node's allocated milli after this step; leases that
	// are not nodes run nothing the scheduler counts.
	alloc := append(sc.alloc[:0], v.alloc...)
	sc.alloc = alloc
	runningUnit := func(su sched.Unit) *Unit {
		if runningOf == nil {
			runningOf = make(map[sched.Unit]*Unit, len(v.running))
			for i, a := range v.running {
				runningOf[a.Unit] = v.runningOf[i]
			}
		}
		return runningOf[su]
	}
	for _, p := range sd.Preemptions {
		d.preemptUnits = append(d.preemptUnits, runningUnit(p.Victim.Unit))
		node := p.Victim.Parts[0].Node
		lease := v.leaseOf[node].ID
		d.Preempt = append(d.Preempt, Preempt{Unit: p.Victim.Key(), LeaseID: lease, For: p.For, LostMilliSeconds: p.LostMilliSeconds, Reason: p.Reason})
		alloc[node] -= p.Victim.Milli()
		event("preempt", p.Victim.Key(), p.Reason)
	}
	for _, p := range sd.Placements {
		d.placeUnits = append(d.placeUnits, pendingUnit(p.Unit))
		pl := Place{Unit: p.Unit.Key(), Reason: p.Reason}
		for _, part := range p.Parts {
			l := v.leaseOf[part.Node]
			pl.Parts = append(pl.Parts, Assigned{LeaseID: l.ID, GPUs: part.GPUs})
			alloc[part.Node] += core.Milli(len(part.GPUs)) * p.Unit.Job.Request.MilliPerGPU
		}
		d.Place = append(d.Place, pl)
		event("place", pl.Unit, p.Reason)
	}
	for _, df := range sd.Deferrals {
		d.deferUnits = append(d.deferUnits, pendingUnit(df.Unit))
		d.Defer = append(d.Defer, df)
		event("defer", df.Unit.Key(), df.Reason)
	}
	for _, r := range sd.Reservations {
		d.Reservations = append(d.Reservations, r)
		event("reserve", r.Unit.Key(), r.Reason)
	}
	d.Waiting = sd.Waiting
	var moves []sched.Move
	if !cfg.Fleet.NoConsolidation && !cfg.NoRelease {
		schedState := &sched.State{Now: now, Nodes: v.nodes, Running: v.running, Pending: v.pending, NodeCost: v.cost, NodePaidUntil: v.paid, Scratch: &sc.sched}
		drain := drainCandidates(v, alloc, st.Demand, &sc.demand, st.Offers, now, fcfg)
		moves = sched.Consolidate(schedState, sd, drain, cfg.Sched)
		for _, m := range moves {
			d.moveUnits = append(d.moveUnits, runningUnit(m.Unit))
			mv := Place{Unit: m.Unit.Key(), Reason: m.Reason}
			for _, part := range m.To {
				l := v.leaseOf[part.Node]
				mv.Parts = append(mv.Parts, Assigned{LeaseID: l.ID, GPUs: part.GPUs})
				alloc[part.Node] += core.Milli(len(part.GPUs)) * m.Unit.Job.Request.MilliPerGPU
			}
			alloc[m.From] -= m.Unit.Milli()
			d.Move = append(d.Move, mv)
			event("move", mv.Unit, m.Reason)
		}
	}
	var capMilli, used core.Milli
	for i, n := range v.nodes {
		capMilli += n.CapMilli()
		used += alloc[i]
	}
	if capMilli > 0 {
		d.UtilBP = int64(used) * 10000 / int64(capMilli)
	}
	d.DemandMilli = int64(used)
	for _, w := range sd.Waiting {
		d.DemandMilli += int64(w.Unit.Milli())
	}
	d.Renew, d.Boundary = renewals(v, alloc, now)
	for _, r := range d.Renew {
		event("renewed", r.LeaseID, r.Reason)
	}
	machines := sc.machines[:0]
	for _, l := range st.Leases {
		if l.State.Final() {
			continue
		}
		var a core.Milli
		if l.node >= 0 {
			a = alloc[l.node]
		}
		idle := l.IdleSince
		if a > 0 {
			idle = time.Time{}
		} else if idle.IsZero() {
			idle = now
		}
		machines = append(machines, fleet.Machine{Lease: &l.Lease, Offer: l.Offer, Plan: l.Plan, ReadyAt: l.ReadyAt, AllocMilli: a, IdleSince: idle, ReclaimAt: l.ReclaimAt, For: l.For, Paid: &l.paidNow})
	}
	sc.machines = machines
	d.Acquire = append(d.Acquire, fleet.ReservedBase(now, machines, st.Offers, st.Refused, cfg.Fleet)...)
	// Acquire rents only for waiting work: with none (most steps) it has
	// nothing to decide, and its set-up — the machines on their way, the
	// budgets, the outlook — is skipped.
	if len(sd.Waiting) > 0 {
		freeing := freedFirst(v, &sd, moves, st.shapes(), rentCost, fcfg.WaitTarget, now, now.Add(fcfg.SoonestReady()))
		waiting := demand(v, sd.Waiting, freeing, now, cfg.Sched)
		// Machines that joined by hand are there already: waiting work
		// takes them before anything is rented.
		if len(st.Joined) > 0 {
			var joined []fleet.Acquisition
			joined, waiting = fleet.AcquireJoined(now, waiting, st.Joined, budgets(st), cfg.Fleet)
			d.Acquire = append(d.Acquire, joined...)
		}
		if !cfg.NoAcquire && len(waiting) > 0 {
			d.Acquire = append(d.Acquire, fleet.Acquire(now, waiting, machines, st.Offers, budgets(st), d.UtilBP, fleet.NewOutlook(now, st.Demand, &sc.demand), st.Refused, cfg.Fleet)...)
		}
	}
	if !cfg.NoAcquire {
		d.Acquire = append(d.Acquire, fleet.Prescale(now, machines, d.Acquire, st.Offers, st.Demand, st.Refused, cfg.Fleet)...)
	}
	for _, a := range d.Acquire {
		event("acquire", a.Offer.ID, a.Reason)
	}
	if !cfg.NoRelease {
		rs := fleet.Releases(now, machines, nil, cfg.Fleet)
		kept := rs[:0] // the kept ones, compacted in place (most are kept)
		for _, r := range rs {
			if r.Keep {
				kept = append(kept, r)
				continue
			}
			d.Release = append(d.Release, r)
			event("release", r.LeaseID, r.Reason)
		}
		if len(kept) > 0 {
			d.Kept = kept
		}
	}
	d.Ladder, d.Alerts = fleet.Ladder(now, st.Readings, st.Ladder, cfg.Fleet)
	d.Cleared = fleet.Cleared(st.Ladder, d.Ladder)
	budget, ended := budgetAlerts(st, now)
	d.Alerts = append(d.Alerts, budget...)
	d.Cleared = append(d.Cleared, ended...)
	for _, a := range d.Alerts {
		event(a.Kind, a.Unit, a.Reason)
	}
	return d
}

// drainCandidates are the machines worth emptying, whose running work
// would keep them past their next billing boundary for longer than
// moving it costs. Two kinds, sparsest first within each: machines not
// on a committed term (a paid term saves nothing when emptied) allocated
// below the scale-in share, whose work may go anywhere; and, while the
// committed machines have GPUs free and the last day's demand never
// needed more than them, any machine whose boundary comes within
// drainLead, whose work may go only onto committed time paid past its
// end (sched.Drain.OntoPaid) — so that work started on dearer or shorter
// terms while the committed ones were full ends up on them once demand
// has fallen below them, rather than renewing its machine beside idle
// paid GPUs. Not while the day's peak stood above them: work moved there
// would take room the next climb needs — unless the candidate is itself a
// committed machine that the day's demand needed too seldom to pay for
// its renewal (fleet.BreakEvenBP): then it goes, and the rare climb is
// rented for when it comes.
func drainCandidates(v *view, alloc []core.Milli, history []fleet.DemandPoint, ix *plan.DemandIndex, offers []core.Offer, now time.Time, cfg fleet.Config) []sched.Drain {
	type c struct {
		node  int
		paid  bool
		share int64
	}
	var cs []c
	// Find the candidates before looking at what runs where (most steps
	// have none), and look only at the work on them.
	cand := slices.Grow(v.cand[:0], len(v.nodes))[:len(v.nodes)]
	v.cand = cand
	var idleCommitted, committed int64
	for n, l := range v.leaseOf {
		if l.Plan.Committed() {
			committed += int64(v.nodes[n].CapMilli())
			idleCommitted += int64(v.nodes[n].CapMilli() - alloc[n])
		}
	}
	// spare is what is free on the committed machines, for the renewal
	// test below when the day's peak closes them to other moves.
	spare, peaked := idleCommitted, false
	if idleCommitted > 0 && demandAbove(history, now.Add(-drainLookback), committed) {
		// The last day's demand needed more than the committed machines:
		// what is free on them now may be needed again.
		idleCommitted, peaked = 0, true
	}
	found := false
	for n, l := range v.leaseOf {
		// share < ScaleInBP, share being ⌊alloc·10000/cap⌋: the test at
		// every node of every step, without the division.
		cand[n] = alloc[n] != 0 && (idleCommitted > 0 ||
			!l.Plan.Committed() && int64(alloc[n])*10000 < cfg.ScaleInBP*max(int64(v.nodes[n].CapMilli()), 1) ||
			peaked && l.Plan.Committed() && dueSoon(l, now))
		found = found || cand[n]
	}
	if !found {
		return nil
	}
	latest := slices.Grow(v.latest[:0], len(v.nodes))[:len(v.nodes)]
	units := slices.Grow(v.units[:0], len(v.nodes))[:len(v.nodes)]
	clear(latest)
	clear(units)
	v.latest, v.units = latest, units
	for _, a := range v.running {
		if len(a.Parts) != 1 || !cand[a.Parts[0].Node] {
			continue
		}
		n := a.Parts[0].Node
		if end, ok := a.EstEnd(); ok && end.After(latest[n]) {
			latest[n] = end
		}
		units[n] += a.Milli()
	}
	for n, l := range v.leaseOf {
		capMilli := int64(v.nodes[n].CapMilli())
		if !cand[n] {
			continue
		}
		share := int64(alloc[n]) * 10000 / max(capMilli, 1)
		paid, err := l.paidNow.PaidUntil(l.Plan, l.Start, now)
		if err != nil || !latest[n].After(paid) {
			continue // it empties by itself before the next boundary
		}
		// Machine time saved (whole machine, past the boundary) against the
		// GPU time the moves cost, both at this machine's GPU price.
		saved := int64(latest[n].Sub(paid)/time.Second) * capMilli
		cost := int64(cfg.MoveOverhead/time.Second) * int64(units[n])
		if saved <= cost {
			continue
		}
		if !l.Plan.Committed() && share < cfg.ScaleInBP {
			cs = append(cs, c{n, false, share})
		} else if paid.Sub(now) <= drainLead && int64(units[n]) <= idleCommitted {
			idleCommitted -= int64(units[n])
			cs = append(cs, c{n, true, share})
		} else if peaked && l.Plan.Committed() && paid.Sub(now) <= drainLead && int64(units[n]) <= spare-(capMilli-int64(alloc[n])) &&
			timeAbove(ix, history, now.Add(-drainLookback), now, committed-capMilli) <= time.Duration(core.MulDivHalfEven(int64(drainLookback), fleet.BreakEvenBP(l.Offer, l.Plan, offers), 10000)) {
			// Without it, the committed machines would have fallen short
			// too seldom over the day to pay for its term.
			spare -= int64(units[n]) + capMilli - int64(alloc[n])
			committed -= capMilli
			cs = append(cs, c{n, true, share})
		}
	}
	if len(cs) == 0 {
		return nil
	}
	v.fill() // the paid time onto which OntoPaid work may go
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].paid != cs[j].paid {
			return !cs[i].paid
		}
		if cs[i].share != cs[j].share {
			return cs[i].share < cs[j].share
		}
		return cs[i].node < cs[j].node
	})
	out := make([]sched.Drain, len(cs))
	for i, x := range cs {
		out[i] = sched.Drain{Node: x.node, OntoPaid: x.paid}
	}
	return out
}

// rentCosts answers sched.State.RentCost for this step (the scheduler
// asks once per unit it schedules): what renting for the unit alone would
// cost per useful GPU-hour (fleet.RentCost). Work of a tier whose wait
// target is zero (it never waits for cheaper capacity: the
// autoscaler-style baselines), work that has waited past its tier's wait
// target and rentWait more (the machine rented for it did not come, or
// went to others), and work with a deadline it could miss by waiting
// that long (its latest start, less lead, comes before then; or it has no
// estimate to tell) gets no such limit: it takes a pay-as-you-go machine
// rather than wait. The wait counts from when the unit last became
// pending or, if later, from the end of its deferral: hours deferred for
// a cheaper tariff are not hours waited for capacity.
func rentCosts(st *State, now time.Time, pendingUnit func(sched.Unit) *Unit, fcfg fleet.Config, lead time.Duration) func(sched.Unit) core.Micros {
	return func(su sched.Unit) core.Micros {
		u := pendingUnit(su)
		if u == nil {
			return 0
		}
		target := fcfg.WaitTarget[su.Job.Tier]
		since := u.Since
		if u.DeferredUntil.After(since) {
			since = u.DeferredUntil
		}
		if target == 0 || now.Sub(since) >= target+rentWait {
			return 0
		}
		if j := su.Job; !j.Deadline.IsZero() {
			latest := j.Deadline.Add(-sched.Remaining(j, u.Done, 0))
			if j.EstDuration <= 0 || latest.Before(since.Add(target+rentWait+lead)) {
				return 0
			}
		}
		return fleet.RentCost(now, fleet.Demand{Unit: su, Since: u.Since, NoSpot: u.NoSpot}, st.Offers, st.Refused, fcfg)
	}
}

// rentWait is how long past its tier's wait target work waits for a
// machine rented for it before it takes a pay-as-you-go machine anyway: a
// few provisioning delays.
const rentWait = 15 * time.Minute

// drainLead is how long before its billing boundary a machine whose work
// could go onto paid committed time is emptied: early enough for the
// release rule to let it go at that boundary, late enough that the paid
// time it would fill is not taken by work that comes meanwhile.
const drainLead = 30 * time.Minute

// drainLookback is how far back demand must have stayed within the
// committed machines before work moves onto their free GPUs: a day, one
// diurnal cycle.
const drainLookback = 24 * time.Hour

// demandAbove reports whether demand stood above level at any time since
// from (pts oldest first, each holding until the next).
func demandAbove(pts []fleet.DemandPoint, from time.Time, level int64) bool {
	for i := len(pts) - 1; i >= 0; i-- {
		if pts[i].Milli > level {
			return true
		}
		if !pts[i].At.After(from) {
			return false
		}
	}
	return false
}

// dueSoon: l's paid time runs out within drainLead.
func dueSoon(l *Lease, now time.Time) bool {
	paid, err := l.paidNow.PaidUntil(l.Plan, l.Start, now)
	return err == nil && paid.Sub(now) <= drainLead
}

// timeAbove is how long demand stood above level between from and now
// (pts oldest first, each holding until the next, the last until now),
// read through ix: at or above the next milli-GPU.
func timeAbove(ix *plan.DemandIndex, pts []fleet.DemandPoint, from, now time.Time, level int64) time.Duration {
	return ix.Above(pts, level+1, from, now)
}

// demand lists the waiting units with when they started waiting and,
// under a deadline-aware policy (not sched.Config.NoDeadlines), by when a
// machine must be rented for them: their latest start (deadline less the
// work left, p99 wait target) less the scheduler's lead.
func demand(v *view, waiting []sched.Wait, freeing map[sched.Unit]bool, now time.Time, cfg sched.Config) []fleet.Demand {
	cfg = cfg.Defaults()
	out := make([]fleet.Demand, 0, len(waiting))
	if len(waiting) == 0 {
		return out
	}
	// Only pending units wait: look them up among those (the last of a
	// job and shard, as a map over every unit would), by job id and
	// shard rather than by key, which is a string made on each call for
	// a shard.
	type unitID struct {
		job   string
		shard int
	}
	byID := make(map[unitID]*Unit, len(v.pendingOf))
	for _, u := range v.pendingOf {
		byID[unitID{u.Job.ID, u.Shard}] = u
	}
	for _, w := range waiting {
		u := byID[unitID{w.Unit.Job.ID, w.Unit.Shard}]
		since := now
		noSpot := false
		var info sched.Waiting
		if u != nil {
			since, noSpot = u.Since, u.NoSpot
			info = sched.Waiting{Since: u.Since, Done: u.Done}
		}
		d := fleet.Demand{Unit: w.Unit, Since: since, NoSpot: noSpot, Freeing: freeing[w.Unit]}
		if !cfg.NoDeadlines {
			if at, ok := sched.LatestStart(w.Unit.Job, info, cfg); ok {
				d.StartBy, d.RentBy = at, at.Add(-cfg.RiskLead)
			}
		}
		out = append(out, d)
	}
	return out
}

func budgets(st *State) map[string]fleet.Budget {
	out := map[string]fleet.Budget{}
	for _, t := range st.Teams {
		out[t.ID] = fleet.Budget{Limit: t.MonthlyBudget, Spent: st.Spent[t.ID]}
	}
	return out
}

// budgetAlerts warns, once a month, each team past 80% of its monthly
// budget, and ends the warnings of the months before now's.
func budgetAlerts(st *State, now time.Time) (out, ended []fleet.Alert) {
	month := BudgetMonth(now)
	for k := range st.BudgetAlerted {
		if team, m, ok := strings.Cut(k, "@"); !ok || m != month {
			ended = append(ended, fleet.Alert{Kind: "budget", Team: team})
		}
	}
	slices.SortFunc(ended, func(a, b fleet.Alert) int { return strings.Compare(a.Team, b.Team) })
	for _, t := range st.Teams {
		if t.MonthlyBudget <= 0 || st.BudgetAlerted[t.ID+"@"+month] {
			continue
		}
		start, end := billing.MonthBounds(now, time.UTC)
		b := billing.Budget(t, st.Spent[t.ID], start, end, now)
		if b.Alert {
			out = append(out, fleet.Alert{Kind: "budget", Team: t.ID, Reason: fmt.Sprintf("team %s has spent %s of its %s budget (%d.%02d%%); at %s per hour it projects %s this month",
				t.ID, b.Spent, b.Budget, b.SpentBP/100, b.SpentBP%100, b.BurnPerHour, b.Projected)})
		}
	}
	return out, ended
}

// BudgetMonth names now's budget month (UTC), as State.BudgetAlerted's
// keys carry it: "team@2026-03".
func BudgetMonth(now time.Time) string { return now.UTC().Format("2006-01") }

// PlaceUnit, PreemptUnit and MoveUnit return the state's unit that
// d.Place[i], d.Preempt[i] and d.Move[i] concern, as Step found it, or nil
// when d does not carry it (decisions not made by Step). Valid until the
// state's units change.
func (d *Decisions) PlaceUnit(i int) *Unit { return unitAt(d.placeUnits, i) }

// PreemptUnit: see PlaceUnit.
func (d *Decisions) PreemptUnit(i int) *Unit { return unitAt(d.preemptUnits, i) }

// MoveUnit: see PlaceUnit.
func (d *Decisions) MoveUnit(i int) *Unit { return unitAt(d.moveUnits, i) }

func unitAt(units []*Unit, i int) *Unit {
	if i < len(units) {
		return units[i]
	}
	return nil
}

// findUnit returns the unit of of behind su in units (parallel lists): by
// a scan while the list is short, else from a map made in *index on
// first use.
func findUnit(su sched.Unit, units []sched.Unit, of []*Unit, index *map[sched.Unit]*Unit) *Unit {
	if len(units) <= 32 {
		for i := range units {
			if units[i] == su {
				return of[i]
			}
		}
		return nil
	}
	if *index == nil {
		*index = make(map[sched.Unit]*Unit, len(units))
		for i, x := range units {
			(*index)[x] = of[i]
		}
	}
	return (*index)[su]
}
