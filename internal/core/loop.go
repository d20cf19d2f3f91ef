package core

import "time"

// Usage is a team's decayed past use per GPU class (the GPU model), in
// milli-GPU-seconds: the fair-share history. It lives here, not in the
// scheduler, because the store keeps it across restarts and the store
// persists core types only.
type Usage map[string]int64

// DemandPoint is the fleet's demand from At until the next point: the
// GPU share allocated to running work plus the share of work waiting for
// a machine, in milli-GPUs. The engine keeps a few days of them to price
// committed terms on (fleet.Outlook); it lives here because the store
// keeps them across restarts and the store persists core types only.
type DemandPoint struct {
	At    time.Time
	Milli int64
}

// DurationRuns are a team's last run times of one command (its command
// line, else its image; "" for neither), in whole seconds, oldest first:
// what the engine learned of how long its jobs run (plan.DurationModel).
// It lives here because the store keeps them across restarts and the
// store persists core types only.
type DurationRuns struct {
	Team    string
	Command string
	Seconds []int64
}

// Refusal is an offer's billing mode that the provider refused to rent
// for lack of capacity: the fleet asks for it again no sooner than Until
// (fleet.Refused). Wait is the interval that set Until; the next refusal
// doubles it. It lives here because the store keeps the refusals across
// restarts and the store persists core types only.
type Refusal struct {
	Offer string
	Mode  BillingMode
	Until time.Time
	Wait  time.Duration
}

// Rung is a step of the idle ladder.
type Rung int

// The rungs: a GPU is fine, then alerted, then its owner notified, then
// acted on.
const (
	RungNone Rung = iota
	RungAlert
	RungNotify
	RungAct
)

// LadderState is what the idle ladder remembers of one GPU between
// steps. It lives here, not in fleet, because the store keeps it across
// restarts and the store persists core types only.
type LadderState struct {
	// LowSince is when utilization last went under the threshold (zero
	// while it is above), NoProcSince likewise for "no process".
	LowSince    time.Time
	NoProcSince time.Time
	Rung        Rung
	// Zombie is set once the zombie alert fired, until a process shows
	// up again: the alert fires once per episode.
	Zombie bool
	Unit   string
	// Window is the unit's utilization on the GPU over the ladder's window
	// (and the reading just before it, whose value holds at the window's
	// start), oldest first, equal neighbours merged: what the windowed
	// mean is taken over (fleet.Ladder).
	Window []UtilPoint
}

// UtilPoint is a GPU's utilization from At until the next point.
type UtilPoint struct {
	At  time.Time
	Pct int
}
