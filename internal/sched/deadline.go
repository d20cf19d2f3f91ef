package sched

import (
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Deadlines and wait targets (docs/scheduler.md, "Deadlines and tail
// waits"). A unit's latest start is the last moment it can start and
// still keep both its promises: its deadline less the work it has left
// (the slack runs out there), and the time it started waiting plus its
// tier's p99 wait target. It is at risk once its latest start is within
// Config.RiskLead of now: the time capacity takes to come (renting and
// booting a machine) plus a margin. At-risk units go ahead of the rest of
// their tier, least time left first; then units with a deadline,
// earliest deadline first; then the rest, teams taking turns by fair
// share. Deferral never holds a unit past its latest start less the
// lead, and the engine tells the fleet to rent for a unit at risk
// whatever the tier's renting wait target says (fleet.Demand.RentBy).

// Waiting is what the scheduler knows of a pending unit beyond its job:
// since when it waits and how much of its work is done.
type Waiting struct {
	// Since is when it last became pending (zero: its job's submission).
	Since time.Time
	// Done is the work already saved (a preempted unit resumes from its
	// checkpoint).
	Done time.Duration
}

// Remaining is the unit's estimated work left: its estimate (or def
// when it has none) less what is done, never below zero.
func Remaining(j *core.Job, done, def time.Duration) time.Duration {
	est := j.EstDuration
	if est <= 0 {
		est = def
	}
	return max(est-done, 0)
}

// LatestStart is the latest time the unit can start and keep its
// deadline and its tier's p99 wait target (cfg.WaitP99), with ok false
// when it has neither. w.Since zero reads as the job's submission. cfg is
// read as it is: complete it with Defaults first.
func LatestStart(j *core.Job, w Waiting, cfg Config) (time.Time, bool) {
	var at time.Time
	ok := false
	if !j.Deadline.IsZero() {
		at, ok = j.Deadline.Add(-Remaining(j, w.Done, cfg.DefaultDuration)), true
	}
	if t := cfg.WaitP99[j.Tier]; t > 0 {
		since := w.Since
		if since.IsZero() {
			since = j.Submit
		}
		if lim := since.Add(t); !ok || lim.Before(at) {
			at, ok = lim, true
		}
	}
	return at, ok
}

// Slack is the unit's slack at now: its deadline less now less its
// remaining work (ok false without a deadline). Negative: the deadline
// cannot be kept any more.
func Slack(j *core.Job, done time.Duration, now time.Time, def time.Duration) (time.Duration, bool) {
	if j.Deadline.IsZero() {
		return 0, false
	}
	return j.Deadline.Sub(now) - Remaining(j, done, def), true
}

// AtRisk reports whether a unit whose latest start is at (ok: it has
// one) must get capacity now: its latest start is within cfg.RiskLead of
// now.
func AtRisk(at time.Time, ok bool, now time.Time, cfg Config) bool {
	return ok && !now.Add(cfg.RiskLead).Before(at)
}

// ordered is a pending unit with the time its place depends on.
type ordered struct {
	pend
	at time.Time
}

// deadlineOrder splits a tier's pending units into those that go first,
// in order — at-risk units by latest start, then units with a deadline by
// deadline — and the rest, which take fair-share turns. Ties go to the
// older unit, then by key, so the order is total.
func (p *pass) deadlineOrder(units []pend) (first, rest []pend) {
	var risky, dated []ordered
	for _, x := range units {
		at, ok := LatestStart(x.u.Job, x.w, p.cfg)
		switch {
		case AtRisk(at, ok, p.st.Now, p.cfg):
			risky = append(risky, ordered{x, at})
		case !x.u.Job.Deadline.IsZero():
			dated = append(dated, ordered{x, x.u.Job.Deadline})
		default:
			rest = append(rest, x)
		}
	}
	byTime := func(s []ordered) {
		sort.Slice(s, func(a, b int) bool {
			if !s[a].at.Equal(s[b].at) {
				return s[a].at.Before(s[b].at)
			}
			return olderUnit(s[a].u, s[b].u)
		})
	}
	byTime(risky)
	byTime(dated)
	first = make([]pend, 0, len(risky)+len(dated))
	for _, o := range risky {
		first = append(first, o.pend)
	}
	for _, o := range dated {
		first = append(first, o.pend)
	}
	return first, rest
}

// olderUnit orders units by submission, then job ID, then shard.
func olderUnit(a, b Unit) bool {
	if !a.Job.Submit.Equal(b.Job.Submit) {
		return a.Job.Submit.Before(b.Job.Submit)
	}
	if a.Job.ID != b.Job.ID {
		return a.Job.ID < b.Job.ID
	}
	return a.Shard < b.Shard
}

// stoppable reports whether a running unit may be stopped without putting
// its deadline at risk: restarted from its last checkpoint (the periodic
// one its checkpoint interval gives, or the recorded one), its latest
// start is still more than RiskLead away. Always true without a deadline
// or under Config.NoDeadlines.
func (p *pass) stoppable(a *Allocation) bool {
	j := a.Job
	if p.cfg.NoDeadlines || j.Deadline.IsZero() {
		return true
	}
	now := p.st.Now
	ck := a.LastCheckpoint
	if ci := j.CheckpointInterval; ci > 0 && now.After(a.Start) {
		if c := a.Start.Add(now.Sub(a.Start) / ci * ci); c.After(ck) {
			ck = c
		}
	}
	if ck.Before(a.Start) {
		ck = a.Start
	}
	done := a.Done + ck.Sub(a.Start)
	return !AtRisk(j.Deadline.Add(-Remaining(j, done, p.cfg.DefaultDuration)), true, now, p.cfg)
}
