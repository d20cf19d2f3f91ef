package fleet

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A refusal holds its offer's mode for RefusalWait, doubling at each
// further refusal up to RefusalWaitMax; several refusals at one instant
// are one; a launch of the mode, or a machine of the offer that ends,
// clears it.
func TestRefusalWaits(t *testing.T) {
	var rs []core.Refusal
	at := now
	var waits []time.Duration
	for range 7 {
		rs = Refused(rs, "a100-od", core.OnDemand, at)
		rs = Refused(rs, "a100-od", core.OnDemand, at) // a second machine refused in the same step
		if len(rs) != 1 {
			t.Fatalf("refusals %+v, want one", rs)
		}
		w := rs[0].Until.Sub(at)
		waits = append(waits, w)
		if !Holds(rs, "a100-od", core.OnDemand, at.Add(w-time.Nanosecond)) || Holds(rs, "a100-od", core.OnDemand, at.Add(w)) {
			t.Fatalf("a wait of %s does not hold until its end and no further", w)
		}
		if Holds(rs, "a100-od", core.Spot, at) || Holds(rs, "v100-od", core.OnDemand, at) {
			t.Fatal("a refusal holds another mode or offer")
		}
		at = at.Add(w) // asked again when the wait is over, and refused again
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	rs = Refused(rs, "a100-od", core.Spot, at)
	rs = Refused(rs, "v100-od", core.OnDemand, at)
	if len(rs) != 3 || rs[0].Mode != core.OnDemand || rs[1].Mode != core.Spot || rs[2].Offer != "v100-od" {
		t.Fatalf("refusals %+v, want them in offer and mode order", rs)
	}
	if got := Launched(rs, "a100-od", core.OnDemand); len(got) != 2 || Holds(got, "a100-od", core.OnDemand, at) || !Holds(got, "a100-od", core.Spot, at) {
		t.Fatalf("after a launch of a100-od on-demand: %+v", got)
	}
	if got := Freed(rs, "a100-od"); len(got) != 1 || got[0].Offer != "v100-od" {
		t.Fatalf("after a machine of a100-od ended: %+v", got)
	}
	if len(rs) != 3 {
		t.Fatal("Launched or Freed changed the list it was given")
	}
	// Cleared, the next refusal starts the wait afresh.
	if rs = Refused(Launched(rs, "a100-od", core.OnDemand), "a100-od", core.OnDemand, at); rs[0].Wait != RefusalWait {
		t.Fatalf("after a launch, a refusal waits %s, want %s", rs[0].Wait, RefusalWait)
	}
}

// While the cheapest offer's mode is held by a refusal, Acquire rents the
// next cheapest admissible one; with none, the work waits. The reserved
// base passes over a held offer too.
func TestAcquireSkipsRefusedOffers(t *testing.T) {
	d := demandFor("d", core.TierRegular, 2*time.Hour, false)
	acq := Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, nil, Config{})
	if len(acq) != 1 || acq[0].Offer.ID != "v100-od" {
		t.Fatalf("without refusals: %+v, want v100-od", acq)
	}
	rs := Refused(nil, "v100-od", core.OnDemand, now.Add(-10*time.Second))
	acq = Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, rs, Config{})
	if len(acq) != 1 || acq[0].Offer.ID != "a100-od" || acq[0].Mode != core.OnDemand {
		t.Fatalf("v100-od refused 10s ago: %+v, want a100-od on-demand", acq)
	}
	if acq := Acquire(now.Add(20*time.Second), []Demand{d}, nil, offers(), nil, 0, nil, rs, Config{}); len(acq) != 1 || acq[0].Offer.ID != "v100-od" {
		t.Fatalf("the wait over: %+v, want v100-od asked for again", acq)
	}
	a100 := demandFor("a", core.TierRegular, 2*time.Hour, false, "A100")
	rs = Refused(nil, "a100-od", core.OnDemand, now)
	if acq := Acquire(now, []Demand{a100}, nil, offers(), nil, 0, nil, rs, Config{}); len(acq) != 1 || acq[0].Offer.ID != "a100-od" || acq[0].Mode != core.Weekly {
		t.Fatalf("A100 on-demand refused: %+v, want the next cheapest mode, weekly", acq)
	}
	rs = Refused(rs, "a100-od", core.Weekly, now)
	if acq := Acquire(now, []Demand{a100}, nil, offers(), nil, 0, nil, rs, Config{}); len(acq) != 0 {
		t.Fatalf("every admissible mode refused: %+v, want the work to wait", acq)
	}

	cfg := Config{Reserved: map[string]int{"A100": 1}, ReservedMode: core.Weekly}
	if got := ReservedBase(now, nil, offers(), nil, cfg); len(got) != 1 || got[0].Offer.ID != "a100-od" {
		t.Fatalf("reserved base: %+v, want one a100-od weekly", got)
	}
	if got := ReservedBase(now, nil, offers(), Refused(nil, "a100-od", core.Weekly, now), cfg); len(got) != 0 {
		t.Fatalf("reserved base with its only offer refused: %+v, want none", got)
	}
}
