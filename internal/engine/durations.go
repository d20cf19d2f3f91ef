package engine

import (
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Durations learned from history ("feedback"). Every
// unit that succeeds teaches State.Durations (a plan.DurationModel) its
// run time and, when its user gave an estimate, the ratio of the two
// (FinishUnit). With Config.LearnDurations the engine plans each unit on
// State.Estimate: the user's estimate corrected by the team's median
// ratio, or, without an estimate, the median run of the team's command.
// Without it, on the user's estimate as given. The model learns either
// way; the knob decides only whether plans read it.
//
// The scheduler and the fleet read a unit's duration from its job's
// EstDuration (billing-boundary fit, deferral, deadline risk, backfill,
// term choice). So that they read the estimate the engine plans on
// without a second source of truth, the engine hands them the unit with
// a planning copy of its job (Unit.plan) whose EstDuration is
// State.Estimate's, wherever that differs from the user's; the user's
// job, and its estimate as given, are not touched. Where it does not
// differ (learning off, or a ratio of exactly 1: a team's estimates
// right) the scheduler sees the user's own job, as before: decisions do
// not change.
//
// A unit's planned duration (Unit.est) is worked out when it enters the
// engine's view (a new unit, or every unit when the view is built
// afresh) and again, for the units of its team, when a finish changes
// what the model predicts for them. The model is plain data kept with
// the loop's state as the demand history is (store.LoopState), so a
// server and a replay of the same events plan alike, and a restarted
// server plans as before.

// commandOf is the command a job's runs are learned under: its command
// line, else its image ("" for neither: the team's jobs without one
// share an entry).
func commandOf(j *core.Job) string {
	if len(j.Command) > 0 {
		return strings.Join(j.Command, " ")
	}
	return j.Image
}

// Estimate is the duration the engine plans u on: with learning on (the
// last Step's Config.LearnDurations), the model's prediction for its team
// and command from the user's estimate (plan.DurationModel.Predict);
// otherwise the user's estimate. Zero means unknown (no estimate, no
// history): the scheduler and the fleet then assume their default.
func (st *State) Estimate(u *Unit) time.Duration {
	if !st.learn {
		return u.Job.EstDuration
	}
	return st.Durations.PredictDuration(u.Job.Team, commandOf(u.Job), u.Job.EstDuration, 0)
}

// EstimateReason is Estimate with why, in words (for audit; the API does
// not show it yet).
func (st *State) EstimateReason(u *Unit) (time.Duration, string) {
	if !st.learn {
		if u.Job.EstDuration > 0 {
			return u.Job.EstDuration, "the user's estimate (learning durations is off)"
		}
		return 0, "no estimate (learning durations is off)"
	}
	return st.Durations.Predict(u.Job.Team, commandOf(u.Job), u.Job.EstDuration, 0)
}

// Planned is the duration u was last planned on (Estimate as of its last
// update): what the scheduler and the fleet see.
func (u *Unit) Planned() time.Duration { return u.est }

// setEstimate works out u's planned duration again.
func (st *State) setEstimate(u *Unit) { u.est = st.Estimate(u) }

// schedUnit is u as the scheduler and the fleet see it: its job, or a
// planning copy of it with the planned duration when that differs from
// the user's estimate.
func (u *Unit) schedUnit() sched.Unit {
	if u.est == u.Job.EstDuration {
		return u.Unit
	}
	if u.plan == nil {
		u.plan = new(core.Job)
	}
	*u.plan = *u.Job
	u.plan.EstDuration = u.est
	return sched.Unit{Job: u.plan, Shard: u.Shard}
}

// useLearning sets whether plans read the model (Step, from its Config):
// when that changes, every unit's planned duration may, so the view is
// built afresh.
func (st *State) useLearning(on bool) {
	if st.learn != on {
		st.learn = on
		st.changed()
	}
}

// learnFrom teaches the model a unit that succeeded: its run time (the work
// done, at finish) against its user's estimate. When that changes what
// the model predicts for its team, the team's other units are planned
// again (through leave and enter, so the live view follows).
func (st *State) learnFrom(u *Unit) {
	team, cmd := u.Job.Team, commandOf(u.Job)
	ratio, hadRatio := st.Durations.Ratio(team)
	typical, hadTypical := st.Durations.Typical(team, cmd)
	st.Durations.Observe(team, cmd, u.Job.EstDuration, u.Done)
	if !st.learn {
		return
	}
	ratio2, hasRatio := st.Durations.Ratio(team)
	typical2, hasTypical := st.Durations.Typical(team, cmd)
	ratioChanged := hadRatio != hasRatio || ratio != ratio2
	typicalChanged := hadTypical != hasTypical || typical != typical2
	if !ratioChanged && !typicalChanged {
		return
	}
	var leases map[string]*Lease
	for _, w := range st.Units {
		if w == u || w.State.Final() || w.Job.Team != team {
			continue
		}
		if w.Job.EstDuration > 0 && !ratioChanged || w.Job.EstDuration <= 0 && (!typicalChanged || commandOf(w.Job) != cmd) {
			continue
		}
		est := st.Estimate(w)
		if est == w.est {
			continue
		}
		if w.where == inRunning || w.where == countedOnly {
			if leases == nil {
				st.stampLeases()
				leases = st.leaseIndex()
			}
			st.leave(w)
			w.est = est
			st.enter(w, leases)
			continue
		}
		w.est = est
	}
}
