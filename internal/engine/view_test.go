package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/sched"
	"pgregory.net/rapid"
)

// TestPropertyLiveView: whatever mix of changes comes between steps —
// units submitted, units appended already running (on shared GPUs, or on
// two GPUs of one machine as two parts), steps applied, units finished,
// finished units pruned, machines ready or reclaimed — the view every
// Step works on is the one a fresh build gives (CheckViews is on: Step
// panics otherwise), and the view stays live unless the nodes changed.
func TestPropertyLiveView(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		off := hourlyOffer("od", "A100", 4, "3")
		st := &State{Offers: []core.Offer{off}, Spent: map[string]core.Micros{}}
		now := t0
		addLease := func(ready bool) *Lease {
			st.NextID++
			l := &Lease{Lease: core.Lease{ID: fmt.Sprintf("L%d", st.NextID), OfferID: off.ID, Mode: core.OnDemand, State: core.LeaseProvisioning, Start: now},
				Offer: &st.Offers[0], Plan: &st.Offers[0].Plans[0], node: -1}
			st.Leases = append(st.Leases, l)
			if ready {
				OnReady(st, l.ID, now)
			}
			return l
		}
		for range rapid.IntRange(1, 3).Draw(t, "leases") {
			addLease(true)
		}
		newJob := func(label string) *core.Job {
			st.NextID++
			milli := rapid.SampledFrom([]core.Milli{250, 500, core.WholeGPU}).Draw(t, label+"-milli")
			gpus := 1
			if milli == core.WholeGPU || rapid.Bool().Draw(t, label+"-two") {
				gpus = rapid.IntRange(1, 4).Draw(t, label+"-gpus")
			}
			j := job(fmt.Sprintf("j%d", st.NextID), rapid.SampledFrom([]core.Tier{core.TierCore, core.TierRegular, core.TierOffline}).Draw(t, label+"-tier"), gpus,
				time.Duration(rapid.IntRange(0, 6).Draw(t, label+"-est"))*time.Hour)
			j.Request.MilliPerGPU, j.Submit, j.Interruptible = milli, now, rapid.Bool().Draw(t, label+"-int")
			return j
		}
		running := func() []*Unit {
			var out []*Unit
			for _, u := range st.Units {
				if u.State == core.JobRunning || u.State == core.JobCheckpointing {
					out = append(out, u)
				}
			}
			return out
		}
		cfg := Config{NoAcquire: true, Fleet: fleet.Config{MinIdle: time.Minute, MinHold: time.Minute}}
		for i := range rapid.IntRange(1, 40).Draw(t, "ops") {
			now = now.Add(time.Duration(rapid.IntRange(1, 90).Draw(t, "gap")) * time.Minute)
			switch op := rapid.IntRange(0, 7).Draw(t, fmt.Sprintf("op%d", i)); op {
			case 0: // a unit submitted
				st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: newJob("submit")}, State: core.JobPending, Since: now})
			case 1: // a unit appended already running, maybe as two parts on one machine
				if len(st.Leases) == 0 {
					continue
				}
				l := rapid.SampledFrom(st.Leases).Draw(t, "on")
				j := newJob("run")
				gpus := fitting(st, l, &j.Request)
				if len(gpus) < j.Request.GPUs {
					continue // no room: the scheduler rejects an over-committed machine
				}
				gpus = gpus[:j.Request.GPUs]
				parts := []Assigned{{LeaseID: l.ID, GPUs: gpus}}
				if len(gpus) > 1 && rapid.Bool().Draw(t, "two-parts") {
					parts = []Assigned{{LeaseID: l.ID, GPUs: gpus[:1]}, {LeaseID: l.ID, GPUs: gpus[1:]}}
				}
				st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: j}, State: core.JobRunning, Parts: parts, Start: now, LastCheckpoint: now})
			case 2, 3: // a step, applied
				Apply(st, Step(st, now, cfg))
			case 4: // a unit finishes
				if r := running(); len(r) > 0 {
					FinishUnit(st, rapid.SampledFrom(r).Draw(t, "finish"), now)
				}
			case 5: // what is over is pruned
				Prune(st, nil, nil)
				for _, u := range st.Units {
					if u.State.Final() {
						t.Fatalf("op %d: unit %s (%s) left by Prune", i, u.Key(), u.State)
					}
				}
				for _, l := range st.Leases {
					if l.State.Final() {
						t.Fatalf("op %d: lease %s (%s) left by Prune", i, l.ID, l.State)
					}
				}
			case 6: // a machine comes
				addLease(rapid.Bool().Draw(t, "ready"))
			case 7: // a machine gets a reclaim notice
				var live []*Lease
				for _, l := range st.Leases {
					if isNode(l) {
						live = append(live, l)
					}
				}
				if len(live) > 0 {
					OnReclaimNotice(st, rapid.SampledFrom(live).Draw(t, "reclaim").ID, now, now.Add(2*time.Minute), cfg)
				}
			}
			// The check: Step compares its live view with a fresh build.
			Step(st, now, cfg)
			if !st.scratch.live {
				t.Fatalf("op %d: the view is not live after a Step", i)
			}
		}
	})
}

// TestViewKeptBetweenSteps: a step that changes no node keeps the view
// (it is not built afresh), and one whose nodes changed builds it
// afresh; changed makes the next step build afresh too.
func TestViewKeptBetweenSteps(t *testing.T) {
	st := tallyState(t)
	now := t0.Add(time.Hour)
	cfg := Config{NoAcquire: true, NoRelease: true}
	Apply(st, Step(st, now, cfg))
	seq := func() uint64 { return st.scratch.nextSeq }
	// Units are numbered afresh (from zero) by a fresh build only; a kept
	// view numbers new ones on.
	first := seq()
	st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: job("x", core.TierRegular, 1, time.Hour)}, State: core.JobPending, Since: now})
	Apply(st, Step(st, now.Add(time.Minute), cfg))
	if got := seq(); got != first+1 {
		t.Fatalf("after a step with no node changed: next number %d, want %d (the view was built afresh)", got, first+1)
	}
	st.changed()
	Step(st, now.Add(2*time.Minute), cfg)
	if got := seq(); got != uint64(len(st.Units)) {
		t.Fatalf("after Changed: next number %d, want %d (a fresh build)", got, len(st.Units))
	}
	OnReclaimNotice(st, "L4", now.Add(3*time.Minute), now.Add(5*time.Minute), cfg)
	if st.scratch.live {
		t.Fatal("a reclaim notice left the view live")
	}
}

// fitting lists the GPUs of l that could take one more GPU of r, by the
// running units' use of them.
func fitting(st *State, l *Lease, r *core.Request) []int {
	used := make([]core.Milli, l.Offer.GPUs)
	whole := make([]bool, l.Offer.GPUs)
	for _, u := range st.Units {
		if u.State != core.JobRunning && u.State != core.JobCheckpointing {
			continue
		}
		for _, p := range u.Parts {
			if p.LeaseID != l.ID {
				continue
			}
			for _, g := range p.GPUs {
				used[g] += u.Job.Request.MilliPerGPU
				whole[g] = whole[g] || u.Job.Request.MilliPerGPU >= core.WholeGPU
			}
		}
	}
	var out []int
	for g := range used {
		if r.MilliPerGPU >= core.WholeGPU && used[g] == 0 || r.MilliPerGPU < core.WholeGPU && !whole[g] && used[g]+r.MilliPerGPU <= core.WholeGPU {
			out = append(out, g)
		}
	}
	return out
}
