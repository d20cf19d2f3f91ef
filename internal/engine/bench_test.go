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
	offers := []core.Offer{hourlyOffer("a100x8", "A100", 8, "20"), hourlyOffer("v100x8", "V100", 8, "8")}
	st := &State{Offers: offers, Spent: map[string]core.Micros{}}
	now := t0.Add(24 * time.Hour)
	for i := 0; i < 5000; i++ {
		o := &st.Offers[i%2]
		st.Leases = append(st.Leases, &Lease{Lease: core.Lease{ID: fmt.Sprintf("L%d", i), OfferID: o.ID, Mode: core.OnDemand, Start: t0, State: core.LeaseReady},
			Offer: o, Plan: &o.Plans[0], ReadyAt: t0})
	}
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
