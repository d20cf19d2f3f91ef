package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// TestTallyEveryChange: for each kind of change Apply makes to where
// units run — a preemption, a move, a placement, a release, a stop for
// idleness — the idle marks Apply leaves from the live view's count of
// work per lease are the ones a full count gives. The decisions are the
// ones Step made (so the view is live), with one decision of the kind
// under test put in; a random run (TestPropertyTally) seldom makes some
// of these leave a lease empty. The next Step checks the whole view
// against a fresh build (CheckViews, on in these tests).
func TestTallyEveryChange(t *testing.T) {
	now := t0.Add(3 * time.Hour)
	cases := []struct {
		name   string
		decide func(d *Decisions)
		// idle are the leases that must be idle (since now) afterwards.
		idle []string
	}{
		{"nothing", func(d *Decisions) {}, []string{"L4"}},
		{"preempt the only unit on L1", func(d *Decisions) {
			d.Preempt = append(d.Preempt, Preempt{Unit: "a", LeaseID: "L1"})
		}, []string{"L1", "L4"}},
		{"move L1's unit to L4", func(d *Decisions) {
			d.Move = append(d.Move, Place{Unit: "a", Parts: []Assigned{{LeaseID: "L4", GPUs: []int{0}}}})
		}, []string{"L1"}},
		{"place the waiting unit on L4", func(d *Decisions) {
			d.Place = append(d.Place, Place{Unit: "w", Parts: []Assigned{{LeaseID: "L4", GPUs: []int{1}}}})
		}, nil},
		{"place a running unit again, elsewhere", func(d *Decisions) {
			d.Place = append(d.Place, Place{Unit: "a", Parts: []Assigned{{LeaseID: "L4", GPUs: []int{1}}}})
		}, []string{"L1"}},
		{"release L2 (the unit on L2 and L3 stops)", func(d *Decisions) {
			d.Release = append(d.Release, fleet.Release{LeaseID: "L2"})
		}, []string{"L3", "L4"}},
		{"stop L1's unit for idleness", func(d *Decisions) {
			d.Alerts = append(d.Alerts, fleet.Alert{Kind: "zombie", Action: fleet.IdleStop, Unit: "a"})
		}, []string{"L1", "L4"}},
		{"stop the unit on two leases", func(d *Decisions) {
			d.Alerts = append(d.Alerts, fleet.Alert{Kind: "idle", Action: fleet.IdleStop, Unit: "b"})
		}, []string{"L2", "L3", "L4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := tallyState(t)
			d := Step(st, now, Config{NoAcquire: true, NoRelease: true})
			if !st.scratch.live {
				t.Fatal("no live view after Step")
			}
			d.Place, d.Preempt, d.Move, d.Release, d.Alerts = nil, nil, nil, nil, nil
			c.decide(&d)
			Apply(st, d)
			idle := map[string]bool{}
			for _, l := range st.Leases {
				if !l.IdleSince.IsZero() {
					idle[l.ID] = true
					if !l.IdleSince.Equal(now) && l.ID != "L4" {
						t.Errorf("%s idle since %v, want %v", l.ID, l.IdleSince, now)
					}
				}
			}
			for _, id := range []string{"L1", "L2", "L3", "L4"} {
				want := false
				for _, w := range c.idle {
					want = want || w == id
				}
				if l := st.lease(id); !l.State.Final() && idle[id] != want {
					t.Errorf("%s idle: %v, want %v", id, idle[id], want)
				}
			}
			// And what the full count says.
			before := map[string]time.Time{}
			for _, l := range st.Leases {
				before[l.ID] = l.IdleSince
			}
			countRuns(st)
			markIdle(st, now)
			for _, l := range st.Leases {
				if !l.IdleSince.Equal(before[l.ID]) {
					t.Errorf("%s: idle since %v by the live view's count, %v by a full count", l.ID, before[l.ID], l.IdleSince)
				}
			}
			// And the view kept through the change is what a fresh build
			// gives (checkView panics otherwise).
			Step(st, now.Add(time.Minute), Config{NoAcquire: true, NoRelease: true})
		})
	}
}

// tallyState: four ready 2-GPU on-demand leases; unit a runs on L1, unit
// b on L2 and L3 (one GPU each), nothing on L4, and unit w waits (for a
// model no lease has, so Step leaves it waiting).
func tallyState(t *testing.T) *State {
	t.Helper()
	off := hourlyOffer("od", "A100", 2, "3")
	st := &State{Offers: []core.Offer{off}, Spent: map[string]core.Micros{}}
	for _, id := range []string{"L1", "L2", "L3", "L4"} {
		l := &Lease{Lease: core.Lease{ID: id, OfferID: off.ID, Mode: core.OnDemand, State: core.LeaseReady, Start: t0}, Offer: &st.Offers[0], Plan: &st.Offers[0].Plans[0], ReadyAt: t0}
		st.Leases = append(st.Leases, l)
	}
	st.Leases[3].IdleSince = t0
	run := func(id string, gpus int, parts ...Assigned) {
		j := job(id, core.TierRegular, gpus, 10*time.Hour)
		j.Submit = t0
		st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: j}, State: core.JobRunning, Parts: parts, Start: t0, LastCheckpoint: t0})
	}
	run("a", 1, Assigned{LeaseID: "L1", GPUs: []int{0}})
	run("b", 2, Assigned{LeaseID: "L2", GPUs: []int{0}}, Assigned{LeaseID: "L3", GPUs: []int{0}})
	w := job("w", core.TierRegular, 1, time.Hour)
	w.Submit, w.Request.Models = t0, []string{"H100"}
	st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: w}, State: core.JobPending, Since: t0})
	return st
}
