package fleet

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Joined is machines that are there already, not rented: agents that
// joined the server by hand with an offer and wait, unbound, for work
// (owned machines, or ones paid for elsewhere). Free is how many of
// Offer's machines wait.
type Joined struct {
	Offer *core.Offer
	Free  int
}

// AcquireJoined leases joined machines for waiting demand before
// anything is rented: a machine that is there costs nothing more for
// being used, so the demand does not wait for its tier's target, and
// the lease starts at once (no provisioning delay). Each unit goes, in
// the order Acquire serves demand, into a joined machine already chosen
// this step if one has room, else onto a new joined machine: of the
// admissible offers with one free, the lowest expected cost per useful
// GPU-hour on its pay-as-you-go plans (on-demand; spot is never chosen,
// an owned machine is not reclaimed; a committed plan only for an offer
// sold on nothing else). Budgets stop it as they stop renting, since the
// lease is billed on the chosen plan. It returns the acquisitions and
// the demand left for Acquire.
func AcquireJoined(now time.Time, demand []Demand, joined []Joined, budgets map[string]Budget, cfg Config) ([]Acquisition, []Demand) {
	free := 0
	for _, j := range joined {
		free += j.Free
	}
	if free == 0 || len(demand) == 0 {
		return nil, demand
	}
	cfg = cfg.Defaults()
	ds := append([]Demand(nil), demand...)
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Unit.Job, ds[j].Unit.Job
		if a.Tier.Rank() != b.Tier.Rank() {
			return a.Tier.Rank() < b.Tier.Rank()
		}
		return ds[i].Since.Before(ds[j].Since)
	})
	left := map[string]int{}
	orig := map[string]*core.Offer{}
	offers := make([]core.Offer, 0, len(joined))
	// A joined machine is ready now: no provisioning delay in its price.
	cfg.ProvisioningDelay = map[string]time.Duration{}
	for _, j := range joined {
		if j.Free <= 0 || j.Offer == nil {
			continue
		}
		if orig[j.Offer.ID] == nil {
			orig[j.Offer.ID] = j.Offer
			offers = append(offers, payAsYouGo(*j.Offer))
		}
		left[j.Offer.ID] += j.Free
		cfg.ProvisioningDelay[j.Offer.ID] = 0
	}
	spent := map[string]core.Micros{}
	for t, b := range budgets {
		spent[t] = b.Spent
	}
	var plan []*planned
	var rest []Demand
	for _, d := range ds {
		if packInto(plan, d) {
			continue
		}
		avail := offers[:0:0]
		for _, o := range offers {
			if left[o.ID] >= machinesFor(&o, d.Unit.Job) {
				avail = append(avail, o)
			}
		}
		opt, ok := bestOption(now, d, avail, nil, 0, false, nil, 0, true, cfg)
		j := d.Unit.Job
		if !ok || opt.mode == core.Spot {
			rest = append(rest, d)
			continue
		}
		if b, ok := budgets[j.Team]; ok && b.Limit > 0 && spent[j.Team]+opt.cost > b.Limit {
			rest = append(rest, d) // Acquire says no as well, and the alert says why
			continue
		}
		spent[j.Team] += opt.cost
		opt.offer = orig[opt.offer.ID]
		n := machinesFor(opt.offer, j)
		left[opt.offer.ID] -= n
		for k := 0; k < n; k++ {
			acq := &Acquisition{Offer: opt.offer, Mode: opt.mode, For: []string{d.Unit.Key()}, ExpectedCost: opt.cost, PerUsefulGPUHour: opt.perGPU, Joined: true,
				Reason: fmt.Sprintf("%s waits and a machine of %s joined by its agent is free (%d left): leased now, nothing rented (%s)", d.Unit.Key(), opt.offer.ID, left[opt.offer.ID], opt.why)}
			p := &planned{acq: acq, free: newFree(opt.offer)}
			take(p, j.Request, k, n)
			plan = append(plan, p)
		}
	}
	out := make([]Acquisition, 0, len(plan))
	for _, p := range plan {
		out = append(out, *p.acq)
	}
	return out, rest
}

// payAsYouGo is o with only the plans a joined machine is leased on:
// its pay-as-you-go ones, or, for an offer sold on no such plan, its
// committed ones; never spot.
func payAsYouGo(o core.Offer) core.Offer {
	var flex, committed []core.PricePlan
	for _, p := range o.Plans {
		switch {
		case p.Mode == core.Spot:
		case p.Committed():
			committed = append(committed, p)
		default:
			flex = append(flex, p)
		}
	}
	if len(flex) == 0 {
		flex = committed
	}
	o.Plans = flex
	return o
}
