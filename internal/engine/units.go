package engine

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The transitions of a unit that a loop observes rather than decides — a
// cancellation, an exit, a machine gone while the loop was away, a
// checkpoint taken at a reclaim notice — go through these functions, as
// Step's decisions go through Apply: one rule for what counts as done work
// and what is lost, the server's and the simulator's, and the engine's
// live view kept true without the caller's help.

// CancelUnit ends u, one of st's units, cancelled at now; a run's time up
// to now counts as done. It reports false (and changes nothing) when u
// has already ended.
func CancelUnit(st *State, u *Unit, now time.Time) bool {
	return end(st, u, now, core.JobCancelled)
}

// FailUnit ends u failed at at, the time its run exited (or was found
// dead); the run's time up to then counts as done. It reports false when
// u has already ended.
func FailUnit(st *State, u *Unit, at time.Time) bool {
	return end(st, u, at, core.JobFailed)
}

func end(st *State, u *Unit, at time.Time, state core.JobState) bool {
	if u == nil || u.State.Final() {
		return false
	}
	st.leave(u)
	if u.State == core.JobRunning || u.State == core.JobCheckpointing {
		u.Done += at.Sub(u.Start)
	}
	u.State, u.Parts, u.End = state, nil, at
	st.ended()
	return true
}

// RequeueUnit puts u, running or checkpointing, back in the queue at now
// from its last checkpoint (the last one reported, or the last multiple
// of its checkpoint interval): the work before it is kept, the rest is
// counted lost. It returns that checkpoint, and false when u was not
// running.
func RequeueUnit(st *State, u *Unit, now time.Time) (time.Time, bool) {
	if u == nil || u.State != core.JobRunning && u.State != core.JobCheckpointing {
		return time.Time{}, false
	}
	ck := u.checkpointAt(now)
	st.leave(u)
	u.stop(now, core.JobPending)
	st.enter(u, nil) // a waiting unit takes no lease
	return ck, true
}

// RequeueLease requeues (RequeueUnit) every unit with a part on the lease:
// its machine is gone or will run nothing more.
func RequeueLease(st *State, leaseID string, now time.Time) []*Unit {
	var out []*Unit
	for _, u := range st.Units {
		if (u.State == core.JobRunning || u.State == core.JobCheckpointing) && u.RunsOn(leaseID) {
			RequeueUnit(st, u, now)
			out = append(out, u)
		}
	}
	return out
}

// ResumeCheckpointed returns the units checkpointing on the lease to
// running: each saved its work at the notice (OnReclaimNotice) and runs on
// from there on the same machine until it goes. It returns them.
func ResumeCheckpointed(st *State, leaseID string) []*Unit {
	var out []*Unit
	var leases map[string]*Lease
	for _, u := range st.Units {
		if u.State != core.JobCheckpointing || !u.RunsOn(leaseID) {
			continue
		}
		if leases == nil {
			leases = st.leaseIndex()
		}
		st.leave(u)
		u.State = core.JobRunning
		st.enter(u, leases)
		out = append(out, u)
	}
	return out
}

// OnCheckpoint records that u saved its work at at (its agent saw the
// checkpoint directory change): a requeue later keeps the work up to
// it. A time before the run's start or its last checkpoint, or after
// now, is not a checkpoint of this run and is ignored; it reports
// whether it was recorded.
func OnCheckpoint(st *State, u *Unit, at, now time.Time) bool {
	if u == nil || u.State != core.JobRunning && u.State != core.JobCheckpointing ||
		!at.After(u.Start) || !at.After(u.LastCheckpoint) || at.After(now) {
		return false
	}
	st.leave(u)
	u.LastCheckpoint = at
	st.enter(u, st.leaseIndex())
	return true
}
