package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Job is a job as stored: the domain job, when it entered its current
// state, and the idempotency key it was submitted with.
type Job struct {
	core.Job
	// StateAt is when the job entered State (Submit at first).
	StateAt        time.Time
	IdempotencyKey string
}

// JobFilter selects jobs; empty fields match everything.
type JobFilter struct {
	Team string
	// States matches any of the listed states.
	States []core.JobState
	Tier   core.Tier
	// Limit is the page size (0: DefaultLimit); Cursor the Next of the
	// previous page.
	Limit  int
	Cursor string
}

// Jobs keeps jobs. Listing is newest first.
type Jobs interface {
	// SubmitJob stores a new pending job and its units (one, or one per
	// shard), atomically. With an idempotency key, a second submission
	// with the same team and key returns the first job and created false
	// if its body (JobFingerprint) is the same, and ErrConflict if it is
	// not. An existing job id is ErrConflict, an unknown team ErrNotFound.
	// A new job whose units would take its team's unfinished jobs past
	// the team's unit limit (core.Team.Units) is a *core.FieldError on
	// shards, and nothing of it is stored.
	SubmitJob(ctx context.Context, j core.Job, idempotencyKey string) (job Job, created bool, err error)
	// GetJob returns the job with id.
	GetJob(ctx context.Context, id string) (Job, error)
	// GetJobs returns the jobs with ids, in no particular order; an id
	// no job has is left out. The jobs are read hundreds to a query, so
	// the loop reads its queue's jobs without a query each.
	GetJobs(ctx context.Context, ids []string) ([]Job, error)
	// ListJobs returns a page of the jobs f selects, newest first.
	ListJobs(ctx context.Context, f JobFilter) (Page[Job], error)
	// CancelJob moves the job to cancelled at at and returns it. Cancelling
	// a cancelled job returns it unchanged; a succeeded or failed one is
	// ErrConflict. The job's units are left as they are: the loop stops
	// them (running units need their processes stopped) and saves them.
	CancelJob(ctx context.Context, id string, at time.Time) (Job, error)
	// TransitionJob moves the job to state at at and returns it. A job in
	// a final state may not move (ErrConflict); moving to its own state
	// changes nothing.
	TransitionJob(ctx context.Context, id string, state core.JobState, at time.Time) (Job, error)
	// CountJobs counts the jobs per state (of team, or all with team
	// empty), in the store: every state in JobStates is a key, zero when
	// no job is in it.
	CountJobs(ctx context.Context, team string) (map[core.JobState]int, error)
}

// JobStates lists every job state.
var JobStates = []core.JobState{core.JobPending, core.JobAdmitted, core.JobRunning, core.JobCheckpointing,
	core.JobPreempted, core.JobSucceeded, core.JobFailed, core.JobCancelled}

// ParseJobState validates a job state name.
func ParseJobState(field, s string) (core.JobState, error) {
	for _, st := range JobStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", &core.FieldError{Field: field, Value: s, Allowed: "one of pending, admitted, running, checkpointing, preempted, succeeded, failed, cancelled"}
}

// CheckJobTransition reports whether a job or unit may move from one state
// to another: any state but a final one may move anywhere; a final state
// only to itself. The engine moves units back and forth (running, pending
// again after a reclaim, running elsewhere), so only finality is a rule.
func CheckJobTransition(field string, from, to core.JobState) error {
	if from.Final() && from != to {
		return Conflict("%s: %s is final, cannot become %s", field, from, to)
	}
	return nil
}

// ValidateJob reports the first problem with a job about to be submitted.
func ValidateJob(j *core.Job) error {
	// A new job's id, team and user follow core.CheckName; among other
	// things it keeps '#' out, which separates a job from its shard in
	// unit keys ("job#shard").
	if err := core.CheckName("id", j.ID); err != nil {
		return err
	}
	if err := j.Validate(); err != nil {
		return err
	}
	if err := core.CheckName("team", j.Team); err != nil {
		return err
	}
	if j.User != "" {
		if err := core.CheckName("user", j.User); err != nil {
			return err
		}
	}
	if err := CheckText("image", j.Image); err != nil {
		return err
	}
	r := j.Request
	for i, m := range r.Models {
		if err := CheckID(fmt.Sprintf("models[%d]", i), m); err != nil {
			return err
		}
	}
	for m, tp := range r.Throughput {
		if err := CheckID("throughput", m); err != nil {
			return err
		}
		if err := checkNonNeg("throughput["+m+"]", tp); err != nil {
			return err
		}
	}
	if err := checkNonNeg("cpu_milli", r.CPUMilli); err != nil {
		return err
	}
	if err := checkNonNeg("mem_mib", r.MemMiB); err != nil {
		return err
	}
	if j.Shards > 100_000 {
		return &core.FieldError{Field: "shards", Value: fmt.Sprint(j.Shards), Allowed: "0..100000"}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"est_duration", j.EstDuration}, {"checkpoint_interval", j.CheckpointInterval}} {
		if d.v < 0 || d.v > core.MaxJobDuration {
			return &core.FieldError{Field: d.name, Value: d.v.String(), Allowed: "0..100 years"}
		}
	}
	for i, c := range j.Command {
		if err := CheckText(fmt.Sprintf("command[%d]", i), c); err != nil {
			return err
		}
	}
	if j.Submit.IsZero() {
		return &core.FieldError{Field: "submit", Value: "", Allowed: "the submission time"}
	}
	if j.State != "" && j.State != core.JobPending {
		return &core.FieldError{Field: "state", Value: string(j.State), Allowed: "pending (or empty) on submission"}
	}
	return nil
}

// JobFingerprint is the hash of what a client asked for in a submission:
// everything but the id, the submission time and the state, which the
// server fills in. Two submissions with one idempotency key are the same
// request when their fingerprints are equal.
func JobFingerprint(j *core.Job) [32]byte {
	body := struct {
		Team, User, Tier string
		Request          core.Request
		Shards           int
		EstDuration      int64
		Deadline         string
		Interruptible    bool
		Deferrable       bool
		Checkpoint       int64
		Command          []string
		Image            string
	}{j.Team, j.User, string(j.Tier), j.Request, max(j.Shards, 1), int64(j.EstDuration), "",
		j.Interruptible, j.Deferrable, int64(j.CheckpointInterval), j.Command, j.Image}
	if !j.Deadline.IsZero() {
		body.Deadline = Micro(j.Deadline).Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(body) // maps marshal in key order: canonical
	if err != nil {
		panic(fmt.Sprintf("store: job fingerprint: %v", err)) // plain data always marshals
	}
	return sha256.Sum256(b)
}

// Micro returns t in UTC truncated to the microsecond: the instant the
// store gives back for t.
func Micro(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}
