package sim

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/gpuutil"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// Waits summarises waiting times (first start − submit) in seconds.
type Waits struct {
	Count int   `json:"count"`
	Mean  int64 `json:"mean_s"`
	P50   int64 `json:"p50_s"`
	P95   int64 `json:"p95_s"`
	P99   int64 `json:"p99_s"`
	Max   int64 `json:"max_s"`
	// Percentiles is the waiting-time CDF: Percentiles[k] is the k-th
	// percentile (k = 0..100; 0 is the shortest wait, 100 the longest).
	Percentiles []int64 `json:"percentiles_s,omitempty"`
}

// Sample is the fleet at one instant, for the report's time series.
type Sample struct {
	At time.Time `json:"at"`
	// GPUs counts the GPUs of live leases per billing mode, in the order
	// of core.BillingModes (GPUsIn reads it by mode).
	GPUs [5]int32 `json:"gpus"`
	// AllocatedMilli is the GPU share allocated to running units.
	AllocatedMilli int64 `json:"allocated_milli"`
	Pending        int   `json:"pending"`
}

// Result is what one policy did on one workload.
type Result struct {
	Policy string `json:"policy"`
	// PolicySource and PolicyHash say which policy ran: "preset NAME" or
	// the policy file's path, and policy.Policy.Hash of its knobs;
	// PolicyLabel is its policy.Policy.Label, for one-line reports.
	PolicySource string `json:"policy_source"`
	PolicyHash   string `json:"policy_hash"`
	PolicyLabel  string `json:"-"`
	// Cost is the bill of every lease, exact; CostByMode splits it.
	Cost       core.Micros                      `json:"-"`
	CostByMode map[core.BillingMode]core.Micros `json:"-"`
	// Idle cost: the bill's share of paid GPU-time nobody used.
	IdleCost core.Micros `json:"-"`
	// GPU-hours in milli-GPU-seconds, exact.
	PaidMilliSec      int64 `json:"-"`
	AllocatedMilliSec int64 `json:"-"`
	LostMilliSec      int64 `json:"-"`
	// LastSubmit is when the trace's last job arrives; PaidArriving and
	// AllocatedArriving are the GPU-time paid and allocated before it.
	// After it, running work drains on terms rented while demand was
	// high: the trace's end, which an online policy cannot see coming
	// and the lower bound can.
	LastSubmit        time.Time `json:"-"`
	PaidArriving      int64     `json:"-"`
	AllocatedArriving int64     `json:"-"`
	// BusyMilliSec is the allocated GPU-time weighted by the jobs'
	// utilization series (Config.Util; util.go); zero without series.
	// UtilMissingJobs counts jobs that ran without a series (counted
	// busy); IdleAlerts the idle ladder's alerts by kind.
	BusyMilliSec    int64          `json:"-"`
	UtilMissingJobs int            `json:"-"`
	IdleAlerts      map[string]int `json:"-"`
	Waits           Waits
	WaitsByTier     map[core.Tier]Waits
	Jobs            int
	Units           int
	Unfinished      int
	DeadlineMisses  int
	Preemptions     int
	Moves           int
	Reclaims        int
	AcquireFailures int
	Leases          int
	Events          int
	Steps           int
	Series          []Sample
	waits           map[core.Tier][]int64
	lastSample      time.Time
	// onLease is Config.Leases; leaseUse, kept only then, is the GPU
	// share allocated on each live lease so far, in milli-GPU-seconds.
	onLease  func(LeaseRecord)
	leaseUse map[string]int64
	// err is the first lease that could not be priced.
	err error
	// util is Config.Util and first the run's units' first starts, which
	// the series' relative times count from; utilMissing the jobs seen
	// without a series.
	util        *gpuutil.Set
	first       map[string]time.Time
	utilMissing map[string]bool
}

func newResult(p policy.Policy, onLease func(LeaseRecord)) *Result {
	var use map[string]int64
	if onLease != nil {
		use = map[string]int64{}
	}
	return &Result{Policy: p.Name, PolicySource: p.Source, PolicyHash: p.Hash(), PolicyLabel: p.Label(), onLease: onLease, leaseUse: use, CostByMode: map[core.BillingMode]core.Micros{}, waits: map[core.Tier][]int64{}, WaitsByTier: map[core.Tier]Waits{}}
}

// IdleShareBP is idle GPU-time over paid GPU-time, in basis points.
func (r *Result) IdleShareBP() int64 { return idleBP(r.PaidMilliSec, r.AllocatedMilliSec) }

// IdleShareArrivingBP is IdleShareBP before the last submission.
func (r *Result) IdleShareArrivingBP() int64 { return idleBP(r.PaidArriving, r.AllocatedArriving) }

// idleBP is (paid − allocated) / paid in basis points; 0 when nothing
// was paid.
func idleBP(paid, allocated int64) int64 {
	if paid == 0 {
		return 0
	}
	return (paid - allocated) * 10000 / paid
}

// beforeLast is the whole seconds of [from, to) before LastSubmit.
func (r *Result) beforeLast(from, to time.Time) int64 {
	if to.After(r.LastSubmit) {
		to = r.LastSubmit
	}
	if !to.After(from) {
		return 0
	}
	return int64(to.Sub(from) / time.Second)
}

func (r *Result) addAllocated(u *engine.Unit, from, to time.Time) {
	if !to.After(from) {
		return
	}
	secs := int64(to.Sub(from) / time.Second)
	r.AllocatedMilliSec += int64(u.Milli()) * secs
	r.AllocatedArriving += int64(u.Milli()) * r.beforeLast(from, to)
	r.addBusy(u, from, to)
	if r.leaseUse != nil {
		for _, p := range u.Parts {
			r.leaseUse[p.LeaseID] += int64(u.Job.Request.MilliPerGPU) * int64(len(p.GPUs)) * secs
		}
	}
}

func (r *Result) addWait(u *engine.Unit, d time.Duration) {
	r.waits[u.Job.Tier] = append(r.waits[u.Job.Tier], int64(d/time.Second))
}

// LeaseRecord is one lease a replay rented, as billed: what the bill of
// a run is made of, lease by lease (gpufleet sim --leases).
type LeaseRecord struct {
	ID    string
	Offer string
	// Mode is the plan of its last term, Start when its first began
	// (a committed machine may renew on another term: Cost and Billed
	// are every term's, Terms lists them, oldest first).
	Mode  core.BillingMode
	Terms []core.Term
	GPUs  int
	Start time.Time
	// End is when the lease was released or reclaimed, or the end of the
	// replay for a lease still held then.
	End       time.Time
	Reclaimed bool
	// Billed is the time charged: held time rounded up to the plan's
	// granularity, at least its minimum charge or committed term.
	Billed time.Duration
	Cost   core.Micros
	// AllocatedMilliSec is the GPU share work held on it over its life,
	// in milli-GPU-seconds (work still running when the replay ends is
	// not counted, as in the run's allocated GPU-hours).
	AllocatedMilliSec int64
}

// addLease prices a lease that has ended (or is cut at the end of the
// run) and adds it to the bill.
func (r *Result) addLease(l *engine.Lease) {
	if l.Start.IsZero() {
		return
	}
	// Each term (one, unless the lease renewed on another plan) is billed
	// whole on its own plan.
	terms, bills, err := billing.LeaseBills(l.Offer, &l.Lease, l.End, l.State == core.LeaseReclaimed)
	if err != nil {
		// A lease that cannot be priced is a bug, never a silent zero:
		// Run fails with the first one.
		if r.err == nil {
			r.err = fmt.Errorf("sim: pricing lease %s (%s %s): %w", l.ID, l.OfferID, l.Mode, err)
		}
		return
	}
	r.Leases++
	var sum billing.Bill
	for i, b := range bills {
		sum = sum.Then(b)
		r.CostByMode[terms[i].Plan.Mode] += b.Amount
		r.PaidArriving += int64(l.Offer.CapMilli()) * r.beforeLast(terms[i].Span.Start, b.PaidUntil)
	}
	if r.onLease != nil {
		r.onLease(LeaseRecord{ID: l.ID, Offer: l.OfferID, Mode: l.Mode, Terms: append(slices.Clip(l.Earlier), core.Term{Mode: l.Mode, Start: l.Start}),
			GPUs: l.Offer.GPUs, Start: l.FirstStart(), End: l.End,
			Reclaimed: l.State == core.LeaseReclaimed, Billed: time.Duration(sum.Billed) * time.Second, Cost: sum.Amount,
			AllocatedMilliSec: r.leaseUse[l.ID]})
		delete(r.leaseUse, l.ID)
	}
	r.Cost += sum.Amount
	r.PaidMilliSec += int64(l.Offer.CapMilli()) * sum.Billed // a quarter-GPU slice pays 0.25 GPU-hours an hour
}

// SampleEvery is the least simulated time between two samples of the
// fleet for the time series.
const SampleEvery = 5 * time.Minute

// sample records the fleet now, at most once per SampleEvery.
func (r *Result) sample(now time.Time, st *engine.State) {
	if !r.lastSample.IsZero() && now.Sub(r.lastSample) < SampleEvery {
		return
	}
	r.lastSample = now
	s := Sample{At: now}
	for _, l := range st.Leases {
		if !l.State.Final() && !l.Start.IsZero() {
			s.GPUs[modeIndex(l.Mode)] += int32(l.Offer.GPUs)
		}
	}
	for _, u := range st.Units {
		switch u.State {
		case core.JobRunning, core.JobCheckpointing:
			s.AllocatedMilli += int64(u.Milli())
		case core.JobPending, core.JobPreempted:
			s.Pending++
		}
	}
	r.Series = append(r.Series, s)
}

// GPUsIn returns the sample's GPUs rented in mode m.
func (s *Sample) GPUsIn(m core.BillingMode) int { return int(s.GPUs[modeIndex(m)]) }

func modeIndex(m core.BillingMode) int {
	for i, x := range core.BillingModes {
		if x == m {
			return i
		}
	}
	return 0
}

func summarize(ws []int64) Waits {
	if len(ws) == 0 {
		return Waits{}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
	var sum int64
	for _, w := range ws {
		sum += w
	}
	// The nearest-rank percentile: the smallest wait with at least p% of
	// the waits at or below it.
	q := func(p int) int64 { return ws[max(0, min(len(ws)-1, (len(ws)*p+99)/100-1))] }
	pct := make([]int64, 101)
	for k := range pct {
		pct[k] = q(k)
	}
	return Waits{Count: len(ws), Mean: sum / int64(len(ws)), P50: q(50), P95: q(95), P99: q(99), Max: ws[len(ws)-1], Percentiles: pct}
}

// addUnit counts a unit that has ended (or is cut off at the end of the
// run), so that finished units need not be kept.
func (r *Result) addUnit(u *engine.Unit) {
	r.Units++
	if u.Shard == 0 {
		r.Jobs++
	}
	r.LostMilliSec += u.LostMilliSeconds
	if u.State != core.JobSucceeded {
		r.Unfinished++
		return
	}
	if !u.Job.Deadline.IsZero() && u.End.After(u.Job.Deadline) {
		r.DeadlineMisses++
	}
}

func (r *Result) finalize() {
	var all []int64
	for tier, ws := range r.waits {
		r.WaitsByTier[tier] = summarize(append([]int64(nil), ws...))
		all = append(all, ws...)
	}
	r.Waits = summarize(all)
	if r.PaidMilliSec > 0 {
		idle := max(r.PaidMilliSec-r.AllocatedMilliSec, 0)
		r.IdleCost = core.Micros(core.MulDivHalfEven(int64(r.Cost), idle, r.PaidMilliSec))
	}
}
