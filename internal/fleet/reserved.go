package fleet

import (
	"fmt"
	"math"
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
		skip := held(refused, now)
		best, bestPer := namedOffer(now, cfg.ReservedOffer[model], model, cfg.ReservedMode, offers, skip)
		if best == nil {
			best, bestPer = reservedOffer(now, model, cfg.ReservedMode, offers, skip)
		}
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

// namedOffer is the offer id if it rents model on a committed plan of
// mode and skip does not pass it over, with its term bill per whole GPU.
func namedOffer(now time.Time, id, model string, mode core.BillingMode, offers []core.Offer, skip func(string, core.BillingMode) bool) (*core.Offer, core.Micros) {
	if id == "" {
		return nil, 0
	}
	for i := range offers {
		if offers[i].ID != id {
			continue
		}
		o := &offers[i]
		b, ok := termBill(now, o, model, mode, skip)
		if !ok {
			return nil, 0
		}
		return o, b * core.Micros(core.WholeGPU) / core.Micros(max(o.CapMilli(), 1))
	}
	return nil, 0
}

// termBill is the bill of one term of o's committed plan on mode, if o
// rents model on one and skip does not pass it over.
func termBill(now time.Time, o *core.Offer, model string, mode core.BillingMode, skip func(string, core.BillingMode) bool) (core.Micros, bool) {
	p, ok := o.Plan(mode)
	if o.GPUModel != model || !ok || !p.Committed() || skip != nil && skip(o.ID, mode) {
		return 0, false
	}
	return TermBill(now, p)
}

// TermBill is the bill of one whole committed term of p from now: what a
// machine held to its term pays. Not the bill of an empty span, which
// under an early-termination rule is the fee and a day pro rata — the
// price that made a peak-sized base pick the IDC's A100 month (6,300)
// over its V100 month (2,000). The fleet never ends a term early.
func TermBill(now time.Time, p *core.PricePlan) (core.Micros, bool) {
	b, err := billing.Cost(p, billing.Span{Start: now, End: now.Add(time.Duration(p.Term) * time.Second)})
	if err != nil {
		return 0, false
	}
	return b.Amount, true
}

// ReservedFit is the offer a committed base of gpus whole GPUs of model
// is cheapest on in whole machines of one offer: the least term bill of
// ⌈gpus / GPUs per machine⌉ machines, among the offers whose machines
// hold minGPUs (the largest gang the base must hold whole) — or, when
// none does, the offers with the most GPUs per machine. Ties go to more
// GPUs per machine (fewer machines to run), then the offer ID. The
// cheapest per GPU (ReservedOffer) is not the same: a base of 1,920 V100s
// on 1-GPU machines is 1,920 machines, where 8-GPU machines at the same
// price per GPU are 240 and hold an 8-GPU gang. nil, 0 when no offer of
// the model has a committed plan on mode.
func ReservedFit(now time.Time, model string, mode core.BillingMode, gpus, minGPUs int, offers []core.Offer) (*core.Offer, int) {
	most := 0
	for i := range offers {
		if _, ok := termBill(now, &offers[i], model, mode, nil); ok {
			most = max(most, offers[i].GPUs)
		}
	}
	need := min(minGPUs, most)
	var best *core.Offer
	var bestCost core.Micros
	bestN := 0
	for i := range offers {
		o := &offers[i]
		b, ok := termBill(now, o, model, mode, nil)
		if !ok || o.GPUs < need {
			continue
		}
		per := max(int64(o.CapMilli()), 1)
		n := (int64(gpus)*int64(core.WholeGPU) + per - 1) / per
		cost := b * core.Micros(n)
		if best == nil || cost < bestCost || cost == bestCost && (o.GPUs > best.GPUs || o.GPUs == best.GPUs && o.ID < best.ID) {
			best, bestCost, bestN = o, cost, int(min(n, math.MaxInt32))
		}
	}
	return best, bestN
}

// reservedOffer is ReservedOffer passing over the offers skip says (when
// not nil).
func reservedOffer(now time.Time, model string, mode core.BillingMode, offers []core.Offer, skip func(string, core.BillingMode) bool) (*core.Offer, core.Micros) {
	var best *core.Offer
	var bestPer core.Micros
	for i := range offers {
		o := &offers[i]
		b, ok := termBill(now, o, model, mode, skip)
		if !ok {
			continue
		}
		per := b * core.Micros(core.WholeGPU) / core.Micros(o.CapMilli()) // per whole GPU, a slice's too
		if best == nil || per < bestPer {
			best, bestPer = o, per
		}
	}
	return best, bestPer
}
