package engine

import (
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Lease is a rented machine as the engine tracks it.
type Lease struct {
	core.Lease
	Offer *core.Offer
	Plan  *core.PricePlan
	// ReadyAt is zero until the machine can take work.
	ReadyAt time.Time
	// ReclaimAt is set while a spot reclaim notice is pending.
	ReclaimAt time.Time
	// IdleSince is when the machine last became empty (zero while busy).
	IdleSince time.Time
	// For lists the units it was rented for (the autostop baseline waits
	// for these machines rather than renting again).
	For []string
	// Working marks, not state: gen is the stamp of the last pass that
	// found it in State.Leases (resolve.go), node its node in the live
	// view (-1: none), runs the parts of running units on it, counted by
	// the view's build and kept since by every change made through the
	// engine (view.go).
	gen  uint64
	node int
	runs int
	// paidWork and paidNow remember the paid boundary as build asks it
	// (after the work on it) and as drainCandidates does (after now).
	paidWork, paidNow billing.PaidMemo
	// renewNext is the billing boundary renewals last found ahead: until
	// it passes, no renewal is due (a working mark; a restarted loop looks
	// afresh, and decides alike).
	renewNext time.Time
}

// Assigned is the part of a running unit on one lease.
type Assigned struct {
	LeaseID string
	GPUs    []int
}

// Unit is a job's schedulable unit (the job, or one shard) as the engine
// tracks it.
type Unit struct {
	sched.Unit
	State core.JobState
	// Parts are where it runs while running.
	Parts []Assigned
	// Start is when the current run began; LastCheckpoint when the work
	// was last saved (a run resumes from there).
	Start          time.Time
	LastCheckpoint time.Time
	// Done is the work saved so far (time at full speed).
	Done time.Duration
	// Since is when it last became pending.
	Since         time.Time
	DeferredUntil time.Time
	Reclaims      int
	Preemptions   int
	// NoSpot keeps it off spot (too many reclaims, or deadline at risk).
	NoSpot bool
	// LostMilliSeconds is work lost to preemptions and reclaims.
	LostMilliSeconds int64
	End              time.Time
	// on caches the leases of Parts, by position, and gen is the stamp of
	// the last pass that found it in State.Units (resolve.go).
	on  []*Lease
	gen uint64
	// seq orders the units the live view knows as State.Units does, and
	// where says which of its lists holds the unit (view.go).
	seq   uint64
	where place
	// useI is its index in the view's allocation per team and class, plus
	// one (0: none), as last found (history.go: addUse checks it).
	useI int
	// est is the duration the engine plans it on (State.Estimate, as of
	// its last update), and plan the planning copy of its job the
	// scheduler sees when est is not the user's estimate (durations.go).
	est  time.Duration
	plan *core.Job
}

// JoinedPrefix starts the id of a lease Step decided on a joined
// machine (State.Joined) rather than a rented one ("L"): the provider
// hands it a machine whose agent is already there, and a restarted loop
// still knows which the lease asked for.
const JoinedPrefix = "J"

// IsJoinedLease reports whether lease id was decided on a joined machine.
func IsJoinedLease(id string) bool { return strings.HasPrefix(id, JoinedPrefix) }

// State is everything the engine knows.
type State struct {
	Offers []core.Offer
	Leases []*Lease
	Units  []*Unit
	Teams  []core.Team
	Spent  map[string]core.Micros
	// History is each team's decayed past use per GPU class, in
	// milli-GPU-seconds, for fair share: Apply keeps it (history.go),
	// decayed by the half-life of its decisions and counted up to
	// HistoryAt, the Now of the last Apply that recorded it (zero: none
	// yet; the next Apply starts the count). A caller that keeps the
	// state across restarts keeps both.
	History   map[string]sched.Usage
	HistoryAt time.Time
	TimeOfUse *core.TimeOfUse
	Readings  []fleet.GPUReading
	Ladder    map[string]fleet.LadderState
	// Joined are the machines whose agents joined by hand with an offer
	// and wait, unbound, for a lease (the loop sets it each tick from
	// its provider; nil: none). Step leases them for waiting work before
	// renting anything (fleet.AcquireJoined), under ids that start with
	// JoinedPrefix.
	Joined []fleet.Joined
	// NextID numbers new leases deterministically.
	NextID int
	// Demand is the fleet's recent demand (fleet.DemandKeep of it, oldest
	// first), recorded by Apply: what committed terms are priced on.
	Demand []fleet.DemandPoint
	// Durations is what finished units taught of how long jobs run and
	// how far their users' estimates were off (durations.go), recorded by
	// FinishUnit: what units are planned on when Config.LearnDurations is
	// set. A caller that keeps the state across restarts keeps it.
	Durations plan.DurationModel
	// learn is the last Step's Config.LearnDurations.
	learn bool
	// Refused are the offers' modes the provider lately refused for
	// capacity, in offer and mode order (fleet.Refused): Step rents none
	// while it holds. OnRefused records a refusal, OnLaunched clears its
	// offer's mode, and a machine of the offer that ends (Apply's
	// releases, OnReclaimed, OnFailed) clears its offer. A caller that
	// keeps the state across restarts keeps it.
	Refused []core.Refusal
	// shapesOf is the offer list machineShapes was computed from.
	shapesOf      []core.Offer
	machineShapes sched.MachineShapes
	// budgetAlerted remembers teams already warned this month.
	BudgetAlerted map[string]bool
	// scratch is Step's and Apply's reusable working space, and the live
	// view (view.go).
	scratch *scratch
}

// changed tells the engine's own code that units or leases were changed
// other than through the paths the live view follows: the next Step
// builds its picture of the state afresh instead of keeping it up to
// date. Outside the engine every change goes through a method (Step,
// Apply, Finish, FinishUnit, Prune, the On* handlers, SetNoSpot, or
// appending new units to Units), so the picture cannot go stale there.
func (s *State) changed() {
	if s.scratch != nil {
		s.scratch.live = false
	}
}

// SetNoSpot keeps u off spot (or lets it back on) from the next Step: a
// driver's rule on top of the engine's own (the simulator's
// uniform-progress baseline).
func (s *State) SetNoSpot(u *Unit, off bool) {
	if u.NoSpot == off {
		return
	}
	u.NoSpot = off
	s.changed()
}

// lease returns the lease with id.
func (s *State) lease(id string) *Lease {
	for _, l := range s.Leases {
		if l.ID == id {
			return l
		}
	}
	return nil
}

// unit returns the unit with key.
func (s *State) unit(key string) *Unit {
	for _, u := range s.Units {
		if u.Key() == key {
			return u
		}
	}
	return nil
}
