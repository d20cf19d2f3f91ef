package sched

import (
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Unit is one schedulable piece of a job: the whole job, or one shard of
// an array job. Each shard is independent: it is placed, preempted and
// finished on its own.
type Unit struct {
	Job   *core.Job
	Shard int
}

// Key identifies a unit: "job" or "job#shard".
func (u Unit) Key() string {
	if u.Job.Shards <= 1 {
		return u.Job.ID
	}
	return u.Job.ID + "#" + strconv.Itoa(u.Shard)
}

// Milli is the unit's total GPU share.
func (u Unit) Milli() core.Milli {
	return core.Milli(u.Job.Request.GPUs) * u.Job.Request.MilliPerGPU
}

// Part is the piece of a unit on one node: the node's index in
// State.Nodes and the GPU indexes held there. A unit has one part unless it
// is a gang too large for any one machine.
type Part struct {
	Node int
	GPUs []int
}

// Allocation is a unit running on nodes.
type Allocation struct {
	Unit
	Parts []Part
	Start time.Time
	// LastCheckpoint is when the unit last saved its work (zero: never,
	// so everything since Start would be lost).
	LastCheckpoint time.Time
	// Done is the work saved before this run started, for the unit's
	// slack if it were stopped (deadline.go).
	Done time.Duration
}

// EstEnd is when the unit's run is expected to end: the run's start plus
// the job's estimated duration less the work saved before the run. ok is
// false when the job has no estimate. Every rule that asks when a machine
// frees reads this one end, so that a resumed unit does not look as if it
// held its GPUs for the work it had already done.
func (a *Allocation) EstEnd() (end time.Time, ok bool) {
	if a.Job.EstDuration <= 0 {
		return time.Time{}, false
	}
	return a.Start.Add(a.Job.EstDuration - a.Done), true
}

// Class is the GPU class quotas are kept in: the GPU model.
type Class = string

// Usage is a team's decayed past use per GPU class, in milli-GPU-seconds,
// as the fair-share history (core's, which the store keeps).
type Usage = core.Usage

// State is everything Schedule looks at. Nodes carry their free capacity
// with Running already subtracted.
type State struct {
	Now     time.Time
	Nodes   []core.Node
	Running []Allocation
	// Pending units in any order; Schedule orders them.
	Pending []Unit
	// PendingInfo, when not nil, is what is known of each pending unit
	// (by index): since when it waits and its work done, for deadlines
	// and wait targets. Nil: every unit waits since its submission with
	// nothing done.
	PendingInfo []Waiting
	Teams       []core.Team
	// History is each team's decayed past usage, for fair share.
	History map[string]Usage
	// Spent is each team's spend so far this month, for budgets.
	Spent map[string]core.Micros
	// NodeCost is the marginal price of one GPU-hour on each node, by
	// index: zero for capacity already paid (committed terms), the hourly
	// price for on-demand and spot. Missing entries count as zero.
	NodeCost []core.Micros
	// NodePaidUntil is, for each node on a committed term, when the time
	// paid for runs out if no more work comes: the billing boundary after
	// the last estimated end of the work on it (a term renews while work
	// runs). Zero for nodes billed by the second and for missing entries.
	// Placement fills paid time that would otherwise go unused.
	NodePaidUntil []time.Time
	// RentCost, when set, is for a pending unit the cost per useful
	// GPU-hour of the machine that renting for it alone would take (0: no
	// limit). Such a unit goes on a pay-as-you-go node only where what it
	// adds to that node's bill — the whole machine's price for the time it
	// runs past the work already there — costs no more per useful
	// GPU-hour: a long run put on an on-demand machine that a short job
	// just left free pays the machine's hourly price for days where a term
	// costs a fraction, and one GPU's long run keeps an eight-GPU machine
	// on demand for weeks where a one-GPU machine costs an eighth. It
	// waits for its own rental instead.
	RentCost func(u Unit) core.Micros
	// TimeOfUse is the tariff that deferrable work may wait for; nil if
	// prices do not vary by hour.
	TimeOfUse *core.TimeOfUse
	// Machines are the machine shapes that can be rented (nil: only the
	// nodes there are count). A unit one machine can hold whole runs on
	// one machine — it waits for one rather than spread over smaller
	// nodes; only a gang larger than every machine spans several.
	Machines MachineShapes
	// Scratch, if set, is working space reused between calls (nil: each
	// call allocates its own). It changes no decision.
	Scratch *Scratch
}

// MachineShape is one kind of machine that can be rented.
type MachineShape struct {
	Hardware core.Hardware
	GPUs     int
}

// MachineShapes lists the shapes of a catalog.
type MachineShapes []MachineShape

// Largest is the most GPUs one machine admissible for r has (see
// core.Request.Admits), or 0.
func (ms MachineShapes) Largest(r *core.Request) int {
	best := 0
	for _, m := range ms {
		if m.GPUs > best && r.Admits(m.Hardware) {
			best = m.GPUs
		}
	}
	return best
}

// Placement is a decision to run a unit on a node's GPUs.
type Placement struct {
	Unit   Unit
	Parts  []Part
	Reason string
}

// Preemption is a decision to stop a running unit so that another fits.
type Preemption struct {
	Victim Allocation
	// For is the key of the unit the room is made for.
	For string
	// LostMilliSeconds is the work lost since the victim's last
	// checkpoint, in milli-GPU-seconds.
	LostMilliSeconds int64
	Reason           string
}

// Deferral is a decision to hold a deferrable unit until a cheaper window.
type Deferral struct {
	Unit  Unit
	Until time.Time
	// SavingBP is the expected saving of waiting, in basis points of the
	// cost of starting now.
	SavingBP int64
	Reason   string
}

// Reservation holds a node for a blocked unit from At on; only units that
// finish before At may be backfilled onto it.
type Reservation struct {
	Unit   Unit
	Node   int
	At     time.Time
	Reason string
}

// Wait is a unit left pending, with why: fleet decisions read these to
// decide what to rent.
type Wait struct {
	Unit   Unit
	Reason string
}

// Decisions is Schedule's output. Every decision carries its reason.
type Decisions struct {
	Placements   []Placement
	Preemptions  []Preemption
	Deferrals    []Deferral
	Reservations []Reservation
	Waiting      []Wait
}
