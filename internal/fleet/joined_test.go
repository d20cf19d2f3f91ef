package fleet

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestAcquireJoined: waiting work takes a joined machine at once (before
// its wait target, which Acquire would honour), on its on-demand plan
// even where spot or a week's term would be cheaper to rent, the
// dearer joined A100 when the job needs an A100 over a cheaper V100 it
// cannot use; two one-GPU jobs share nothing on one-GPU machines, so
// with one A100 joined the second waits for Acquire; a budget past its
// cap takes no joined machine either.
func TestAcquireJoined(t *testing.T) {
	os := offers()
	joined := []Joined{{Offer: &os[0], Free: 1}, {Offer: &os[1], Free: 1}}
	fresh := func(id string, interruptible bool, est time.Duration, models ...string) Demand {
		d := demandFor(id, core.TierOffline, est, interruptible, models...)
		d.Since = now // waited nothing: Acquire would rent nothing for an hour
		return d
	}
	if acq := Acquire(now, []Demand{fresh("x", false, time.Hour, "A100")}, nil, os, nil, 0, nil, nil, Config{}); len(acq) != 0 {
		t.Fatalf("Acquire rents before the wait target: %+v", acq)
	}
	ds := []Demand{fresh("a", true, 7*24*time.Hour, "A100"), fresh("b", false, time.Hour, "A100"), fresh("c", false, time.Hour)}
	acq, rest := AcquireJoined(now, ds, joined, nil, Config{})
	if len(acq) != 2 {
		t.Fatalf("acquisitions %+v, want two: the joined A100 and V100", acq)
	}
	if a := acq[0]; a.Offer != &os[0] || a.Mode != core.OnDemand || !a.Joined || len(a.For) != 1 || a.For[0] != "a" {
		t.Errorf("first: %s %s joined=%v for %v, want the joined A100 on-demand for a", a.Offer.ID, a.Mode, a.Joined, a.For)
	}
	if a := acq[1]; a.Offer != &os[1] || a.Mode != core.OnDemand || !a.Joined || len(a.For) != 1 || a.For[0] != "c" {
		t.Errorf("second: %s %s for %v, want the joined V100 for c (any model)", a.Offer.ID, a.Mode, a.For)
	}
	if len(rest) != 1 || rest[0].Unit.Job.ID != "b" {
		t.Errorf("left for renting %+v, want b alone", rest)
	}
	acq, rest = AcquireJoined(now, ds[:1], joined, map[string]Budget{"t": {Limit: 1_000_000, Spent: 999_999}}, Config{})
	if len(acq) != 0 || len(rest) != 1 {
		t.Errorf("past the budget: %+v taken, %d left; want none taken", acq, len(rest))
	}
	if acq, rest := AcquireJoined(now, ds, nil, nil, Config{}); len(acq) != 0 || len(rest) != len(ds) {
		t.Errorf("nothing joined: %+v, %d left", acq, len(rest))
	}
}
