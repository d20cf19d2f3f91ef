package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// BenchmarkStep: one engine.Step over 5,000 ready 8-GPU machines and
// 50,000 jobs, half of them running (filling about 60% of the GPUs) and
// half pending.
func BenchmarkStep(b *testing.B) {
	uncheckedViews(b)
	st := readyFleet(5000)
	now := t0.Add(24 * time.Hour)
	slot := 0
	for i := 0; i < 50000; i++ {
		gpus := []int{1, 1, 1, 2, 4}[i%5]
		j := &core.Job{ID: fmt.Sprintf("j%d", i), Team: fmt.Sprintf("team%d", i%50), Tier: []core.Tier{core.TierCore, core.TierRegular, core.TierOffline}[i%3],
			Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, EstDuration: time.Duration(1+i%12) * time.Hour, Interruptible: i%2 == 0, Submit: t0}
		if gpus == 1 && i%10 == 0 {
			j.Request.MilliPerGPU = 500
		}
		u := &Unit{Unit: sched.Unit{Job: j}, State: core.JobPending, Since: now.Add(-time.Hour)}
		if i < 25000 {
			// Running: one whole GPU each, machine by machine.
			j.Request.MilliPerGPU = core.WholeGPU
			lease := slot / 8
			u.State, u.Start, u.Parts = core.JobRunning, now.Add(-2*time.Hour), []Assigned{{LeaseID: fmt.Sprintf("L%d", lease), GPUs: []int{slot % 8}}}
			slot++
		} else {
			j.Request.GPUs = gpus
		}
		st.Units = append(st.Units, u)
	}
	var d Decisions
	for b.Loop() {
		d = Step(st, now, Config{})
	}
	b.ReportMetric(float64(len(d.Place)), "placements")
	b.ReportMetric(float64(len(d.Acquire)), "acquisitions")
}

// BenchmarkStepOneArrival: the replay's common step — one job arrives on
// a fleet of 120 ready 8-GPU machines running 200 units, is placed
// (Step, Apply) and later finishes (FinishUnit, Prune) — with the live
// view kept between steps ("live") and with it built afresh at every
// step as before the view was kept ("fresh", State.changed before each
// Step). Both make the same decisions.
func BenchmarkStepOneArrival(b *testing.B) {
	uncheckedViews(b)
	for _, fresh := range []bool{false, true} {
		name := "live"
		if fresh {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			st := readyFleet(120)
			now := t0.Add(24 * time.Hour)
			// next is each machine's first GPU not yet running a unit: at
			// most two units of up to 4 GPUs share a machine, on distinct
			// GPUs.
			next := map[int]int{}
			for i := 0; i < 200; i++ {
				j := &core.Job{ID: fmt.Sprintf("r%d", i), Team: fmt.Sprintf("team%d", i%5), Tier: core.TierRegular,
					Request: core.Request{GPUs: 1 + i%4, MilliPerGPU: core.WholeGPU}, EstDuration: time.Duration(1+i%12) * time.Hour, Submit: t0}
				lease := i * 119 / 199
				gpus := make([]int, j.Request.GPUs)
				for g := range gpus {
					gpus[g] = next[lease] + g
				}
				next[lease] += len(gpus)
				st.Units = append(st.Units, &Unit{Unit: sched.Unit{Job: j}, State: core.JobRunning, Start: now.Add(-time.Hour), LastCheckpoint: now.Add(-time.Hour),
					Parts: []Assigned{{LeaseID: fmt.Sprintf("L%d", lease), GPUs: gpus}}})
			}
			cfg := Config{NoAcquire: true, NoRelease: true}
			Apply(st, Step(st, now, cfg))
			placed := 0
			i := 0
			for b.Loop() {
				i++
				now = now.Add(time.Minute)
				j := &core.Job{ID: fmt.Sprintf("n%d", i), Team: "team1", Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU},
					EstDuration: time.Hour, Submit: now}
				u := &Unit{Unit: sched.Unit{Job: j}, State: core.JobPending, Since: now}
				st.Units = append(st.Units, u)
				if fresh {
					st.changed()
				}
				d := Step(st, now, cfg)
				Apply(st, d)
				placed += len(d.Place)
				FinishUnit(st, u, now.Add(time.Second))
				Prune(st, nil, nil)
			}
			if placed != i {
				b.Fatalf("%d of %d arrivals placed", placed, i)
			}
		})
	}
}

// uncheckedViews turns off, for one benchmark, the live view's check that
// the package's tests run with (TestMain): a benchmark measures the
// engine as it runs.
func uncheckedViews(b *testing.B) {
	was := CheckViews(false)
	b.Cleanup(func() { CheckViews(was) })
}

// readyFleet is a state with n ready on-demand 8-GPU machines, A100 and
// V100 by turns, leased L0, L1, … since t0.
func readyFleet(n int) *State {
	offers := []core.Offer{hourlyOffer("a100x8", "A100", 8, "20"), hourlyOffer("v100x8", "V100", 8, "8")}
	st := &State{Offers: offers, Spent: map[string]core.Micros{}}
	for i := range n {
		o := &st.Offers[i%2]
		st.Leases = append(st.Leases, &Lease{Lease: core.Lease{ID: fmt.Sprintf("L%d", i), OfferID: o.ID, Mode: core.OnDemand, Start: t0, State: core.LeaseReady},
			Offer: o, Plan: &o.Plans[0], ReadyAt: t0})
	}
	return st
}
