package audit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
)

// kindRank orders kinds whose savings tie: the first listed wins.
var kindRank = map[Kind]int{RightSizeMemory: 0, ModelDowngrade: 1, RightSizeCount: 2, OffPeak: 3, LeaseChange: 4}

// costAt prices ms milli-GPU-seconds at rate per GPU-hour.
func costAt(ms int64, rate core.Micros) core.Micros {
	return core.Micros(core.MulDivHalfEven(ms, int64(rate), core.Hour.Seconds()*int64(core.WholeGPU)))
}

// gpuHours formats milli-GPU-seconds as GPU-hours, to three decimals at
// most.
func gpuHours(ms int64) string {
	v := core.MulDivHalfEven(ms, 1000, core.Hour.Seconds()*int64(core.WholeGPU))
	return core.Micros(v * 1000).Decimal()
}

func mib(v int64) string { return fmt.Sprintf("%d MiB", v) }

// allowed reports whether job j may run on model m.
func allowed(j *core.Job, m string) bool {
	return len(j.Request.Models) == 0 || slices.Contains(j.Request.Models, m)
}

// fast reports whether model cand does the job's observed work: with a
// throughput table naming both models, cand at TargetUtilPct must match
// cur at the job's p95 utilization; without a table, speed is not
// checked; with a table that lacks either model it is unknown (false).
func (a *auditor) fast(j *core.Job, cur, cand string, p95 int) (bool, string) {
	tp := j.Request.Throughput
	if len(tp) == 0 {
		return true, ""
	}
	tc, ok1 := tp[cur]
	tn, ok2 := tp[cand]
	if !ok1 || !ok2 {
		return false, ""
	}
	need := tc * int64(p95)
	have := tn * int64(a.cfg.TargetUtilPct)
	return have >= need, fmt.Sprintf("%d/h on %s at p95 %d%% needs %d/h; %s does %d/h at %d%%", tc, cur, p95, tc*int64(p95)/100, cand, tn*int64(a.cfg.TargetUtilPct)/100, a.cfg.TargetUtilPct)
}

// cheapest returns the cheapest model by on-demand GPU-hour (then name)
// other than cur that ok accepts.
func (a *auditor) cheapest(cur string, ok func(modelRate) bool) (modelRate, bool) {
	var best modelRate
	found := false
	models := make([]string, 0, len(a.rates))
	for m := range a.rates {
		models = append(models, m)
	}
	slices.Sort(models)
	for _, m := range models {
		r := a.rates[m]
		if m == cur || !ok(r) {
			continue
		}
		if !found || r.perHour < best.perHour {
			best, found = r, true
		}
	}
	return best, found
}

func (a *auditor) modelMem(model string) int64 {
	if r, ok := a.rates[model]; ok {
		return r.memMiB
	}
	var m int64
	for _, o := range a.in.Offers {
		if o.GPUModel == model {
			m = max(m, o.GPUMemMiB)
		}
	}
	return m
}

// jobRecommendations returns at most one recommendation for the job: the
// largest saving among right-size memory, model downgrade, right-size
// count and off-peak, with the others listed as superseded.
func (a *auditor) jobRecommendations(w Window, st *jobStats) []Recommendation {
	jl := a.jobLine(st)
	j := st.job
	cur := jl.GPUModel
	ms, cost := st.msByModel[cur], st.costByModel[cur]
	var cands []Recommendation
	newRec := func(k Kind, action string, saving core.Micros, ev ...Evidence) {
		if saving < a.cfg.MinSaving || saving <= 0 {
			return
		}
		cands = append(cands, Recommendation{ID: fmt.Sprintf("%s/%s/%s", k, w.Label, j.ID), Kind: k, Period: w.Label, Team: j.Team, Subject: j.ID,
			Action: action, Saving: saving, Evidence: ev})
	}
	enough := st.samples >= a.cfg.MinSamples
	curMem := a.modelMem(cur)
	base := []Evidence{{"gpu_model", cur}, {"gpu_hours", gpuHours(ms)}, {"cost", cost.Decimal()}}

	// Right-size memory.
	asked := j.Request.MemPerGPUMiB
	if enough && jl.PeakMemMiB >= 0 && asked > 0 && jl.PeakMemMiB*10000 <= asked*a.cfg.MemPeakBP {
		need := core.MulDivHalfEven(jl.PeakMemMiB, a.cfg.MemHeadroomBP, 10000)
		ev := append(slices.Clone(base), Evidence{"mem_asked", mib(asked)}, Evidence{"mem_peak", mib(jl.PeakMemMiB)},
			Evidence{"mem_peak_share", bpString(core.MulDivHalfEven(jl.PeakMemMiB, 10000, asked))}, Evidence{"mem_needed", mib(need)},
			Evidence{"samples", fmt.Sprint(st.samples)})
		var best Recommendation
		var bestOK bool
		// A smaller model.
		if m, ok := a.cheapest(cur, func(r modelRate) bool {
			f, _ := a.fast(j, cur, r.model, max(jl.UtilP95Pct, 0))
			return r.memMiB >= need && r.memMiB < curMem && allowed(j, r.model) && f
		}); ok {
			nc := costAt(ms, m.perHour)
			best = Recommendation{Action: fmt.Sprintf("ask %s per GPU and run on %s (%s, %s per GPU-hour) instead of %s (%s)", mib(need), m.model, mib(m.memMiB), m.perHour.Decimal(), cur, mib(curMem)),
				Saving: cost - nc, Evidence: append(slices.Clone(ev), Evidence{"to_model", m.model}, Evidence{"to_rate_per_gpu_hour", m.perHour.Decimal()}, Evidence{"cost_after", nc.Decimal()})}
			bestOK = true
		}
		// A share of the same GPU (single-GPU jobs only share).
		if j.Request.GPUs == 1 && curMem > 0 {
			step := int64(a.cfg.ShareStepMilli)
			milli := (need*int64(core.WholeGPU) + curMem - 1) / curMem
			milli = (milli + step - 1) / step * step
			if milli < int64(core.WholeGPU) {
				nc := core.Micros(core.MulDivHalfEven(int64(cost), milli, int64(core.WholeGPU)))
				share := Recommendation{Action: fmt.Sprintf("ask %s and a %d milli-GPU share of %s instead of a whole GPU", mib(need), milli, cur),
					Saving: cost - nc, Evidence: append(slices.Clone(ev), Evidence{"to_share_milli", fmt.Sprint(milli)}, Evidence{"cost_after", nc.Decimal()})}
				switch {
				case !bestOK:
					best, bestOK = share, true
				case share.Saving > best.Saving:
					share.Evidence = append(share.Evidence, Evidence{"other_option", fmt.Sprintf("%s (saving %s)", best.Evidence[len(ev)].Value, best.Saving.Decimal())})
					best = share
				default:
					best.Evidence = append(best.Evidence, Evidence{"other_option", fmt.Sprintf("a %d milli-GPU share (saving %s)", milli, share.Saving.Decimal())})
				}
			}
		}
		if bestOK {
			newRec(RightSizeMemory, best.Action, best.Saving, best.Evidence...)
		}
	}

	// Model downgrade.
	if enough && jl.UtilP95Pct >= 0 && jl.UtilP95Pct < a.cfg.UtilP95Pct {
		needMem := asked
		if jl.PeakMemMiB >= 0 {
			needMem = max(needMem, core.MulDivHalfEven(jl.PeakMemMiB, a.cfg.MemHeadroomBP, 10000))
			if asked > 0 && jl.PeakMemMiB*10000 <= asked*a.cfg.MemPeakBP {
				// Memory right-sizing is its own recommendation; the
				// downgrade keeps what the job asked.
				needMem = asked
			}
		}
		if needMem == 0 {
			needMem = curMem
		}
		var speed string
		curRate := a.rates[cur].perHour
		if m, ok := a.cheapest(cur, func(r modelRate) bool {
			f, why := a.fast(j, cur, r.model, jl.UtilP95Pct)
			if f {
				speed = why
			}
			return r.memMiB >= needMem && allowed(j, r.model) && f && (curRate == 0 || r.perHour < curRate)
		}); ok {
			_, speed = a.fast(j, cur, m.model, jl.UtilP95Pct)
			nc := costAt(ms, m.perHour)
			ev := append(slices.Clone(base), Evidence{"util_p95", fmt.Sprintf("%d%%", jl.UtilP95Pct)}, Evidence{"util_threshold", fmt.Sprintf("%d%%", a.cfg.UtilP95Pct)},
				Evidence{"samples", fmt.Sprint(st.samples)}, Evidence{"mem_needed", mib(needMem)}, Evidence{"from_rate_per_gpu_hour", curRate.Decimal()},
				Evidence{"to_model", m.model}, Evidence{"to_mem", mib(m.memMiB)}, Evidence{"to_rate_per_gpu_hour", m.perHour.Decimal()})
			if speed != "" {
				ev = append(ev, Evidence{"throughput", speed})
			}
			ev = append(ev, Evidence{"cost_after", nc.Decimal()})
			newRec(ModelDowngrade, fmt.Sprintf("run on %s (%s, %s per GPU-hour) instead of %s: p95 utilization %d%%", m.model, mib(m.memMiB), m.perHour.Decimal(), cur, jl.UtilP95Pct), cost-nc, ev...)
		}
	}

	// Right-size count.
	if G := j.Request.GPUs; G > 1 && enough && jl.WorkingGPUs >= 0 && jl.WorkingGPUs < G {
		k := max(jl.WorkingGPUs, 1)
		nc := core.Micros(core.MulDivHalfEven(int64(cost), int64(k), int64(G)))
		newRec(RightSizeCount, fmt.Sprintf("ask %d GPUs instead of %d: only %d showed work (a sample at %d%% or more)", k, G, jl.WorkingGPUs, a.cfg.WorkUtilPct), cost-nc,
			append(slices.Clone(base), Evidence{"gpus_asked", fmt.Sprint(G)}, Evidence{"gpus_working", fmt.Sprint(jl.WorkingGPUs)},
				Evidence{"work_threshold", fmt.Sprintf("%d%%", a.cfg.WorkUtilPct)}, Evidence{"samples", fmt.Sprint(st.samples)}, Evidence{"cost_after", nc.Decimal()})...)
	}

	// Off-peak.
	if (j.Deferrable || j.Tier == core.TierOffline) && st.offPeak > 0 {
		leases := slices.Compact(slices.Sorted(slices.Values(st.offPeakLease)))
		why := "deferrable"
		if !j.Deferrable {
			why = "offline tier"
		}
		newRec(OffPeak, fmt.Sprintf("run this %s work in the off-peak window (multiplier %s instead of up to %s)", why, bpMult(st.floorMult), bpMult(st.peakMult)), st.offPeak,
			Evidence{"cost_on_time_of_use_leases", st.offPeakCost.Decimal()}, Evidence{"peak_gpu_hours", gpuHours(st.peakSec)},
			Evidence{"peak_multiplier", bpMult(st.peakMult)}, Evidence{"off_peak_multiplier", bpMult(st.floorMult)},
			Evidence{"leases", strings.Join(leases, " ")}, Evidence{"cost_after", (st.offPeakCost - st.offPeak).Decimal()})
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortStableFunc(cands, func(x, y Recommendation) int {
		return cmp.Or(cmp.Compare(y.Saving, x.Saving), cmp.Compare(kindRank[x.Kind], kindRank[y.Kind]))
	})
	best := cands[0]
	for _, c := range cands[1:] {
		best.Supersedes = append(best.Supersedes, Superseded{Kind: c.Kind, Action: c.Action, Saving: c.Saving})
	}
	return []Recommendation{best}
}

func bpString(bp int64) string {
	return fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
}

func bpMult(bp int64) string {
	return core.Micros(bp*100).Decimal() + "x"
}

// leaseChanges compares, per GPU model, the committed base held in window
// i with the base the planner would hold for the window's observed
// demand. The current way costs what the committed leases' bills put in
// the window plus the demand above them on demand at each hour's cheapest
// rate; the planner's way costs what the planner says (its base at its
// term cost, the rest on demand).
func (a *auditor) leaseChanges(i int) ([]Recommendation, error) {
	w := a.windows[i]
	secs := w.To.Unix() - w.From.Unix()
	H := int((secs + 3599) / 3600)
	type classData struct {
		demandMS []int64
		// committedSec is GPU-seconds of committed leases per hour, and
		// committed their total; committedCost their bills' parts.
		committedSec  []int64
		committed     int64
		committedCost core.Micros
	}
	data := map[string]*classData{}
	get := func(m string) *classData {
		if data[m] == nil {
			data[m] = &classData{demandMS: make([]int64, H), committedSec: make([]int64, H)}
		}
		return data[m]
	}
	// hours spreads [from, to) over the window's hours.
	hours := func(from, to time.Time, add func(h int, sec int64)) {
		for t := from; t.Before(to); {
			h := int((t.Unix() - w.From.Unix()) / 3600)
			end := minT(to, w.From.Add(time.Duration(h+1)*time.Hour))
			add(h, end.Unix()-t.Unix())
			t = end
		}
	}
	for _, li := range a.order {
		if !li.plan.Committed() {
			continue
		}
		d := get(li.offer.GPUModel)
		d.committedCost += li.parts[i]
		from, to := maxT(li.span.Start.Truncate(time.Second), w.From), minT(li.bill.PaidUntil, w.To)
		gpus := int64(li.offer.GPUs)
		hours(from, to, func(h int, sec int64) {
			d.committedSec[h] += gpus * sec
			d.committed += gpus * sec
		})
	}
	for _, r := range a.runs {
		li := r.lease
		from, to := maxT(maxT(r.From.Truncate(time.Second), w.From), li.span.Start.Truncate(time.Second)), minT(minT(r.to.Truncate(time.Second), w.To), li.bill.PaidUntil)
		d := get(li.offer.GPUModel)
		milli := int64(r.Milli) * int64(len(r.GPUs))
		hours(from, to, func(h int, sec int64) { d.demandMS[h] += milli * sec })
	}
	models := make([]string, 0, len(data))
	for m := range data {
		models = append(models, m)
	}
	slices.Sort(models)
	offersOf := func(m string) []core.Offer {
		var out []core.Offer
		for _, o := range a.in.Offers {
			if o.GPUModel == m {
				out = append(out, o)
			}
		}
		return out
	}
	var out []Recommendation
	for _, m := range models {
		d := data[m]
		demand := make([]int64, H)
		var peak, gh int64
		for h, v := range d.demandMS {
			demand[h] = (v + 3_600_000 - 1) / 3_600_000
			peak = max(peak, demand[h])
			gh += demand[h]
		}
		B := core.MulDivHalfEven(d.committed, 1, secs)
		if B == 0 {
			continue // no base held: the planner's base, if any, is plan portfolio's advice
		}
		classes, err := plan.Classes(offersOf(m))
		if err != nil || len(classes) != 1 {
			continue
		}
		cls := classes[0]
		pf, err := plan.PlanPortfolio(plan.PortfolioRequest{
			Demand: plan.Series{Start: w.From, Hours: H, Classes: []plan.ClassDemand{{GPUModel: m, GPUs: demand}}},
			Prices: classes, ShiftWindow: 1, NoSensitivity: true,
		})
		if err != nil || len(pf.Classes) != 1 {
			continue
		}
		cp := pf.Classes[0]
		r := cp.Reserved
		if r == B {
			continue
		}
		// The current way: the committed bills, and on demand above them.
		cur := d.committedCost
		var odHours int64
		priced := true
		for h, v := range demand {
			held := (d.committedSec[h] + 3599) / 3600
			if v <= held {
				continue
			}
			if len(cls.OnDemand) == 0 {
				priced = false
				break
			}
			best := core.Micros(math.MaxInt64)
			t := w.From.Add(time.Duration(h) * time.Hour)
			for _, o := range cls.OnDemand {
				best = min(best, o.At(t))
			}
			cur += core.Micros(v-held) * best
			odHours += v - held
		}
		saving := cur - cp.Cost
		if !priced || saving < a.cfg.MinSaving || saving <= 0 {
			continue
		}
		dir := "too large"
		if B < r {
			dir = "too small"
		}
		term := "none"
		if r > 0 {
			term = cp.Base.Describe()
		}
		action := fmt.Sprintf("hold %d committed %s GPUs instead of %d: the base is %s for the demand", r, m, B, dir)
		if r > 0 {
			action = fmt.Sprintf("hold %d committed %s GPUs (%s each) instead of %d: the base is %s for the demand", r, m, term, B, dir)
		}
		out = append(out, Recommendation{ID: fmt.Sprintf("%s/%s/%s", LeaseChange, w.Label, m), Kind: LeaseChange, Period: w.Label, Subject: m,
			Action: action, Saving: saving, Evidence: []Evidence{
				{"gpu_model", m}, {"committed_gpus_now", fmt.Sprint(B)}, {"committed_gpus_planned", fmt.Sprint(r)}, {"planned_term", term},
				{"demand_gpu_hours", fmt.Sprint(gh)}, {"demand_peak_gpus", fmt.Sprint(peak)}, {"hours", fmt.Sprint(H)},
				{"committed_cost", d.committedCost.Decimal()}, {"on_demand_gpu_hours_now", fmt.Sprint(odHours)},
				{"cost_now", cur.Decimal()}, {"planner_cost", cp.Cost.Decimal()}, {"planner_reason", cp.Reason},
			}})
	}
	return out, nil
}
