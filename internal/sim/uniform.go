package sim

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// Uniform Progress (Wu et al., "Can't Be Late", NSDI'24) as a baseline
// for deadline jobs on spot, with spot.rule: uniform-progress: a job with
// C of work, submitted at S with deadline D, should have done
// C × (t − S)/(D − S) by t. Ahead of that line it may run on spot (the
// cheapest offer, as any interruptible work); behind it, on demand. The
// rule is decided whenever the unit waits for capacity — at submission
// and after each preemption or reclaim — and replaces the fallback's
// sticky "off spot after a reclaim" for deadline work; a running unit is
// not moved (the paper's policy also switches a running job, which the
// engine does not do). Work without a deadline keeps the fallback rule.
// It is a simulator baseline: gpufleet serve refuses the rule.

// uniformProgress sets NoSpot of each waiting interruptible unit with a
// deadline by the uniform-progress line at now.
func (r *run) uniformProgress(now time.Time) {
	if r.p.Spot.Rule != policy.SpotUniformProgress {
		return
	}
	for _, u := range r.st.Units {
		if u.Job.Deadline.IsZero() || !u.Job.Interruptible || (u.State != core.JobPending && u.State != core.JobPreempted) {
			continue
		}
		r.st.SetNoSpot(u, behindUniform(u, r.cfg.Workload.Actual[u.Job.ID], now))
	}
}

// behindUniform reports whether u's saved work is behind the uniform
// line at now. Its work is the job's estimate, or actual when it has none.
func behindUniform(u *engine.Unit, actual time.Duration, now time.Time) bool {
	work := u.Job.EstDuration
	if work <= 0 {
		work = actual
	}
	window := u.Job.Deadline.Sub(u.Job.Submit)
	elapsed := now.Sub(u.Job.Submit)
	if window <= 0 || elapsed >= window {
		return true
	}
	if elapsed <= 0 || work <= 0 {
		return false
	}
	// Done/work < elapsed/window, in 128-bit-free integers: seconds.
	return float64(u.Done)*float64(window) < float64(work)*float64(elapsed)
}
