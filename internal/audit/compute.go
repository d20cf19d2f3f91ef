package audit

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// jobStats is what one period shows of one job.
type jobStats struct {
	job *core.Job
	// per GPU model: allocated milli-seconds and cost
	msByModel   map[string]int64
	costByModel map[string]core.Micros
	cost        core.Micros
	ms, busy    int64
	utils       []int
	peakMem     int64 // -1 unknown
	memKnown    bool
	shared      bool
	// working: per unit run start, GPUs that showed work; unknown set when
	// a GPU of a run had no sample.
	working      map[string]int
	workUnknown  bool
	samples      int
	offPeak      core.Micros // saving if its time-of-use work had run at the floor
	peakSec      int64       // milli-seconds at a multiplier above the floor
	peakMult     int64
	floorMult    int64
	offPeakCost  core.Micros // cost of its work on time-of-use leases
	offPeakLease []string
}

type lineKey struct{ team, model string }

func (a *auditor) stats(id string, m map[string]*jobStats) *jobStats {
	s := m[id]
	if s == nil {
		s = &jobStats{job: a.jobs[id], msByModel: map[string]int64{}, costByModel: map[string]core.Micros{}, peakMem: -1, working: map[string]int{}, floorMult: 10000}
		m[id] = s
	}
	return s
}

// period audits window i.
func (a *auditor) period(i int) (PeriodReport, error) {
	w := a.windows[i]
	pr := PeriodReport{Window: w}
	lines := map[lineKey]*Line{}
	line := func(team, model string) *Line {
		k := lineKey{team, model}
		if lines[k] == nil {
			lines[k] = &Line{Team: team, GPUModel: model}
		}
		return lines[k]
	}
	js := map[string]*jobStats{}
	byLease := map[string][]*runInfo{}
	for _, r := range a.runs {
		byLease[r.LeaseID] = append(byLease[r.LeaseID], r)
	}
	var sum Summary
	for _, li := range a.order {
		part := li.parts[i]
		from, to := maxT(li.span.Start.Truncate(time.Second), w.From), minT(li.bill.PaidUntil, w.To)
		var paidSec int64
		if to.After(from) {
			paidSec = to.Unix() - from.Unix()
		} else {
			to = from
		}
		capMilli := int64(li.offer.CapMilli()) // a slice's paid capacity is its share
		capMS := paidSec * capMilli
		capW := new(big.Int).Mul(weight(li.plan, from, to), big.NewInt(capMilli))
		sum.Cost += part
		// Uses of this lease in the window, per job.
		type use struct {
			w, offNum *big.Int
			ms        int64
			peakSec   int64
		}
		uses := map[string]*use{}
		var usedW = new(big.Int)
		var usedMS int64
		for _, r := range byLease[li.ID] {
			ra, rb := maxT(r.From.Truncate(time.Second), from), minT(r.to.Truncate(time.Second), to)
			if !rb.After(ra) {
				continue
			}
			milli := int64(r.Milli) * int64(len(r.GPUs))
			ms := milli * (rb.Unix() - ra.Unix())
			rw := new(big.Int).Mul(weight(li.plan, ra, rb), big.NewInt(milli))
			u := uses[r.JobID]
			if u == nil {
				u = &use{w: new(big.Int), offNum: new(big.Int)}
				uses[r.JobID] = u
			}
			u.w.Add(u.w, rw)
			u.ms += ms
			if !li.plan.Committed() && li.minMult < li.maxMult {
				on, ps := offPeakWeight(li.plan, ra, rb, li.minMult)
				u.offNum.Add(u.offNum, on.Mul(on, big.NewInt(milli)))
				u.peakSec += ps * milli
			}
			usedW.Add(usedW, rw)
			usedMS += ms
			st := a.stats(r.JobID, js)
			st.ms += ms
			st.msByModel[li.offer.GPUModel] += ms
			if r.Milli < core.WholeGPU {
				st.shared = true
			}
			busy := a.observe(st, r, ra, rb, ms)
			st.busy += busy
			line(st.job.Team, li.offer.GPUModel).BusyMilliSeconds += busy
			sum.BusyMilliSeconds += busy
		}
		if usedMS > capMS {
			return pr, &core.FieldError{Field: "runs", Value: fmt.Sprintf("%d milli-GPU-seconds on lease %s", usedMS, li.ID), Allowed: fmt.Sprintf("at most its %d paid milli-GPU-seconds in the period", capMS)}
		}
		ids := make([]string, 0, len(uses))
		for id := range uses {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		weights := make([]*big.Int, 0, len(ids)+1)
		for _, id := range ids {
			weights = append(weights, uses[id].w)
		}
		idleW := new(big.Int).Sub(capW, usedW)
		if idleW.Sign() < 0 {
			idleW.SetInt64(0)
		}
		total := new(big.Int).Add(usedW, idleW)
		weights = append(weights, idleW)
		amounts := largestRemainder(part, weights, total)
		model := li.offer.GPUModel
		for k, id := range ids {
			u := uses[id]
			st := js[id]
			st.cost += amounts[k]
			st.costByModel[model] += amounts[k]
			l := line(st.job.Team, model)
			l.MilliSeconds += u.ms
			l.Cost += amounts[k]
			if u.offNum.Sign() > 0 && u.w.Sign() > 0 {
				st.offPeak += mulDivBig(amounts[k], u.offNum, u.w)
				st.offPeakCost += amounts[k]
				st.peakSec += u.peakSec
				st.peakMult = max(st.peakMult, li.maxMult)
				st.floorMult = min(st.floorMult, li.minMult)
				st.offPeakLease = append(st.offPeakLease, li.ID)
			}
		}
		idle := line(IdleTeam, model)
		idle.MilliSeconds += capMS - usedMS
		idle.Cost += amounts[len(ids)]
		sum.PaidMilliSeconds += capMS
		sum.AllocatedMilliSeconds += usedMS
		sum.IdleCost += amounts[len(ids)]
	}
	sum.AllocatedCost = sum.Cost - sum.IdleCost
	for _, al := range a.in.Alerts {
		if al.Raised.Before(w.From) || !al.Raised.Before(w.To) {
			continue
		}
		model := ""
		if li := a.leases[al.LeaseID]; li != nil {
			model = li.offer.GPUModel
		}
		team := al.Team
		if team == "" {
			team = IdleTeam
		}
		l := line(team, model)
		l.Alerts++
		sum.Alerts++
		if al.Kind == ZombieKind {
			l.ZombiesFound++
			sum.ZombiesFound++
			if !al.Resolved.IsZero() {
				l.ZombiesReleased++
				sum.ZombiesReleased++
			}
		}
	}
	// Lines, team filter.
	for _, l := range lines {
		if a.in.Team != "" && l.Team != a.in.Team || *l == (Line{Team: l.Team, GPUModel: l.GPUModel}) {
			continue
		}
		pr.Lines = append(pr.Lines, *l)
	}
	slices.SortFunc(pr.Lines, func(x, y Line) int {
		xi, yi := x.Team == IdleTeam, y.Team == IdleTeam
		if xi != yi {
			if xi {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(x.Team, y.Team), cmp.Compare(x.GPUModel, y.GPUModel))
	})
	if a.in.Team == "" {
		pr.Summary = sum
	} else {
		for _, l := range pr.Lines {
			pr.Summary.PaidMilliSeconds += l.MilliSeconds
			pr.Summary.AllocatedMilliSeconds += l.MilliSeconds
			pr.Summary.BusyMilliSeconds += l.BusyMilliSeconds
			pr.Summary.Cost += l.Cost
			pr.Summary.AllocatedCost += l.Cost
			pr.Summary.Alerts += l.Alerts
			pr.Summary.ZombiesFound += l.ZombiesFound
			pr.Summary.ZombiesReleased += l.ZombiesReleased
		}
	}
	// Jobs.
	ids := make([]string, 0, len(js))
	for id, st := range js {
		if a.in.Team != "" && st.job.Team != a.in.Team {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st := js[id]
		pr.Jobs = append(pr.Jobs, a.jobLine(st))
		pr.Recommendations = append(pr.Recommendations, a.jobRecommendations(w, st)...)
	}
	if a.in.Team == "" {
		recs, err := a.leaseChanges(i)
		if err != nil {
			return pr, err
		}
		pr.Recommendations = append(pr.Recommendations, recs...)
	}
	sortRecs(pr.Recommendations)
	for _, r := range pr.Recommendations {
		pr.Saving += r.Saving
	}
	if pr.Lines == nil {
		pr.Lines = []Line{}
	}
	if pr.Jobs == nil {
		pr.Jobs = []JobLine{}
	}
	if pr.Recommendations == nil {
		pr.Recommendations = []Recommendation{}
	}
	return pr, nil
}

// observe reads the samples of run r's GPUs in [ra, rb).
func (a *auditor) observe(st *jobStats, r *runInfo, ra, rb time.Time, ms int64) int64 {
	var sumUtil, n int64
	working := 0
	for _, g := range r.GPUs {
		ss := a.samples[gpuKey{r.LeaseID, g}]
		lo, _ := slices.BinarySearchFunc(ss, ra, func(s core.Sample, t time.Time) int { return s.At.Compare(t) })
		hi, _ := slices.BinarySearchFunc(ss, rb, func(s core.Sample, t time.Time) int { return s.At.Compare(t) })
		if lo >= hi {
			st.workUnknown = true
			continue
		}
		maxUtil := 0
		for _, s := range ss[lo:hi] {
			sumUtil += int64(s.UtilPct)
			n++
			st.utils = append(st.utils, s.UtilPct)
			maxUtil = max(maxUtil, s.UtilPct)
			if r.Milli == core.WholeGPU && s.MemUsedMiB >= 0 { // < 0: no memory reading (a utilization series)
				st.peakMem = max(st.peakMem, s.MemUsedMiB)
				st.memKnown = true
			}
		}
		if maxUtil >= a.cfg.WorkUtilPct {
			working++
		}
	}
	st.samples += int(n)
	// Parts of one gang run started together: their working GPUs add up.
	st.working[fmt.Sprintf("%s@%d", r.Unit, r.From.Unix())] += working
	if n == 0 {
		return 0
	}
	return core.MulDivHalfEven(ms, sumUtil, 100*n)
}

// mainModel is the GPU model a job used most in the period (ties: the
// first by name).
func (a *auditor) mainModel(st *jobStats) string {
	best, bestMS := "", int64(-1)
	for m, ms := range st.msByModel {
		if ms > bestMS || ms == bestMS && m < best {
			best, bestMS = m, ms
		}
	}
	return best
}

func (a *auditor) jobLine(st *jobStats) JobLine {
	j := st.job
	jl := JobLine{JobID: j.ID, Team: j.Team, Tier: j.Tier, GPUModel: a.mainModel(st), GPUs: j.Request.GPUs, MemAskedMiB: j.Request.MemPerGPUMiB,
		PeakMemMiB: -1, UtilP95Pct: -1, WorkingGPUs: -1, Samples: st.samples, AllocatedMilliSeconds: st.ms, BusyMilliSeconds: st.busy, Cost: st.cost}
	if st.memKnown && !st.shared {
		jl.PeakMemMiB = st.peakMem
	}
	if len(st.utils) > 0 {
		jl.UtilP95Pct = p95(st.utils)
	}
	if !st.workUnknown {
		jl.WorkingGPUs = 0
		for _, n := range st.working {
			jl.WorkingGPUs = max(jl.WorkingGPUs, n)
		}
	}
	return jl
}

// p95 is the nearest-rank 95th percentile.
func p95(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	k := (95*len(s) + 99) / 100 // ceil(0.95 n)
	return s[max(k, 1)-1]
}
