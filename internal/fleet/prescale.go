package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
)

// Prescale rents ahead of the daily peak: when the recent days say demand
// will stand above the fleet's capacity within the next PrescaleLead
// (plan.DemandAhead over the demand history, its PrescaleQuantile of the
// days), it rents the difference now, in whole machines the forecast fills
// (rounding down: a machine is rented only for GPUs the forecast
// expects), so the peak's work finds them booted instead of waiting out
// the provisioning delay. Capacity counts every live machine, those on
// their way and rented in this step (rented). The machines are of the
// offers the fleet's work runs on now, most allocated first, on on-demand
// terms: a wrong forecast costs at most a billing increment per machine,
// since the release rule lets an idle one go at its boundary. Only
// offers (the catalog's, which the provider rents from) are rented: a
// machine that joined by hand has an offer no provider makes. Off (nil)
// when PrescaleLead is 0.
func Prescale(now time.Time, machines []Machine, rented []Acquisition, offers []core.Offer, pts []DemandPoint, refused []core.Refusal, cfg Config) []Acquisition {
	if cfg.PrescaleLead <= 0 {
		return nil // off (every preset): nothing to set up
	}
	cfg = cfg.Defaults()
	if len(rented) >= cfg.MaxAcquire {
		return nil
	}
	want, days := plan.DemandAhead(now, pts, cfg.PrescaleLead, cfg.PrescaleQuantile)
	if days == 0 {
		return nil
	}
	var have int64
	type use struct {
		offer *core.Offer
		alloc int64
	}
	var uses []use
	for i := range machines {
		m := &machines[i]
		if m.Lease.State.Final() {
			continue
		}
		have += int64(m.Offer.CapMilli())
		k := slices.IndexFunc(uses, func(u use) bool { return u.offer.ID == m.Offer.ID })
		if k < 0 {
			uses = append(uses, use{offer: m.Offer})
			k = len(uses) - 1
		}
		uses[k].alloc += int64(m.AllocMilli)
	}
	for _, a := range rented {
		have += int64(a.Offer.CapMilli())
	}
	if want <= have {
		return nil
	}
	slices.SortStableFunc(uses, func(a, b use) int {
		return cmp.Or(cmp.Compare(b.alloc, a.alloc), cmp.Compare(a.offer.ID, b.offer.ID))
	})
	skip := held(refused, now)
	for _, u := range uses {
		if u.alloc == 0 {
			break // the fleet's work runs on none of the rest
		}
		k := slices.IndexFunc(offers, func(o core.Offer) bool { return o.ID == u.offer.ID })
		if k < 0 {
			continue
		}
		o := &offers[k]
		if _, ok := o.Plan(core.OnDemand); !ok || skip != nil && skip(o.ID, core.OnDemand) {
			continue
		}
		n := min((want-have)/int64(o.CapMilli()), int64(cfg.MaxAcquire-len(rented)))
		if n <= 0 {
			return nil
		}
		out := make([]Acquisition, 0, n)
		for k := range n {
			out = append(out, Acquisition{Offer: o, Mode: core.OnDemand,
				Reason: fmt.Sprintf("pre-scaled ahead of the daily peak: demand reached %s GPUs within %s of this time of day on %s of the last %d days, capacity (with machines on their way) is %s GPUs; machine %d of %d of %s, the offer the fleet's work runs on most, on-demand",
					gpus(want), cfg.PrescaleLead, quantileWhy(cfg.PrescaleQuantile), days, gpus(have), k+1, n, o.ID)})
		}
		return out
	}
	return nil
}

// gpus formats milli-GPUs as GPUs.
func gpus(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprint(milli / 1000)
	}
	return fmt.Sprintf("%.1f", float64(milli)/1000)
}

// quantileWhy says which of the days a lower quantile stands for.
func quantileWhy(q int) string {
	switch q {
	case 0:
		return "every one"
	case 50:
		return "at least half"
	}
	return fmt.Sprintf("at least %d%%", 100-q)
}
