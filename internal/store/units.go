package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Part is the piece of a running unit on one lease: the GPU indexes it
// holds there.
type Part struct {
	LeaseID string
	GPUs    []int
}

// Unit is the persisted state of one schedulable unit of a job (the job,
// or one shard): exactly what engine.Unit holds beyond its job, so that
// the loop can restart where it stopped.
type Unit struct {
	JobID string
	// Shard is 0 for an unsharded job, 0..Shards-1 otherwise.
	Shard int
	State core.JobState
	// Parts are where it runs while running.
	Parts []Part
	// Start is when the current run began; LastCheckpoint when the work
	// was last saved.
	Start          time.Time
	LastCheckpoint time.Time
	// Done is the work saved so far.
	Done time.Duration
	// Since is when it last became pending.
	Since         time.Time
	DeferredUntil time.Time
	Reclaims      int
	Preemptions   int
	NoSpot        bool
	// LostMilliSeconds is work lost to preemptions and reclaims, in
	// milli-GPU-seconds.
	LostMilliSeconds int64
	End              time.Time
}

// Key is the unit's key as sched.Unit spells it: "job" for an unsharded
// job, "job#shard" otherwise; shards tells which.
func (u *Unit) Key(shards int) string {
	if shards <= 1 {
		return u.JobID
	}
	return fmt.Sprintf("%s#%d", u.JobID, u.Shard)
}

// Units keeps the per-unit state of jobs. SubmitJob creates the units;
// the loop saves them as they change.
type Units interface {
	// SaveUnits writes the units' state. A unit that does not exist is
	// ErrNotFound; a unit in a final state may not change state
	// (ErrConflict). All or none are written.
	SaveUnits(ctx context.Context, units ...Unit) error
	// ListUnits returns the units of a job ordered by shard.
	ListUnits(ctx context.Context, jobID string) ([]Unit, error)
	// ListLiveUnits returns every unit not in a final state, in submission
	// order, for the loop to restart from.
	ListLiveUnits(ctx context.Context) ([]Unit, error)
	// ListUnitsOf returns every unit of the jobs ids, in any state,
	// grouped by job in the order of ids (a job named twice comes once,
	// first), each job's by shard; an unknown id has none.
	ListUnitsOf(ctx context.Context, ids []string) ([]Unit, error)
	// ListRunning returns the runs in progress: every running or
	// checkpointing unit as a Run with a zero End, in submission order.
	// Their number is bounded by the fleet's GPUs, not by the queue, so
	// readers that need only what holds GPUs (reports, the dashboard)
	// use this rather than ListLiveUnits.
	ListRunning(ctx context.Context) ([]Run, error)
	// CountWaiting sums the waiting units (pending, admitted or
	// preempted) per tier and team, in the store: its answer is one row
	// per (tier, team) however long the queue is. With team set, only
	// that team's. Ordered by tier (core, regular, offline), then team.
	CountWaiting(ctx context.Context, team string) ([]WaitingCount, error)
}

// WaitingStates are the states of a unit that waits for GPUs.
var WaitingStates = []core.JobState{core.JobPending, core.JobAdmitted, core.JobPreempted}

// WaitingCount is the waiting units of one tier and team.
type WaitingCount struct {
	Tier  core.Tier
	Team  string
	Units int
	// GPUMilli is the milli-GPUs they ask for in all: per unit, the job's
	// GPUs × milli-GPUs per GPU.
	GPUMilli int64
}

// ValidateUnit reports the first problem with u.
func ValidateUnit(u *Unit) error {
	if err := CheckID("job", u.JobID); err != nil {
		return err
	}
	if err := checkNonNeg("shard", int64(u.Shard)); err != nil {
		return err
	}
	if _, err := ParseJobState("state", string(u.State)); err != nil {
		return err
	}
	for i, p := range u.Parts {
		if err := CheckID(fmt.Sprintf("parts[%d].lease", i), p.LeaseID); err != nil {
			return err
		}
		for _, g := range p.GPUs {
			if err := checkNonNeg(fmt.Sprintf("parts[%d].gpus", i), int64(g)); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"done", int64(u.Done)}, {"reclaims", int64(u.Reclaims)}, {"preemptions", int64(u.Preemptions)}, {"lost_milli_seconds", u.LostMilliSeconds}} {
		if err := checkNonNeg(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}
