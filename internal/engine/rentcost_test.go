package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Work waits for a machine of its own (a nonzero RentCost) unless
// waiting could cost it its deadline: with a deadline it is held only
// when its latest start comes after the longest hold (its tier's wait
// target, rentWait and the risk lead) and it has an estimate to tell.
// The hold counts from the end of a deferral, not from before it.
func TestRentCostsHoldsDeadlineWorkOnlyWithSlack(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	daily := core.Offer{ID: "idc/v100x8", Provider: "idc", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "USD",
		Plans: []core.PricePlan{{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: 86400, Term: 86400}}}
	st := &State{Offers: []core.Offer{daily, hourlyOffer("aws/t4x8", "T4", 8, "8.00")}}
	fcfg := fleet.Config{}.Defaults()
	lead := sched.Config{}.Defaults().RiskLead
	hold := fcfg.WaitTarget[core.TierOffline] + rentWait + lead
	run := 3 * 24 * time.Hour
	for _, tc := range []struct {
		name     string
		deadline time.Duration // after now; 0: none
		est      time.Duration
		waited   time.Duration
		deferred time.Duration // its deferral ended this long ago; 0: none
		held     bool
	}{
		{"no deadline: held", 0, run, 0, 0, true},
		{"slack beyond the hold: held", run + hold + time.Hour, run, 0, 0, true},
		{"slack within the hold: not held", run + hold - time.Minute, run, 0, 0, false},
		{"a deadline and no estimate: not held", run + 10*hold, 0, 0, 0, false},
		{"waited past its target and rentWait: not held", 0, run, fcfg.WaitTarget[core.TierOffline] + rentWait, 0, false},
		{"pending for hours, deferred until a minute ago: held", 0, run, 5 * time.Hour, time.Minute, true},
		{"deferred, then waited past the hold: not held", 0, run, 5 * time.Hour, fcfg.WaitTarget[core.TierOffline] + rentWait, false},
		{"deferred, slack counted from the deferral's end: not held", run + hold - 2*time.Minute, run, 10 * time.Minute, time.Minute, false},
	} {
		j := job("j", core.TierOffline, 8, tc.est)
		if tc.deadline > 0 {
			j.Deadline = now.Add(tc.deadline)
		}
		u := &Unit{Unit: sched.Unit{Job: j}, Since: now.Add(-tc.waited)}
		if tc.deferred > 0 {
			u.DeferredUntil = now.Add(-tc.deferred)
		}
		cost := rentCosts(st, now, func(sched.Unit) *Unit { return u }, fcfg, lead)(u.Unit)
		if got := cost > 0; got != tc.held {
			t.Errorf("%s: RentCost %s, want held %v", tc.name, cost, tc.held)
		}
	}
}
