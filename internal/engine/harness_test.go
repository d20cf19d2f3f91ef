package engine

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday

// harness drives Step and Apply on a virtual clock the way the simulator
// and the live loop do, with an inline provider that launches at once and
// is ready after delay. Units finish when their actual duration of work
// is done.
type fatal interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type harness struct {
	t      fatal
	st     *State
	cfg    Config
	now    time.Time
	tick   time.Duration
	delay  time.Duration
	ready  map[string]time.Time
	actual map[string]time.Duration
	events []core.Event
	// onTick runs before each step (arrivals, readings, reclaims).
	onTick func(h *harness)
	// onStep, if set, sees each step's decisions before they are applied.
	onStep func(h *harness, d *Decisions)
	// onApplied, if set, sees each step's decisions once applied.
	onApplied func(h *harness, d *Decisions)
}

func newHarness(t fatal, offers []core.Offer, cfg Config) *harness {
	return &harness{t: t, st: &State{Offers: offers, Spent: map[string]core.Micros{}}, cfg: cfg, now: t0, tick: time.Minute, delay: 2 * time.Minute,
		ready: map[string]time.Time{}, actual: map[string]time.Duration{}}
}

// submit queues a job at now; actual is how long its work really takes.
func (h *harness) submit(j *core.Job, actual time.Duration) {
	j.Submit = h.now
	if err := j.Validate(); err != nil {
		h.t.Fatal(err)
	}
	for s := 0; s < max(j.Shards, 1); s++ {
		u := &Unit{Unit: sched.Unit{Job: j, Shard: s}, State: core.JobPending, Since: h.now}
		h.st.Units = append(h.st.Units, u)
		h.actual[u.Key()] = actual
	}
}

func (h *harness) runUntil(end time.Time) {
	for ; h.now.Before(end); h.now = h.now.Add(h.tick) {
		h.stepOnce()
	}
}

func (h *harness) stepOnce() {
	for id, at := range h.ready {
		if !at.After(h.now) {
			OnReady(h.st, id, at)
			delete(h.ready, id)
		}
	}
	for _, u := range h.st.Units {
		if u.State == core.JobRunning && u.Done+h.now.Sub(u.Start) >= h.actual[u.Key()] {
			// At the instant its work is done, as a replay's finish event
			// is: between ticks, so that its run time is its work exactly.
			Finish(h.st, u.Key(), u.Start.Add(h.actual[u.Key()]-u.Done))
		}
	}
	if h.onTick != nil {
		h.onTick(h)
	}
	d := Step(h.st, h.now, h.cfg)
	if h.onStep != nil {
		h.onStep(h, &d)
	}
	h.events = append(h.events, d.Events...)
	created := Apply(h.st, d)
	if h.onApplied != nil {
		h.onApplied(h, &d)
	}
	for _, l := range created {
		OnLaunched(h.st, l.ID, "sim-"+l.ID, h.now)
		h.ready[l.ID] = h.now.Add(h.delay)
	}
}

// bill is the cost of every lease, open ones priced as released at end.
func (h *harness) bill(end time.Time) (total core.Micros, paidMilliHours int64) {
	for _, l := range h.st.Leases {
		if l.Start.IsZero() {
			continue
		}
		stop := l.End
		if stop.IsZero() {
			stop = end
		}
		b, err := billing.LeaseCost(l.Offer, &l.Lease, stop, l.State == core.LeaseReclaimed)
		if err != nil {
			h.t.Fatal(err)
		}
		total += b.Amount
		paidMilliHours += int64(l.Offer.CapMilli()) * b.Billed / 3600
	}
	return total, paidMilliHours
}

func (h *harness) eventsOf(kind string) []core.Event {
	var out []core.Event
	for _, e := range h.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func hourlyOffer(id, model string, gpus int, price string) core.Offer {
	p, _ := core.ParseMicros(price)
	return core.Offer{ID: id, Provider: "test", GPUModel: model, GPUs: gpus, GPUMemMiB: 32768, Currency: "USD",
		Plans: []core.PricePlan{{Mode: core.OnDemand, Price: p, Per: core.Hour, Granularity: 3600}}}
}

func job(id string, tier core.Tier, gpus int, est time.Duration) *core.Job {
	return &core.Job{ID: id, Team: "t", Tier: tier, Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU}, EstDuration: est}
}

func mustMoney(s string) core.Micros {
	m, err := core.ParseMicros(s)
	if err != nil {
		panic(err)
	}
	return m
}
