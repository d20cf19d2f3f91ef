package fleet

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
)

// ReservedBase returns the acquisitions that bring the committed base up
// to cfg.Reserved: per GPU model, machines on cfg.ReservedMode from the
// offer with the cheapest term bill per GPU. Live machines of the model on
// a committed plan count toward the base. An offer's mode refused holds
// at now (Refused) is passed over for the next cheapest, if any.
func ReservedBase(now time.Time, machines []Machine, offers []core.Offer, refused []core.Refusal, cfg Config) []Acquisition {
	cfg = cfg.Defaults()
	if len(cfg.Reserved) == 0 {
		return nil // no base to keep (most policies): skip counting the fleet
	}
	have := map[string]int{}
	for i := range machines {
		m := &machines[i]
		if !m.Lease.State.Final() && m.Plan.Committed() {
			have[m.Offer.GPUModel]++
		}
	}
	models := make([]string, 0, len(cfg.Reserved))
	for model := range cfg.Reserved {
		models = append(models, model)
	}
	sort.Strings(models)
	var out []Acquisition
	for _, model := range models {
		want := cfg.Reserved[model]
		if have[model] >= want {
			continue
		}
		best, bestPer := reservedOffer(now, model, cfg.ReservedMode, offers, held(refused, now))
		if best == nil {
			continue
		}
		for k := have[model]; k < want; k++ {
			out = append(out, Acquisition{Offer: best, Mode: cfg.ReservedMode,
				Reason: fmt.Sprintf("reserved base: %d of %d %s machines on %s terms; %s at %s per GPU per term is the cheapest", k+1, want, model, cfg.ReservedMode, best.ID, bestPer)})
		}
	}
	return out
}

// ReservedOffer is the offer ReservedBase rents model's base from on
// mode at now: the cheapest term bill per whole GPU (a slice's too); nil
// when no offer of the model has a committed plan on mode.
func ReservedOffer(now time.Time, model string, mode core.BillingMode, offers []core.Offer) *core.Offer {
	o, _ := reservedOffer(now, model, mode, offers, nil)
	return o
}

// reservedOffer is ReservedOffer passing over the offers skip says (when
// not nil).
func reservedOffer(now time.Time, model string, mode core.BillingMode, offers []core.Offer, skip func(string, core.BillingMode) bool) (*core.Offer, core.Micros) {
	var best *core.Offer
	var bestPer core.Micros
	for i := range offers {
		o := &offers[i]
		p, ok := o.Plan(mode)
		if o.GPUModel != model || !ok || !p.Committed() || skip != nil && skip(o.ID, mode) {
			continue
		}
		b, err := billing.Cost(p, billing.Span{Start: now, End: now})
		if err != nil {
			continue
		}
		per := b.Amount * core.Micros(core.WholeGPU) / core.Micros(o.CapMilli()) // per whole GPU, a slice's too
		if best == nil || per < bestPer {
			best, bestPer = o, per
		}
	}
	return best, bestPer
}
