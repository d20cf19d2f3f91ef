package fleet

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Demand is a unit the scheduler could not place, and since when it waits.
type Demand struct {
	Unit  sched.Unit
	Since time.Time
	// NoSpot is set for work that must not go to spot any more (too many
	// reclaims, or its deadline is at risk).
	NoSpot bool
	// RentBy, when set, is the latest time a machine can be rented for
	// the unit and still keep its deadline or wait target (the
	// scheduler's latest start less the time capacity takes to come):
	// from then on it is rented for whatever its tier's wait target says.
	// StartBy is that latest start.
	RentBy, StartBy time.Time
	// Freeing: GPUs that running work frees by its estimate before a
	// machine rented now could be ready will take the unit. Nothing is
	// rented for it: the machine would come after, to stand empty or take
	// work that was not waiting for it.
	Freeing bool
}

// Acquisition is a decision to rent one machine.
type Acquisition struct {
	Offer *core.Offer
	Mode  core.BillingMode
	// For lists the units the machine is rented for.
	For []string
	// ExpectedCost is the bill expected over the work's estimated time;
	// PerUsefulGPUHour divides it by the GPU-hours the work uses.
	ExpectedCost     core.Micros
	PerUsefulGPUHour core.Micros
	Reason           string
	// Joined: the machine is one that joined by its agent and waits
	// (AcquireJoined), not one to rent.
	Joined bool
}

// Budget is what Acquire needs to know of a team's money.
type Budget struct {
	Limit core.Micros // 0: none
	Spent core.Micros
}

// planned is a machine being rented in this step, with room left.
type planned struct {
	acq  *Acquisition
	free []core.Milli // per GPU
}

// option is one way to rent for a unit.
type option struct {
	offer  *core.Offer
	mode   core.BillingMode
	cost   core.Micros // expected bill of one machine over the work
	perGPU core.Micros // cost per useful GPU-hour, the ranking key
	why    string
	// committed: a term paid whatever the use.
	committed bool
}

// Acquire decides which machines to rent for the waiting demand. Demand
// that has waited past its tier's target (or any demand when the fleet is
// above the scale-out utilization) is packed first into machines already
// chosen this step, else into a new machine of the offer and mode with
// the lowest expected cost per useful GPU-hour among the admissible ones.
// Machines still provisioning count as capacity on its way: demand packs
// into them before anything new is rented, so a queue that waits for a
// machine to boot does not rent another each step. fleetUtilBP is the
// current allocated share of paid GPUs. out, if not nil, is the recent
// demand committed terms are priced on (see Outlook). refused are the
// offers' modes the provider lately refused for capacity (Refused): one
// held at now is not rented, and the work goes to the next cheapest
// admissible offer and mode, or waits.
func Acquire(now time.Time, demand []Demand, machines []Machine, offers []core.Offer, budgets map[string]Budget, fleetUtilBP int64, out *Outlook, refused []core.Refusal, cfg Config) []Acquisition {
	cfg = cfg.Defaults()
	skip := held(refused, now)
	ds := append([]Demand(nil), demand...)
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Unit.Job, ds[j].Unit.Job
		if a.Tier.Rank() != b.Tier.Rank() {
			return a.Tier.Rank() < b.Tier.Rank()
		}
		return ds[i].Since.Before(ds[j].Since)
	})
	var plan []*planned
	for i := range machines {
		m := &machines[i]
		if m.Lease.State.Final() || !m.ReadyAt.IsZero() {
			continue
		}
		p := &planned{acq: &Acquisition{Offer: m.Offer, Mode: m.Lease.Mode, For: slices.Clone(m.For)}, free: newFree(m.Offer)}
		plan = append(plan, p)
	}
	inflight := len(plan)
	// committed is the committed capacity, with what is rented so far
	// this step: where a new committed machine goes on the load-duration
	// curve. termFor are the units a term longer than the outlook, still
	// in force, was rented for (see priceOption's displaced).
	var committed int64
	var termFor map[string]bool
	for i := range machines {
		m := &machines[i]
		if m.Lease.State.Final() || !m.Plan.Committed() {
			continue
		}
		committed += int64(m.CapMilli())
		if time.Duration(m.Plan.Term)*time.Second <= cfg.OutlookHorizon {
			continue
		}
		for _, k := range m.For {
			if termFor == nil {
				termFor = map[string]bool{}
			}
			termFor[k] = true
		}
	}
	spent := map[string]core.Micros{}
	for t, b := range budgets {
		spent[t] = b.Spent
	}
	for _, d := range ds {
		if len(plan)-inflight >= cfg.MaxAcquire {
			break
		}
		if d.Freeing {
			continue
		}
		j := d.Unit.Job
		atRisk := !d.RentBy.IsZero() && !now.Before(d.RentBy)
		if now.Sub(d.Since) < cfg.WaitTarget[j.Tier] && fleetUtilBP <= cfg.ScaleOutBP && !atRisk {
			continue
		}
		// Work packs into machines on their way; with NoPacking (one
		// machine per unit) only into those rented for it at earlier
		// steps, so that a unit waiting for its machine to boot does not
		// rent another at every step.
		pool := plan
		if cfg.NoPacking {
			pool = rentedFor(plan[:inflight], d.Unit.Key())
		}
		if packInto(pool, d) {
			continue
		}
		opt, ok := bestOption(now, d, offers, out, committed, termFor[d.Unit.Key()], skip, 0, true, cfg)
		if !ok {
			continue
		}
		if b, ok := budgets[j.Team]; ok && b.Limit > 0 && spent[j.Team]+opt.cost > b.Limit {
			continue // the fleet stops at the cap; the budget alert says so
		}
		spent[j.Team] += opt.cost
		machines := machinesFor(opt.offer, j)
		for k := 0; k < machines; k++ {
			acq := &Acquisition{Offer: opt.offer, Mode: opt.mode, For: []string{d.Unit.Key()}, ExpectedCost: opt.cost, PerUsefulGPUHour: opt.perGPU,
				Reason: waitedWhy(now, d, atRisk, cfg) + opt.why}
			p := &planned{acq: acq, free: newFree(opt.offer)}
			take(p, j.Request, k, machines)
			plan = append(plan, p)
			if opt.committed {
				committed += int64(opt.offer.CapMilli())
			}
		}
	}
	acqs := make([]Acquisition, 0, len(plan)-inflight)
	for _, p := range plan[inflight:] {
		acqs = append(acqs, *p.acq)
	}
	return acqs
}

// RentCost is the cost per useful GPU-hour of renting for d alone over
// its own estimated run (no forecast: what the work alone pays for), the
// cheapest among pay-as-you-go and committed terms no longer than the
// outlook (a day), renewed over the run: when that is a term, or when the
// run is at least the outlook long; 0 otherwise (and when nothing admits
// the unit). The scheduler keeps the unit off pay-as-you-go machines where
// what it adds to their bill costs more (sched.State.RentCost), and
// Acquire rents for it. Shorter work is not held for a pay-as-you-go
// machine of its own: the provisioning delay it would wait is not small
// beside its run, and the saving is cents. Terms longer than a day are
// left out, cheaper or not: they are bought on the fleet's forecast
// (Acquire), never held out for one unit — kept waiting for a month, one
// long job would rent a month, as bursts once did on the monthly-only
// catalog.
func RentCost(now time.Time, d Demand, offers []core.Offer, refused []core.Refusal, cfg Config) core.Micros {
	cfg = cfg.Defaults()
	opt, ok := bestOption(now, d, offers, nil, 0, false, held(refused, now), cfg.OutlookHorizon, false, cfg)
	if !ok || !opt.committed && d.Unit.Job.EstDuration < cfg.OutlookHorizon {
		return 0
	}
	return opt.perGPU
}

// waitedWhy says why a machine is rented for d: its wait past its tier's
// target, or its deadline or wait target at risk.
func waitedWhy(now time.Time, d Demand, atRisk bool, cfg Config) string {
	j := d.Unit.Job
	why := fmt.Sprintf("%s has waited %s (target %s for %s tier)", d.Unit.Key(), now.Sub(d.Since).Round(time.Second), cfg.WaitTarget[j.Tier], j.Tier)
	if atRisk {
		why += fmt.Sprintf(", at risk: it must start by %s", d.StartBy.UTC().Format(time.RFC3339))
		if !j.Deadline.IsZero() {
			why += " (deadline " + j.Deadline.UTC().Format(time.RFC3339) + ")"
		}
	}
	return why + ": "
}

// newFree is the free share of each GPU of a new machine of o.
func newFree(o *core.Offer) []core.Milli {
	free := make([]core.Milli, o.GPUs)
	for g := range free {
		free[g] = o.MilliPerGPU()
	}
	return free
}

// rentedFor is the machines of plan rented for the unit with key.
func rentedFor(plan []*planned, key string) []*planned {
	var out []*planned
	for _, p := range plan {
		if slices.Contains(p.acq.For, key) {
			out = append(out, p)
		}
	}
	return out
}

// machinesFor is how many machines of o a unit's gang needs.
func machinesFor(o *core.Offer, j *core.Job) int {
	if j.Request.GPUs <= o.GPUs {
		return 1
	}
	return (j.Request.GPUs + o.GPUs - 1) / o.GPUs
}

// take reserves machine k of n's part of r on p.
func take(p *planned, r core.Request, k, n int) {
	gpus := r.GPUs
	if n > 1 {
		per := (r.GPUs + n - 1) / n
		gpus = min(per, r.GPUs-per*k)
	}
	for g := range p.free {
		if gpus == 0 {
			return
		}
		if p.free[g] >= r.MilliPerGPU && (r.MilliPerGPU < core.WholeGPU || p.free[g] == core.WholeGPU) {
			p.free[g] -= r.MilliPerGPU
			gpus--
		}
	}
}

// packInto places d on machines already planned this step (or still
// provisioning) if they have room and are admissible for it: on one
// machine, or — for a whole-GPU gang larger than every admissible planned
// machine, the scheduler's rule for spanning — across several, all or
// nothing. Without the gang case a gang that needs several machines
// rented them again at every step while they booted (seven times over for
// a 160-GPU job on the Helios trace).
func packInto(plan []*planned, d Demand) bool {
	r := d.Unit.Job.Request
	largest := 0
	for _, p := range plan {
		if admissible(p.acq.Offer, p.acq.Mode, d) {
			largest = max(largest, p.acq.Offer.GPUs)
		}
	}
	if largest == 0 {
		return false
	}
	if r.GPUs > largest {
		return packGang(plan, d)
	}
	for _, p := range plan {
		if !admissible(p.acq.Offer, p.acq.Mode, d) || r.GPUs > p.acq.Offer.GPUs || fits(p, r) < r.GPUs {
			continue
		}
		take(p, r, 0, 1)
		p.acq.For = append(p.acq.For, d.Unit.Key())
		return true
	}
	return false
}

// fits counts p's GPUs that can take one GPU of r.
func fits(p *planned, r core.Request) int {
	n := 0
	for _, f := range p.free {
		if f >= r.MilliPerGPU && (r.MilliPerGPU < core.WholeGPU || f == core.WholeGPU) {
			n++
		}
	}
	return n
}

// packGang spreads a whole-GPU gang over the admissible planned machines'
// empty GPUs, all or nothing.
func packGang(plan []*planned, d Demand) bool {
	r := d.Unit.Job.Request
	if r.MilliPerGPU < core.WholeGPU {
		return false
	}
	need := r.GPUs
	var use []*planned
	for _, p := range plan {
		if need == 0 {
			break
		}
		if !admissible(p.acq.Offer, p.acq.Mode, d) {
			continue
		}
		if n := fits(p, r); n > 0 {
			use = append(use, p)
			need -= min(n, need)
		}
	}
	if need > 0 {
		return false
	}
	need = r.GPUs
	for _, p := range use {
		for g := range p.free {
			if need > 0 && p.free[g] == core.WholeGPU {
				p.free[g] = 0
				need--
			}
		}
		p.acq.For = append(p.acq.For, d.Unit.Key())
	}
	return true
}

// shorterTerm: o has a committed plan shorter than p's term.
func shorterTerm(o *core.Offer, p *core.PricePlan) bool {
	for i := range o.Plans {
		if q := &o.Plans[i]; q.Committed() && q.Term < p.Term {
			return true
		}
	}
	return false
}

// admissible: the work may run on o's hardware (core's one rule, the
// scheduler's too), its throughput table does not rule the model out, and
// spot only for interruptible work that may still use it.
func admissible(o *core.Offer, mode core.BillingMode, d Demand) bool {
	r := &d.Unit.Job.Request
	if !r.Admits(o.Hardware()) {
		return false
	}
	if len(r.Throughput) > 0 && r.Throughput[o.GPUModel] <= 0 {
		return false
	}
	if mode == core.Spot && (!d.Unit.Job.Interruptible || d.NoSpot) {
		return false
	}
	return true
}

// bestOption prices every admissible offer and mode for d over its
// expected run (starting after the provisioning delay) and returns the
// lowest expected cost per useful GPU-hour. Committed terms compete on
// the same footing: a weekly term wins only when the work fills enough of
// the week. Spot carries the expected cost of redoing work lost to
// reclaims. Work with a deadline rejects offers that cannot start in time.
// An offer's mode skip says (when not nil) is not weighed: one refused
// for capacity, which the provider is not asked for again yet. It still
// counts as admissible for the spanning rule (a gang spans machines only
// when no admissible offer holds it whole), so that what is rented
// meanwhile is what the scheduler can use. maxTerm, when above 0, leaves
// out committed terms longer than it. explain: the option carries
// the reason for the decision log (RentCost needs only the price, and
// asks often).
func bestOption(now time.Time, d Demand, offers []core.Offer, out *Outlook, committed int64, displaced bool, skip func(string, core.BillingMode) bool, maxTerm time.Duration, explain bool, cfg Config) (option, bool) {
	j := d.Unit.Job
	dur := j.EstDuration
	if dur <= 0 {
		dur = cfg.DefaultDuration
	}
	useful := int64(j.Request.GPUs) * int64(j.Request.MilliPerGPU) * int64(dur/time.Second) // milli-GPU-seconds
	// A gang spans machines only when no admissible machine holds it
	// whole — the scheduler's rule, so what is rented can be used.
	largest := 0
	for i := range offers {
		for _, p := range offers[i].Plans {
			if admissible(&offers[i], p.Mode, d) {
				largest = max(largest, offers[i].GPUs)
			}
		}
	}
	var best, late option
	var lateEnd time.Time
	found := false
	for i := range offers {
		o := &offers[i]
		for pi := range o.Plans {
			p := &o.Plans[pi]
			if !admissible(o, p.Mode, d) || o.GPUs < min(j.Request.GPUs, largest) || skip != nil && skip(o.ID, p.Mode) ||
				maxTerm > 0 && p.Committed() && time.Duration(p.Term)*time.Second > maxTerm {
				continue
			}
			delay := cfg.delay(o.ID)
			if end := now.Add(delay + dur); !j.Deadline.IsZero() && end.After(j.Deadline) {
				// Too late for the deadline. Kept as the fallback when no
				// offer can make it: the earliest finish (then the cheapest
				// hour), so a missed deadline is a late job, never one
				// that waits forever.
				if o2, ok := priceOption(o, p, d, offers, now.Add(delay), dur, useful, out, committed, displaced, cfg.OutlookHorizon, explain); ok && (late.offer == nil || end.Before(lateEnd) || end.Equal(lateEnd) && o2.perGPU < late.perGPU) {
					late, lateEnd = o2, end
				}
				continue
			}
			o2, ok := priceOption(o, p, d, offers, now.Add(delay), dur, useful, out, committed, displaced, cfg.OutlookHorizon, explain)
			if !ok {
				continue
			}
			if !found || o2.perGPU < best.perGPU || o2.perGPU == best.perGPU && o.ID < best.offer.ID {
				best, found = o2, true
				if explain {
					best.why += " = " + best.perGPU.String() + " per useful GPU-hour, the cheapest admissible"
				}
			}
		}
	}
	if !found && late.offer != nil {
		late.why += fmt.Sprintf(" = %s per useful GPU-hour; no admissible offer can finish by the deadline %s, this one finishes first", late.perGPU, j.Deadline.UTC().Format(time.RFC3339))
		return late, true
	}
	return best, found
}

// priceOption is the expected bill of running d for dur from start on
// offer o under plan p, and its cost per useful GPU-hour (useful in
// milli-GPU-seconds). Spot carries the expected cost of redoing work lost
// to reclaims. displaced: a term longer than the outlook was rented for
// d before and is still in force, and d waits again (preempted off it,
// or placed elsewhere first); such a unit prices no other such term on
// its own estimate where the offer has a shorter term, only on the
// forecast — its estimate did not keep it on the first. The reason is
// written only when explain is set.
func priceOption(o *core.Offer, p *core.PricePlan, d Demand, offers []core.Offer, start time.Time, dur time.Duration, useful int64, out *Outlook, committed int64, displaced bool, horizon time.Duration, explain bool) (option, bool) {
	j := d.Unit.Job
	n := machinesFor(o, j)
	// A committed term is paid whole: the fleet never ends one early (an
	// early-termination rule would price a month held a day at the day
	// and the fee, and the month was then paid in full).
	end := start.Add(dur)
	if p.Committed() {
		end = start.Add(max(dur, time.Duration(p.Term)*time.Second))
	}
	b, err := billing.Cost(p, billing.Span{Start: start, End: end})
	if err != nil {
		return option{}, false
	}
	cost := b.Amount * core.Micros(n)
	var why string
	if explain {
		why = fmt.Sprintf("%d× %s %s at %s for %s", n, o.ID, p.Mode, cost, dur)
	}
	if p.Mode == core.Spot && p.Reclaim != nil {
		// Expected reclaims over the run, each losing half a
		// checkpoint interval of work (or half the run without one).
		lossSec := int64(dur/time.Second) / 2
		if ci := j.CheckpointInterval; ci > 0 {
			lossSec = min(lossSec, int64(ci/time.Second)/2)
		}
		expectedBP := core.MulDivHalfEven(p.Reclaim.MonthlyRateBP, int64(dur/time.Second), core.Month.Seconds())
		extra := core.Micros(core.MulDivHalfEven(int64(cost), expectedBP*lossSec, 10000*max(int64(dur/time.Second), 1)))
		cost += extra
		if explain {
			why += fmt.Sprintf(" + %s expected rework from reclaims (%s)", extra, p.Reclaim.Bucket)
		}
	}
	per := core.Micros(core.MulDivHalfEven(int64(cost), 3600*1000, max(useful, 1)))
	// A committed term serves more than the job it is rented for while
	// demand stays above the committed capacity: priced, too, on what it
	// is expected to serve over the time the forecast covers (held that
	// long: a term that may end early is charged for that time); the
	// lower price stands.
	if p.Committed() && time.Duration(p.Term)*time.Second > horizon && horizon > 0 {
		// A term longer than the outlook's day is bought on the forecast
		// (plan.Forecast): what the least busy day of the last week says
		// it will serve, over as much of the term as the history looks
		// back; the whole term is paid.
		alone := !displaced || !shorterTerm(o, p)
		if !alone {
			useful = 0
			why += "; not on its own estimate: a term rented for it is in force and it waits again"
		}
		priced := alone
		// Below its break-even the term loses to renting on demand
		// whenever the forecast's demand comes, whatever the unit alone
		// would pay (a minute's minimum charge for a one-second job).
		if use, hold, bp := out.forecastUse(o, n, committed, time.Duration(p.Term)*time.Second); use > useful {
			if be := BreakEvenBP(o, p, offers); bp < be {
				if explain {
					why += fmt.Sprintf("; not on the forecast: it expects it busy %d.%02d%% of the time, under the %d.%02d%% at which it beats renting on demand", bp/100, bp%100, be/100, be%100)
				}
			} else if alt := core.Micros(core.MulDivHalfEven(int64(cost), 3600*1000, use)); !priced || alt < per {
				per, priced = alt, true
				if explain {
					why += fmt.Sprintf("; or %s for the %d GPU-h the forecast expects it to serve (%s)", cost, use/3600/1000, forecastWhy(bp, hold))
				}
			}
		}
		if !priced {
			return option{}, false
		}
	} else if use, hold, above := out.expectedUse(o, p, n, committed, horizon); use > useful {
		if b, err := billing.Cost(p, billing.Span{Start: start, End: start.Add(max(dur, hold))}); err == nil {
			held := b.Amount * core.Micros(n)
			if alt := core.Micros(core.MulDivHalfEven(int64(held), 3600*1000, use)); alt < per {
				per, cost = alt, held
				if explain {
					why += fmt.Sprintf("; or %s held %s for the %d GPU-h demand is expected to give it (%s)", held, max(dur, hold).Round(time.Minute), use/3600/1000, expectedWhy(above, hold))
				}
			}
		}
	}
	return option{offer: o, mode: p.Mode, cost: cost, perGPU: per, why: why, committed: p.Committed()}, true
}
