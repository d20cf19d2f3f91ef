package server

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestBootTimeout: with no executor beside the agents, a ready machine
// whose agent never joins fails its lease after the boot timeout: the
// lease is released at the provider, its unit goes back to the queue
// with the reason, and the loop rents again for it.
func TestBootTimeout(t *testing.T) {
	w := newWorld(t)
	w.loop.cfg.Executor = nil
	w.submit("j1", core.TierCore, 30*time.Minute)
	w.run(5 * time.Minute)
	if j := w.job("j1"); j.State != core.JobRunning {
		t.Fatalf("after 5 min: job %s", j.State)
	}
	first := w.leases()[0]
	if first.State != core.LeaseReady {
		t.Fatalf("after 5 min: lease %+v", first)
	}
	if d := w.clk.Now().Sub(first.ReadyAt); d > 4*time.Minute {
		t.Fatalf("lease ready %s ago", d)
	}
	w.run(first.ReadyAt.Add(DefaultBootTimeout - time.Minute).Sub(w.clk.Now())) // not yet
	if l := w.leaseByID(first.ID); l.State != core.LeaseReady {
		t.Fatalf("lease %s before the boot timeout", l.State)
	}
	w.run(2 * time.Minute) // past it
	if l := w.leaseByID(first.ID); l.State != core.LeaseFailed {
		t.Fatalf("lease %s after the boot timeout, want failed", l.State)
	}
	for _, m := range w.held() {
		if m.ProviderID == first.ProviderID {
			t.Errorf("the failed lease's machine %s is still held: %+v", m.ProviderID, m)
		}
	}
	failed := w.events("lease.failed")
	if len(failed) != 1 || failed[0].Subject != first.ID || !strings.Contains(failed[0].Reason, "no agent joined") {
		t.Errorf("lease.failed events: %+v", failed)
	}
	requeued := false
	for _, e := range w.events("") {
		if e.Subject == "j1" && strings.Contains(e.Reason, "no agent joined") {
			requeued = true
		}
	}
	if !requeued {
		t.Error("no event gives the unit's requeue its reason")
	}
	if j := w.job("j1"); j.State == core.JobSucceeded || j.State == core.JobFailed {
		t.Errorf("job %s: nothing ran it", j.State)
	}
	// The loop rents again for the requeued job.
	w.run(3 * time.Minute)
	if ls := w.leases(); len(ls) < 2 {
		t.Errorf("no new lease for the requeued job: %+v", ls)
	}
}

func (w *world) leaseByID(id string) (l store.Lease) {
	w.t.Helper()
	for _, x := range w.leases() {
		if x.ID == id {
			return x
		}
	}
	w.t.Fatalf("no lease %s", id)
	return l
}
