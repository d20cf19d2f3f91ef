package engine

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"pgregory.net/rapid"
)

type arrival struct {
	at  time.Duration
	job core.Job
}

type runSpec struct {
	arrivals     []arrival
	reclaimEvery time.Duration
	// learn plans on learned durations (Config.LearnDurations); actualBP,
	// when set, makes each job's work its estimate times this many basis
	// points (else the estimate).
	learn    bool
	actualBP int64
}

func genSpec(t *rapid.T) runSpec {
	var s runSpec
	for i, n := 0, rapid.IntRange(1, 12).Draw(t, "jobs"); i < n; i++ {
		j := job(fmt.Sprintf("j%d", i), rapid.SampledFrom([]core.Tier{core.TierCore, core.TierRegular, core.TierOffline}).Draw(t, "tier"),
			rapid.IntRange(1, 4).Draw(t, "gpus"), time.Duration(rapid.IntRange(1, 30).Draw(t, "est"))*time.Hour)
		j.Interruptible = rapid.Bool().Draw(t, "int")
		j.CheckpointInterval = 15 * time.Minute
		if rapid.Bool().Draw(t, "model") {
			j.Request.Models = []string{rapid.SampledFrom([]string{"A100", "V100"}).Draw(t, "m")}
		}
		s.arrivals = append(s.arrivals, arrival{at: time.Duration(rapid.IntRange(0, 48).Draw(t, "at")) * time.Hour, job: *j})
	}
	s.reclaimEvery = time.Duration(rapid.IntRange(1, 20).Draw(t, "reclaim")) * time.Hour
	return s
}

// run replays a spec: a pure function of it, so two runs must agree.
func (s runSpec) run(t fatal) (*harness, []string) { return s.runWith(t, nil) }

// runWith is run with onStep set on the harness.
func (s runSpec) runWith(t fatal, onStep func(h *harness, d *Decisions)) (*harness, []string) {
	return s.runHooks(t, onStep, nil)
}

// runHooks is run with onStep and onApplied set on the harness.
func (s runSpec) runHooks(t fatal, onStep, onApplied func(h *harness, d *Decisions)) (*harness, []string) {
	od := hourlyOffer("od", "A100", 2, "3")
	spot := hourlyOffer("spot", "A100", 1, "1")
	spot.Plans[0].Mode = core.Spot
	spot.Plans[0].Reclaim = &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}
	weekly := hourlyOffer("wk", "V100", 4, "1")
	weekly.Plans = append(weekly.Plans, core.PricePlan{Mode: core.Weekly, Price: mustMoney("300"), Per: core.Week, Granularity: core.Week.Seconds(), Term: core.Week.Seconds()})
	h := newHarness(t, []core.Offer{od, spot, weekly}, Config{LearnDurations: s.learn})
	h.tick = 10 * time.Minute
	h.onStep, h.onApplied = onStep, onApplied
	var created []string
	h.onTick = func(h *harness) {
		for _, a := range s.arrivals {
			if h.now.Sub(t0) == a.at {
				j := a.job
				actual := j.EstDuration
				if s.actualBP > 0 {
					actual = time.Duration(core.MulDivHalfEven(int64(actual), s.actualBP, 10000))
				}
				h.submit(&j, actual)
			}
		}
		for _, l := range h.st.Leases {
			if l.Mode == core.Spot && l.State == core.LeaseReady && l.ReclaimAt.IsZero() && h.now.Sub(l.ReadyAt) >= s.reclaimEvery {
				OnReclaimNotice(h.st, l.ID, h.now, h.now.Add(2*time.Minute), h.cfg)
			}
			if !l.ReclaimAt.IsZero() && !h.now.Before(l.ReclaimAt) && !l.State.Final() {
				OnReclaimed(h.st, l.ID, h.now)
			}
		}
	}
	for h.now.Before(t0.Add(4 * 24 * time.Hour)) {
		before := len(h.st.Leases)
		h.stepOnce()
		for _, l := range h.st.Leases[before:] {
			created = append(created, l.ID)
		}
		h.now = h.now.Add(h.tick)
	}
	return h, created
}

// TestPropertyFleet: every acquired lease is tracked until it ends, none
// is released inside its committed term, every job finishes, and the
// whole run is deterministic (run twice, same events).
func TestPropertyFleet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		h, created := spec.run(t)
		if again, _ := spec.run(t); !reflect.DeepEqual(h.events, again.events) {
			t.Fatalf("the same run decided differently twice: %d vs %d events", len(h.events), len(again.events))
		}
		byID := map[string]*Lease{}
		for _, l := range h.st.Leases {
			byID[l.ID] = l
		}
		for _, id := range created {
			l := byID[id]
			if l == nil {
				t.Fatalf("lease %s forgotten", id)
			}
			if l.State == core.LeaseReleased && l.Plan.Committed() && l.End.Before(l.CommittedEnd.Add(-h.cfg.Fleet.Defaults().ReleaseMargin)) {
				t.Fatalf("committed lease %s released at %v inside its term ending %v", id, l.End, l.CommittedEnd)
			}
		}
		for _, u := range h.st.Units {
			if u.State != core.JobSucceeded {
				t.Fatalf("unit %s ended the run %s", u.Key(), u.State)
			}
		}
		for _, l := range h.st.Leases {
			if l.State != core.LeaseReleased && l.State != core.LeaseReclaimed && !(l.Plan.Committed() && !l.State.Final()) {
				t.Fatalf("lease %s is %s after all work ended", l.ID, l.State)
			}
		}
	})
}

// Apply keeps the demand each step saw, once per change, and forgets
// what is older than fleet.DemandKeep except the point still in force.
func TestRecordDemand(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	st := &State{}
	recordDemand(st, t0, 8000)
	recordDemand(st, t0.Add(time.Minute), 8000) // unchanged: no point
	recordDemand(st, t0.Add(time.Hour), 16000)
	recordDemand(st, t0.Add(time.Hour), 12000) // same instant: replaced
	if len(st.Demand) != 2 || st.Demand[1].Milli != 12000 || !st.Demand[1].At.Equal(t0.Add(time.Hour)) {
		t.Fatalf("demand %+v", st.Demand)
	}
	late := t0.Add(time.Hour + fleet.DemandKeep + time.Minute)
	recordDemand(st, late, 4000)
	if len(st.Demand) != 2 || st.Demand[0].Milli != 12000 || st.Demand[1].Milli != 4000 {
		t.Fatalf("after a week and more: %+v, want the point in force at the window's start and the new one", st.Demand)
	}
}

// TestPropertyDecidedUnits: the units Step hands Apply with its decisions
// are the ones a search of the state's units by key finds, and a run
// whose decisions carry none (so that Apply searches) decides the same.
func TestPropertyDecidedUnits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		search := func(h *harness, key string) *Unit {
			var found *Unit
			for _, u := range h.st.Units {
				if u.Key() == key {
					found = u
				}
			}
			return found
		}
		carried, _ := spec.runWith(t, func(h *harness, d *Decisions) {
			check := func(kind string, units []*Unit, keys []string) {
				if len(units) != len(keys) {
					t.Fatalf("%s: %d units carried for %d decisions", kind, len(units), len(keys))
				}
				for i, k := range keys {
					if want := search(h, k); units[i] != want || want == nil {
						t.Fatalf("%s %s: carried %p, search finds %p", kind, k, units[i], want)
					}
				}
			}
			var keys []string
			for _, p := range d.Place {
				keys = append(keys, p.Unit)
			}
			check("place", d.placeUnits, keys)
			keys = nil
			for _, p := range d.Preempt {
				keys = append(keys, p.Unit)
			}
			check("preempt", d.preemptUnits, keys)
			keys = nil
			for _, m := range d.Move {
				keys = append(keys, m.Unit)
			}
			check("move", d.moveUnits, keys)
			keys = nil
			for _, df := range d.Defer {
				keys = append(keys, df.Unit.Key())
			}
			check("defer", d.deferUnits, keys)
		})
		searched, _ := spec.runWith(t, func(h *harness, d *Decisions) {
			d.placeUnits, d.preemptUnits, d.moveUnits, d.deferUnits = nil, nil, nil, nil
		})
		if !reflect.DeepEqual(carried.events, searched.events) {
			t.Fatalf("carried units decide differently from searched ones: %d vs %d events", len(carried.events), len(searched.events))
		}
	})
}

// TestHasKey: hasKey agrees with Key for whole jobs and shards.
func TestHasKey(t *testing.T) {
	for _, shards := range []int{0, 1, 3, 120} {
		j := &core.Job{ID: "job-7", Shards: shards}
		for s := range max(shards, 1) {
			u := &Unit{}
			u.Job, u.Shard = j, s
			for _, key := range []string{u.Key(), "job-7", "job-7#", "job-7#0", "job-7#12", "job-7#119", "job-77#1", "job-", ""} {
				if got, want := u.hasKey(key), key == u.Key(); got != want {
					t.Errorf("shard %d of %d: hasKey(%q) = %v, Key() = %q", s, shards, key, got, u.Key())
				}
			}
		}
	}
}

// TestPropertyTally: after every Apply the idle marks left by the work
// the live view counts per lease are the ones counting every running
// unit's parts again gives (counting afresh and marking then changes
// nothing), and the view stayed live through every step.
func TestPropertyTally(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		spec.runHooks(t, nil, func(h *harness, d *Decisions) {
			if sc := h.st.scratch; sc == nil || !sc.live {
				t.Fatalf("%v: no live view after Step and Apply", h.now)
			}
			idle := make([]time.Time, len(h.st.Leases))
			for i, l := range h.st.Leases {
				idle[i] = l.IdleSince
			}
			countRuns(h.st)
			markIdle(h.st, h.now)
			for i, l := range h.st.Leases {
				if !l.IdleSince.Equal(idle[i]) {
					t.Fatalf("%v: lease %s (%s, %d parts counted by the live view): idle since %v by that count, %v by a full count", h.now, l.ID, l.State, l.runs, idle[i], l.IdleSince)
				}
			}
		})
	})
}
