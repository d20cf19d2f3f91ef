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
// a committed plan count toward the base.
func ReservedBase(now time.Time, machines []Machine, offers []core.Offer, cfg Config) []Acquisition {
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
		var best *core.Offer
		var bestPer core.Micros
		for i := range offers {
			o := &offers[i]
			p, ok := o.Plan(cfg.ReservedMode)
			if o.GPUModel != model || !ok || !p.Committed() {
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
