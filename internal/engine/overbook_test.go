package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"pgregory.net/rapid"
)

// overbooked reports the first GPU of a live lease that the running units
// hold more of than it has (their shares summed), or "".
func overbooked(st *State) string {
	held := map[string]core.Milli{}
	for _, u := range st.Units {
		if u.State != core.JobRunning && u.State != core.JobCheckpointing {
			continue
		}
		for _, p := range u.Parts {
			for _, g := range p.GPUs {
				held[fmt.Sprintf("%s/%d", p.LeaseID, g)] += u.Job.Request.MilliPerGPU
			}
		}
	}
	for _, l := range st.Leases {
		if l.State.Final() {
			continue
		}
		for g := range l.Offer.GPUs {
			if m := held[fmt.Sprintf("%s/%d", l.ID, g)]; m > l.Offer.MilliPerGPU() {
				return fmt.Sprintf("GPU %d of %s holds %d milli-GPU of running work, at most %d", g, l.ID, m, l.Offer.MilliPerGPU())
			}
		}
	}
	return ""
}

// A gang's GPUs on its other machines stay taken while one of its
// machines is under a reclaim notice: the notice takes that machine out
// of the schedulable nodes, and the gang out of the running allocations
// (it is neither preempted nor moved), but the GPUs it still runs on
// elsewhere until the reclaim are not free. Step used to see them free
// and place other work on them: a lease's GPUs held twice over (the
// ledger refused the stored runs, "lease L60437 uses 10000 milli-GPUs,
// at most 8000").
func TestReclaimNoticeKeepsGangGPUs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		notice  string // the lease under notice
		pending int    // GPUs the waiting job asks for
	}{
		{"notice on the gang's larger part, the whole other machine asked", "a", 8},
		{"notice on the gang's larger part, its GPUs on the other asked", "a", 5},
		{"notice on the gang's smaller part", "b", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offer := hourlyOffer("x8", "A100", 8, "8")
			st := &State{Offers: []core.Offer{offer}, Spent: map[string]core.Micros{}}
			for _, id := range []string{"a", "b"} {
				p, _ := offer.Plan(core.OnDemand)
				st.Leases = append(st.Leases, &Lease{Lease: core.Lease{ID: id, OfferID: offer.ID, Mode: core.OnDemand, State: core.LeaseReady, Start: t0},
					Offer: &st.Offers[0], Plan: p, ReadyAt: t0, node: -1})
			}
			// The gang: 12 GPUs, all 8 of a and 4 of b.
			gang := job("gang", core.TierRegular, 12, 10*time.Hour)
			gang.Interruptible = true
			st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: gang}, State: core.JobRunning, Start: t0, LastCheckpoint: t0,
				Parts: []Assigned{{LeaseID: "a", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {LeaseID: "b", GPUs: []int{0, 1, 2, 3}}}})
			now := t0.Add(time.Hour)
			st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: job("next", core.TierCore, tc.pending, time.Hour)}, State: core.JobPending, Since: now})
			// A first step with everything ready: the live view is built.
			d := Step(st, now, Config{NoAcquire: true})
			Apply(st, d)
			if msg := overbooked(st); msg != "" {
				t.Fatalf("before the notice: %s", msg)
			}
			now = now.Add(time.Minute)
			OnReclaimNotice(st, tc.notice, now, now.Add(2*time.Minute), Config{})
			for step := range 3 {
				d := Step(st, now, Config{NoAcquire: true})
				for _, p := range d.Place {
					for _, part := range p.Parts {
						if part.LeaseID != tc.notice {
							continue
						}
						t.Errorf("step %d: %s placed on %s, the machine under notice", step, p.Unit, part.LeaseID)
					}
				}
				Apply(st, d)
				if msg := overbooked(st); msg != "" {
					t.Fatalf("step %d after the notice on %s: %s (placed %+v)", step, tc.notice, msg, d.Place)
				}
				now = now.Add(30 * time.Second)
			}
			// The reclaim ends the gang's run: its GPUs on the other machine
			// are free again.
			OnReclaimed(st, tc.notice, now)
			d = Step(st, now, Config{NoAcquire: true})
			Apply(st, d)
			if msg := overbooked(st); msg != "" {
				t.Fatalf("after the reclaim: %s", msg)
			}
			if u := st.unit("next"); tc.pending <= 8 && u.State != core.JobRunning {
				t.Errorf("after the reclaim the waiting job is %s, want it running on the freed machine", u.State)
			}
		})
	}
}

// TestPropertyNoOverbooking: whatever arrives — gangs larger than a
// machine among it — and however often spot machines are reclaimed, no
// GPU of a live lease is ever held by running work beyond its capacity
// after a step.
func TestPropertyNoOverbooking(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spot := hourlyOffer("spot", "A100", 4, "1")
		spot.Plans[0].Mode = core.Spot
		spot.Plans[0].Reclaim = &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}
		offers := []core.Offer{hourlyOffer("od", "A100", 2, "9"), spot}
		h := newHarness(t, offers, Config{})
		h.tick = 5 * time.Minute
		type arrival struct {
			at  time.Duration
			job *core.Job
		}
		var arrivals []arrival
		for i, n := 0, rapid.IntRange(1, 16).Draw(t, "jobs"); i < n; i++ {
			j := job(fmt.Sprintf("j%d", i), rapid.SampledFrom([]core.Tier{core.TierCore, core.TierRegular, core.TierOffline}).Draw(t, "tier"),
				rapid.IntRange(1, 10).Draw(t, "gpus"), time.Duration(rapid.IntRange(1, 12).Draw(t, "est"))*time.Hour)
			j.Interruptible = rapid.Bool().Draw(t, "int")
			j.CheckpointInterval = 15 * time.Minute
			arrivals = append(arrivals, arrival{at: time.Duration(rapid.IntRange(0, 24).Draw(t, "at")) * time.Hour, job: j})
		}
		notice := time.Duration(rapid.IntRange(1, 6).Draw(t, "notice")) * h.tick
		reclaimEvery := time.Duration(rapid.IntRange(1, 6).Draw(t, "reclaim")) * time.Hour
		h.onTick = func(h *harness) {
			for _, a := range arrivals {
				if h.now.Sub(t0) == a.at {
					j := *a.job
					h.submit(&j, j.EstDuration)
				}
			}
			for _, l := range h.st.Leases {
				if l.Mode == core.Spot && l.State == core.LeaseReady && l.ReclaimAt.IsZero() && h.now.Sub(l.ReadyAt) >= reclaimEvery {
					OnReclaimNotice(h.st, l.ID, h.now, h.now.Add(notice), h.cfg)
				}
				if !l.ReclaimAt.IsZero() && !h.now.Before(l.ReclaimAt) && !l.State.Final() {
					OnReclaimed(h.st, l.ID, h.now)
				}
			}
		}
		h.onApplied = func(h *harness, d *Decisions) {
			if msg := overbooked(h.st); msg != "" {
				t.Fatalf("%v: %s", h.now, msg)
			}
		}
		h.runUntil(t0.Add(30 * time.Hour))
	})
}
