package billing

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// UsageLease is one lease as a usage report sees it: its plan, its GPUs
// and when it was held. End is zero while it is still held. A lease
// renewed on another term (core.Lease.Earlier) comes once per term, each
// with its plan and span and the same ID: each term's bill is allocated
// to the runs within it, and the runs' readings are counted once.
type UsageLease struct {
	ID   string
	Plan *core.PricePlan
	GPUs int
	// SliceMilli is the share of its one GPU a GPU slice has (0: whole
	// GPUs): the lease's paid capacity is that share.
	SliceMilli core.Milli
	Start, End time.Time
	// Reclaimed marks a spot lease the provider took back at End.
	Reclaimed bool
}

// UsageRun is one stretch a team's unit held GPUs of a lease, each at
// MilliPerGPU, from From to To (zero To: still running).
type UsageRun struct {
	Team        string
	LeaseID     string
	GPUs        []int
	MilliPerGPU core.Milli
	From, To    time.Time
}

// UsageInput is everything a usage report is computed from; the server
// loads it from its store, a test or the simulator builds it.
type UsageInput struct {
	// From and To bound the report, [From, To); Now caps what is still
	// held or running (a report of the future stops at Now).
	From, To, Now time.Time
	Leases        []UsageLease
	Runs          []UsageRun
	// Samples are GPU readings; busy time is counted where there are
	// some.
	Samples []core.Sample
}

// UsageLine is one team's part of a usage report (or the idle part).
type UsageLine struct {
	Team string
	// Cost is the team's share of the charges incurred in the range.
	Cost core.Micros
	// AllocatedMilliSeconds is milli-GPU-seconds of billed time the team
	// held (for the idle line: paid and held by nobody).
	AllocatedMilliSeconds int64
	// SampledMilliSeconds is the part of the allocated time that GPU
	// readings cover, and BusyMilliSeconds that part weighted by the
	// measured utilization: busy share = busy / sampled.
	SampledMilliSeconds int64
	BusyMilliSeconds    int64
}

// UsageTotals is a cost and utilization report over a range: what was paid,
// how it splits among teams, and the idle rest.
type UsageTotals struct {
	From, To time.Time
	// Bill is the charges incurred in the range; Lines (sorted by team)
	// and Idle sum to it exactly. A team has a line when something of it
	// falls in the range: cost, allocated, sampled or busy time.
	Bill  core.Micros
	Lines []UsageLine
	Idle  UsageLine
	// PaidMilliSeconds is the billed milli-GPU-seconds of the range:
	// the lines' allocated time plus the idle line's.
	PaidMilliSeconds int64
	Leases           int
}

// UsageReport computes the cost and utilization per team over [From,
// To). A lease's charges are counted when they are incurred: the part of
// its bill (allocated to teams as Allocate does, idle explicit) that
// accrues between From and To, that is its allocation held to To minus
// its allocation held to From. Consecutive ranges therefore add up to the
// whole bill, team by team, to the micro-unit. A committed term is
// incurred in full when it starts; time later used on it moves money from
// the idle line to the team that used it, so in a range after the start
// the idle line can be negative. The server, the dashboard and the CLI
// all show this function's numbers, so they agree.
func UsageReport(in UsageInput) (UsageTotals, error) {
	if !in.To.After(in.From) {
		return UsageTotals{}, &core.FieldError{Field: "to", Value: in.To.UTC().Format(time.RFC3339), Allowed: "a time after from " + in.From.UTC().Format(time.RFC3339)}
	}
	out := UsageTotals{From: in.From, To: in.To}
	runsOf := map[string][]UsageRun{}
	for _, r := range in.Runs {
		runsOf[r.LeaseID] = append(runsOf[r.LeaseID], r)
	}
	type gpuKey struct {
		lease string
		gpu   int
	}
	samplesOf := map[gpuKey][]core.Sample{}
	for _, s := range in.Samples {
		k := gpuKey{s.LeaseID, s.GPU}
		samplesOf[k] = append(samplesOf[k], s)
	}
	for _, ss := range samplesOf {
		sort.Slice(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) })
	}
	lines := map[string]*UsageLine{}
	line := func(team string) *UsageLine {
		if lines[team] == nil {
			lines[team] = &UsageLine{Team: team}
		}
		return lines[team]
	}
	out.Idle.Team = IdleTeam
	end := minTime(in.To, in.Now)
	counted := map[string]bool{} // a renewed lease comes once per term
	for i := range in.Leases {
		l := &in.Leases[i]
		if l.Start.IsZero() || !l.Start.Before(end) || (!l.End.IsZero() && !l.End.After(in.From)) {
			continue // nothing held in the range
		}
		first := !counted[l.ID]
		if first {
			counted[l.ID] = true
			out.Leases++
		}
		runs := runsOf[l.ID]
		hi, err := allocatedTo(l, runs, end, in.Now)
		if err != nil {
			return UsageTotals{}, fmt.Errorf("usage: lease %s: %w", l.ID, err)
		}
		lo, err := allocatedTo(l, runs, in.From, in.Now)
		if err != nil {
			return UsageTotals{}, fmt.Errorf("usage: lease %s: %w", l.ID, err)
		}
		out.Bill += hi.Bill - lo.Bill
		for _, ln := range hi.Lines {
			x := line(ln.Team)
			x.Cost += ln.Amount
			x.AllocatedMilliSeconds += ln.MilliSeconds
		}
		for _, ln := range lo.Lines {
			x := line(ln.Team)
			x.Cost -= ln.Amount
			x.AllocatedMilliSeconds -= ln.MilliSeconds
		}
		out.Idle.Cost += hi.Idle.Amount - lo.Idle.Amount
		out.Idle.AllocatedMilliSeconds += hi.Idle.MilliSeconds - lo.Idle.MilliSeconds
		if !first {
			continue // the runs' readings are counted with the lease's first term
		}
		for _, r := range runs {
			a, z := maxTime(r.From, in.From), minTime(runEnd(r, in.Now), end)
			if !z.After(a) {
				continue
			}
			for _, g := range r.GPUs {
				sampled, busy := busyTime(samplesOf[gpuKey{l.ID, g}], a, z, r.MilliPerGPU)
				x := line(r.Team)
				x.SampledMilliSeconds += sampled
				x.BusyMilliSeconds += busy
			}
		}
	}
	for _, x := range lines {
		if *x == (UsageLine{Team: x.Team}) {
			// Only a run before the range: it shapes the allocation at
			// both ends, but nothing of it falls in the range.
			continue
		}
		out.Lines = append(out.Lines, *x)
		out.PaidMilliSeconds += x.AllocatedMilliSeconds
	}
	out.PaidMilliSeconds += out.Idle.AllocatedMilliSeconds
	sort.Slice(out.Lines, func(i, j int) bool { return out.Lines[i].Team < out.Lines[j].Team })
	return out, nil
}

// allocatedTo is lease l's allocation as if the report looked at it at
// t (or now, if earlier): held until then (or its end, if earlier), the
// runs cut there. Before the
// lease starts nothing is incurred.
func allocatedTo(l *UsageLease, runs []UsageRun, t, now time.Time) (Allocation, error) {
	t = minTime(t, now) // nothing is incurred after now
	if !t.After(l.Start) {
		return Allocation{}, nil
	}
	held := t
	reclaimed := false
	if !l.End.IsZero() && !l.End.After(t) {
		held, reclaimed = l.End, l.Reclaimed
	}
	uses := make([]Use, 0, len(runs))
	for _, r := range runs {
		to := minTime(runEnd(r, now), held)
		if !to.After(r.From) {
			continue
		}
		uses = append(uses, Use{Team: r.Team, Milli: core.Milli(len(r.GPUs)) * r.MilliPerGPU, From: r.From, To: to})
	}
	capMilli := core.Milli(l.GPUs) * core.WholeGPU
	if l.SliceMilli > 0 {
		capMilli = core.Milli(l.GPUs) * l.SliceMilli
	}
	return AllocateMilli(l.Plan, capMilli, Span{Start: l.Start, End: held, Reclaimed: reclaimed}, uses)
}

func runEnd(r UsageRun, now time.Time) time.Time {
	if r.To.IsZero() {
		return now
	}
	return r.To
}

// busyTime returns the milli-GPU-seconds of [a, z) at milli on one GPU
// that samples cover, and that time weighted by utilization. A sample
// stands for the time until the next one (the last one for nothing past
// z), so irregular readings weigh what they cover.
func busyTime(ss []core.Sample, a, z time.Time, milli core.Milli) (sampled, busy int64) {
	i := sort.Search(len(ss), func(i int) bool { return !ss[i].At.Before(a) })
	for ; i < len(ss) && ss[i].At.Before(z); i++ {
		next := z
		if i+1 < len(ss) && ss[i+1].At.Before(z) {
			next = ss[i+1].At
		}
		sec := int64(next.Sub(ss[i].At) / time.Second)
		ms := sec * int64(milli)
		sampled += ms
		busy += core.MulDivHalfEven(ms, int64(ss[i].UtilPct), 100)
	}
	return sampled, busy
}
