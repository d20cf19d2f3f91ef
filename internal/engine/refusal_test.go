package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// An offer's mode refused for capacity (OnRefused) is not rented again
// while the refusal holds: the next step rents the next cheapest offer.
// A launch of the mode clears the refusal, and so does a machine of the
// offer that ends; a refused lease, never launched, frees no place.
func TestRefusedOfferWaits(t *testing.T) {
	cheap, dear := hourlyOffer("cheap", "A100", 1, "1"), hourlyOffer("dear", "A100", 1, "2")
	st := &State{Offers: []core.Offer{cheap, dear}, Spent: map[string]core.Micros{}}
	h := &harness{t: t, st: st, now: t0, actual: map[string]time.Duration{}}
	h.submit(job("j", core.TierCore, 1, time.Hour), time.Hour)
	now := t0.Add(10 * time.Minute) // past the core tier's waiting target
	acquire := func() []*Lease {
		d := Step(st, now, Config{})
		return Apply(st, d)
	}
	got := acquire()
	if len(got) != 1 || got[0].OfferID != "cheap" {
		t.Fatalf("first acquisition: %+v, want cheap", got)
	}
	OnRefused(st, got[0].ID, now)
	if len(st.Refused) != 1 || st.Refused[0].Offer != "cheap" || !st.Refused[0].Until.Equal(now.Add(fleet.RefusalWait)) {
		t.Fatalf("refusals %+v, want cheap for %s", st.Refused, fleet.RefusalWait)
	}
	if l := st.lease(got[0].ID); l.State != core.LeaseFailed {
		t.Fatalf("refused lease %s, want failed", l.State)
	}
	now = now.Add(time.Second)
	got = acquire()
	if len(got) != 1 || got[0].OfferID != "dear" {
		t.Fatalf("while cheap is refused: %+v, want dear", got)
	}
	OnRefused(st, got[0].ID, now)
	now = now.Add(fleet.RefusalWait)
	got = acquire()
	if len(got) != 1 || got[0].OfferID != "cheap" {
		t.Fatalf("cheap's wait over: %+v, want cheap asked again", got)
	}
	OnLaunched(st, got[0].ID, "m1", now)
	if len(st.Refused) != 1 || st.Refused[0].Offer != "dear" {
		t.Fatalf("after cheap launched: %+v, want only dear's refusal left", st.Refused)
	}
	st.Refused = fleet.Refused(st.Refused, "cheap", core.OnDemand, now)
	OnFailed(st, got[0].ID, now) // the launched machine fails: its place is free
	if len(st.Refused) != 1 || st.Refused[0].Offer != "dear" {
		t.Fatalf("after a machine of cheap ended: %+v, want only dear's refusal left", st.Refused)
	}
}
