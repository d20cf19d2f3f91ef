package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/bound"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/gpuutil"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/loop"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/provider"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// Workload is what a simulation replays: jobs with their submit times
// and estimates, and how long each really runs.
type Workload struct {
	Jobs []*core.Job
	// Actual is each job's true running time (by job ID); the estimate in
	// the job is what the scheduler sees.
	Actual map[string]time.Duration
	// Skipped counts jobs left out, with why, so nothing is dropped
	// silently.
	Skipped map[string]int
}

// Config is one simulation.
type Config struct {
	Workload *Workload
	Offers   []core.Offer
	Teams    []core.Team
	// TimeOfUse is the tariff deferrable work may wait for.
	TimeOfUse *core.TimeOfUse
	// Provider sets provisioning delays, capacity and reclaims; its Offers,
	// Source and Clock are filled in by Run.
	Provider provsim.Config
	Seed     uint64
	// Util, if set, is the jobs' GPU utilization series: busy GPU-time
	// and the idle ladder's readings come from it (util.go).
	Util *gpuutil.Set
	// Recheck is how often waiting work is looked at again when nothing
	// else happens (5 minutes).
	Recheck time.Duration
	// Progress, if set, is called with the fraction of jobs submitted.
	Progress func(done, total int)
	// Transcript, if set, receives every event, in order.
	Transcript func(core.Event)
	// Leases, if set, receives every lease as it is priced: when it ends,
	// or at the end of the replay for one still held.
	Leases func(LeaseRecord)
	// Units, if set, receives a copy of every unit as it leaves the
	// replay: when it has ended, or at the end for one still live.
	Units func(engine.Unit)
	// Stepped, if set, is called with the time of every step, after it:
	// the instants a live loop replaying the same workload ticks at to
	// decide as the replay does (server.TestServerEqualsSimulator).
	Stepped func(now time.Time)
}

// Run replays cfg.Workload under policy p and measures it. It stops
// early with ctx's error when ctx is done.
func Run(ctx context.Context, cfg Config, p policy.Policy) (*Result, error) {
	w := cfg.Workload
	if w == nil || len(w.Jobs) == 0 {
		return nil, errors.New("sim: empty workload")
	}
	jobs := append([]*core.Job(nil), w.Jobs...)
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].Submit.Before(jobs[k].Submit) })
	start := jobs[0].Submit
	if cfg.Recheck == 0 {
		cfg.Recheck = 5 * time.Minute
	}
	offers := p.Offers(cfg.Offers)
	if len(offers) == 0 {
		return nil, fmt.Errorf("sim: policy %s: the catalog has no offer in modes %v", p.Name, p.Modes())
	}
	ecfg, err := p.Engine(offers, start)
	if err != nil {
		return nil, fmt.Errorf("sim: policy %s: %w", p.Name, err)
	}
	// Defaults once: every fleet call applies them again, and each
	// application allocates the wait-target map when it is missing.
	ecfg.Fleet = ecfg.Fleet.Defaults()
	if p.Reserved.PeakSized {
		peak, ids, err := peakFleet(w, offers, p.Reserved.Mode, start)
		if err != nil {
			return nil, fmt.Errorf("sim: policy %s: %w", p.Name, err)
		}
		ecfg.Fleet.Reserved, ecfg.Fleet.ReservedOffer = peak, ids
	}
	clk := clock.NewManual(start)
	pc := cfg.Provider
	pc.Offers, pc.Clock, pc.Source = offers, clk, rand.NewPCG(cfg.Seed, 0x5eed)
	cloud, err := provsim.New(pc)
	if err != nil {
		return nil, fmt.Errorf("sim: provider: %w", err)
	}
	st := &engine.State{Offers: offers, Teams: cfg.Teams, Spent: map[string]core.Micros{}}
	if p.TimeOfUse.Shift {
		st.TimeOfUse = cfg.TimeOfUse
	}
	r := &run{cfg: cfg, p: p, ecfg: ecfg, st: st, cloud: cloud, clk: clk, res: newResult(p, cfg.Leases), waking: map[int64]bool{}, first: map[string]time.Time{}}
	r.res.LastSubmit = jobs[len(jobs)-1].Submit
	if cfg.Util != nil {
		r.res.util, r.res.first, r.res.utilMissing = cfg.Util, r.first, map[string]bool{}
	}
	for _, t := range cfg.Teams {
		if t.MonthlyBudget > 0 {
			r.book = &ledger.Book{}
			break
		}
	}
	next := 0
	for loops := 0; ; loops++ {
		if loops%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sim: policy %s stopped: %w", p.Name, err)
			}
		}
		now, ok := r.nextTime(jobs, next)
		if !ok {
			break
		}
		clk.Set(now)
		for ; next < len(jobs) && !jobs[next].Submit.After(now); next++ {
			r.submit(jobs[next])
			if cfg.Progress != nil && next%1000 == 0 {
				cfg.Progress(next, len(jobs))
			}
		}
		if err := r.setSpent(now); err != nil {
			return nil, err
		}
		if err := loop.Turn(ctx, r.st, r.cloud, now, r.ecfg, r, r.hooks()); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		r.stepped(now)
		r.prune()
		if next == len(jobs) && r.live == 0 && r.allIdleReleased() {
			break
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(len(jobs), len(jobs))
	}
	r.close(clk.Now())
	if r.res.err != nil {
		return nil, r.res.err
	}
	return r.res, nil
}

// run is one simulation's mutable state.
type run struct {
	cfg   Config
	p     policy.Policy
	ecfg  engine.Config
	st    *engine.State
	cloud *provsim.Cloud
	clk   *clock.Manual
	res   *Result
	// first is each unit's first start, for waiting times.
	first map[string]time.Time
	wake  timeHeap
	// waking holds the times in wake (Unix ns), so that a time already
	// due is not pushed again: every step re-reports the machines it
	// keeps, and duplicates would only grow the heap.
	waking  map[int64]bool
	finishQ finishHeap
	live    int
	// slab is where the next units are made.
	slab []engine.Unit
	// book is the month's leases and runs the team budgets' spend is
	// computed from, and refresh when it is computed again; nil when no
	// team has a budget (State.Spent then decides nothing).
	book    *ledger.Book
	refresh ledger.Refresh
	// decided is the last turn's decisions, for the wake-ups they ask
	// for once the turn is done.
	decided *engine.Decisions
}

// setSpent sets State.Spent, what the team budgets see, to each team's
// spend this calendar month as of now, as the server's loop does at the
// start of its tick (internal/server, ledger.go): the ledger's
// month-to-date spend (ledger.MonthSpent, the function
// ledger.MonthToDate computes the stored ledger with), of the leases and
// runs as they stood after the last step, computed again when
// ledger.Refresh says so. Without a budgeted team it does nothing: the
// spend then decides nothing.
func (r *run) setSpent(now time.Time) error {
	if r.book == nil {
		return nil
	}
	r.book.Observe(r.st.Units)
	leases := ledger.LaunchedLeases(r.st.Leases)
	if !r.refresh.Due(now, leases) {
		return nil
	}
	spent, err := r.book.Spent(now, r.st.Leases)
	if err != nil {
		return fmt.Errorf("sim: the month's spend at %s: %w", now.UTC().Format(time.RFC3339), err)
	}
	r.refresh.Read(now, leases)
	r.st.Spent = spent
	return nil
}

// unitSlab is how many units one slab holds.
const unitSlab = 256

func (r *run) submit(j *core.Job) {
	for s := 0; s < max(j.Shards, 1); s++ {
		// Units come from slabs: units submitted together are live
		// together, and every step walks the live ones (a slab is kept
		// while one of its units is).
		if len(r.slab) == 0 {
			r.slab = make([]engine.Unit, unitSlab)
		}
		u := &r.slab[0]
		r.slab = r.slab[1:]
		*u = engine.Unit{Unit: sched.Unit{Job: j, Shard: s}, State: core.JobPending, Since: j.Submit}
		r.st.Units = append(r.st.Units, u)
		r.live++
	}
}

// nextTime is the earliest of: the next arrival, finish, provider event
// and wake-up.
func (r *run) nextTime(jobs []*core.Job, next int) (time.Time, bool) {
	var t time.Time
	ok := false
	consider := func(x time.Time) {
		if !ok || x.Before(t) {
			t, ok = x, true
		}
	}
	if next < len(jobs) {
		consider(jobs[next].Submit)
	}
	if len(r.finishQ) > 0 {
		consider(r.finishQ[0].at)
	}
	if at, has := r.cloud.NextEventAt(); has {
		consider(at)
	}
	now := r.clk.Now()
	for len(r.wake) > 0 && !r.wake[0].After(now) {
		delete(r.waking, heap.Pop(&r.wake).(time.Time).UnixNano())
	}
	if len(r.wake) > 0 {
		consider(r.wake[0])
	}
	if ok && t.Before(now) {
		t = now
	}
	return t, ok
}

// finish completes every unit whose work is done by now.
func (r *run) finish(now time.Time) {
	for len(r.finishQ) > 0 && !r.finishQ[0].at.After(now) {
		f := heap.Pop(&r.finishQ).(finishAt)
		u := f.u
		if u.State != core.JobRunning || !u.Start.Equal(f.start) {
			continue // stopped or moved since: a stale entry
		}
		r.res.addAllocated(u, u.Start, f.at)
		engine.FinishUnit(r.st, u, f.at)
	}
}

// hooks are the simulator's bookkeeping around the shared loop steps.
func (r *run) hooks() loop.Hooks {
	return loop.Hooks{
		Losing: func(lease string, at time.Time, reclaimed bool) {
			if !reclaimed {
				r.res.Reclaims++
			}
			for _, u := range r.st.Units {
				if (u.State == core.JobRunning || reclaimed && u.State == core.JobCheckpointing) && u.RunsOn(lease) {
					r.res.addAllocated(u, u.Start, at)
				}
			}
		},
		Resumed: r.queueFinish,
		Answered: func(_ *engine.Lease, _ provider.Machine, _ provider.Bootstrap, err error) {
			if err != nil {
				r.res.AcquireFailures++
			}
		},
	}
}

func (r *run) queueFinish(u *engine.Unit) {
	left := r.cfg.Workload.Actual[u.Job.ID] - u.Done
	heap.Push(&r.finishQ, finishAt{at: u.Start.Add(max(left, 0)), start: u.Start, u: u})
}

func (r *run) event(e core.Event) {
	r.res.Events++
	if r.cfg.Transcript != nil {
		r.cfg.Transcript(e)
	}
}

// Inputs is the simulator's side of a turn's inputs (loop.Driver): the
// units whose virtual run ends by now finish, then the utilization
// readings and the Uniform Progress rule see the state the step will.
func (r *run) Inputs(_ context.Context, _ *engine.State, now time.Time) ([]core.Event, error) {
	r.finish(now)
	r.readings(now)
	r.uniformProgress(now)
	return nil, nil
}

// Decided counts the allocated time of the units the step stops or
// moves, before Apply restarts their clocks (loop.Driver). The units
// decided on are the ones Step carries with its decisions (the replay
// applies nothing but Step's decisions; TestPropertyDecidedUnits checks
// Step carries every one).
func (r *run) Decided(_ context.Context, _ *engine.State, d *engine.Decisions) []core.Event {
	now := d.Now
	r.res.Steps++
	r.res.countAlerts(d.Alerts)
	for i := range d.Preempt {
		if u := d.PreemptUnit(i); u != nil {
			r.res.addAllocated(u, u.Start, now)
		}
	}
	for i := range d.Move {
		if u := d.MoveUnit(i); u != nil {
			r.res.addAllocated(u, u.Start, now)
		}
	}
	r.res.Preemptions += len(d.Preempt)
	r.res.Moves += len(d.Move)
	return nil
}

// Commit records the turn's events and queues the virtual finish of
// every unit the step started (loop.Driver); the first start of a unit
// is its wait.
func (r *run) Commit(_ context.Context, _ *engine.State, t loop.Turned) error {
	for _, e := range t.Events {
		r.event(e)
	}
	d := &t.Decisions
	for i, p := range d.Place {
		u := d.PlaceUnit(i)
		if _, seen := r.first[p.Unit]; !seen {
			r.first[p.Unit] = t.Now
			r.res.addWait(u, t.Now.Sub(u.Job.Submit))
		}
		r.queueFinish(u)
	}
	for i := range d.Move {
		r.queueFinish(d.MoveUnit(i))
	}
	r.decided = d
	return nil
}

// ReleaseFailed stops the replay: the simulated cloud releases what it
// launched, so a failure is a bug (loop.Driver).
func (r *run) ReleaseFailed(_ string, err error) error { return err }

// Acquired records the provider's answers (loop.Driver); an acquisition
// the simulated cloud postponed is a bug and stops the replay.
func (r *run) Acquired(_ context.Context, _ *engine.State, _ time.Time, got loop.Acquired) error {
	for id, err := range got.Postponed {
		return fmt.Errorf("acquire for lease %s: %w", id, err)
	}
	for _, e := range got.Events {
		r.event(e)
	}
	return nil
}

// stepped schedules the next steps the turn's decisions ask for and
// samples the fleet.
func (r *run) stepped(now time.Time) {
	d := r.decided
	r.decided = nil
	if d == nil {
		return
	}
	for _, k := range d.Kept {
		if k.Until.After(now) {
			r.wakeAt(k.Until)
		}
	}
	for _, df := range d.Defer {
		r.wakeAt(df.Until)
	}
	if !d.Boundary.IsZero() {
		r.wakeAt(d.Boundary.Add(time.Second)) // the renewal there
	}
	waiting := r.uncapped(d.Waiting)
	if len(waiting) < len(d.Waiting) {
		// Work of a team at its budget cap: nothing places it before
		// the month's spend starts again.
		r.wakeAt(ledger.MonthStart(now).AddDate(0, 1, 0))
	}
	if len(waiting) > 0 || len(d.Defer) > 0 {
		d.Waiting = waiting
		r.wakeAt(now.Add(r.nextWaitCheck(*d, now)))
	}
	r.res.sample(now, r.st)
	if r.cfg.Stepped != nil {
		r.cfg.Stepped(now)
	}
}

// uncapped is waiting less the units of teams at their budget cap: the
// scheduler places none of a team's work once its month's spend reaches
// its budget, so looking at it again before the month ends only makes
// steps (every step that sees waiting work asks for another).
func (r *run) uncapped(waiting []sched.Wait) []sched.Wait {
	if r.book == nil {
		return waiting
	}
	var out []sched.Wait
	for i, w := range waiting {
		if r.capped(w.Unit.Job.Team) {
			if out == nil {
				out = append(make([]sched.Wait, 0, len(waiting)), waiting[:i]...)
			}
			continue
		}
		if out != nil {
			out = append(out, w)
		}
	}
	if out == nil {
		return waiting
	}
	return out
}

// capped reports whether team has a budget its month's spend has
// reached.
func (r *run) capped(team string) bool {
	for _, t := range r.st.Teams {
		if t.ID == team {
			return t.MonthlyBudget > 0 && r.st.Spent[team] >= t.MonthlyBudget
		}
	}
	return false
}

// wakeAt schedules a step at t unless one is scheduled then already.
func (r *run) wakeAt(t time.Time) {
	k := t.UnixNano()
	if r.waking[k] {
		return
	}
	r.waking[k] = true
	heap.Push(&r.wake, t)
}

// nextWaitCheck is when waiting work should be looked at again: when the
// first unit passes its tier's waiting target, or after Recheck.
func (r *run) nextWaitCheck(d engine.Decisions, now time.Time) time.Duration {
	targets := r.ecfg.Fleet.Defaults().WaitTarget
	best := r.cfg.Recheck
	for _, w := range d.Waiting {
		j := w.Unit.Job
		if due := j.Submit.Add(targets[j.Tier]).Sub(now); due > 0 && due < best {
			best = due
		}
	}
	return max(best, time.Second)
}

// prune moves finished units out of the engine's state so each step
// costs what is live, not what ever ran.
func (r *run) prune() {
	engine.Prune(r.st, func(u *engine.Unit) {
		if r.book != nil {
			r.book.Ended(u, nil)
		}
		r.addUnit(u)
		delete(r.first, u.Key())
		r.live--
	}, func(l *engine.Lease) {
		if r.book != nil {
			r.book.Ended(nil, l)
		}
		r.res.addLease(l)
	})
}

// addUnit counts a unit that leaves the replay, and hands it to
// Config.Units.
func (r *run) addUnit(u *engine.Unit) {
	r.res.addUnit(u)
	if r.cfg.Units != nil {
		r.cfg.Units(*u)
	}
}

// allIdleReleased: nothing left but committed machines inside their term.
func (r *run) allIdleReleased() bool {
	for _, l := range r.st.Leases {
		if !l.Plan.Committed() {
			return false
		}
	}
	return true
}

// close prices what is still open at the end and computes the figures.
func (r *run) close(end time.Time) {
	for _, l := range r.st.Leases {
		if l.Start.IsZero() {
			continue
		}
		l.End = end
		r.res.addLease(l)
	}
	for _, u := range r.st.Units {
		r.addUnit(u)
	}
	r.res.finalize()
}

type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type finishAt struct {
	at, start time.Time
	u         *engine.Unit
}

type finishHeap []finishAt

func (h finishHeap) Len() int           { return len(h) }
func (h finishHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h finishHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *finishHeap) Push(x any)        { *h = append(*h, x.(finishAt)) }
func (h *finishHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// NoOffer is the skip reason of a job no offer of the catalog can run.
const NoOffer = "no offer can run it (GPU model or memory)"

// NewWorkload makes the workload a replay runs from a trace's jobs: the
// first limit (0: all) that some offer can run (bound.Admissible), each
// running for its recorded duration. Jobs no offer can run are skipped
// and counted with the trace's own skips, never dropped silently.
func NewWorkload(tw trace.Workload, offers []core.Offer, limit int) *Workload {
	w := &Workload{Actual: make(map[string]time.Duration, len(tw.Jobs)), Skipped: trace.SkipCounts(tw.Skipped)}
	for i := range tw.Jobs {
		if limit > 0 && len(w.Jobs) >= limit {
			break
		}
		j := &tw.Jobs[i]
		if len(bound.Admissible(j, offers)) == 0 {
			w.Skipped[NoOffer]++
			continue
		}
		w.Jobs = append(w.Jobs, j)
		// The trace's duration; the job's estimate is its users' (the
		// profile's estimates: the duration itself by default).
		w.Actual[j.ID] = j.EstDuration
		if len(tw.Actual) == len(tw.Jobs) {
			w.Actual[j.ID] = tw.Actual[i]
		}
	}
	return w
}
