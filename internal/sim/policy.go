package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// Policy is one way to run the fleet: the engine's settings, which
// billing modes it may rent in, and whether it shifts deferrable work
// into cheaper windows.
type Policy struct {
	Name   string
	Engine engine.Config
	// Modes limits the billing modes rented (nil: every mode).
	Modes []core.BillingMode
	// TimeOfUse: the policy defers work into cheap windows.
	TimeOfUse bool
	// Peak sizes a static fleet from the workload before the run.
	Peak bool
	Doc  string
}

// PolicyNames lists the policies Policies knows, ours first.
var PolicyNames = []string{"gpufleet", "static-peak", "reactive", "autostop"}

// NewPolicy returns the named policy.
func NewPolicy(name string) (Policy, error) {
	switch name {
	case "gpufleet":
		return Policy{Name: name, TimeOfUse: true, Doc: "gpufleet's default: cost- and fragmentation-aware placement, sharing, preemption, backfill, cheapest offer and term per useful GPU-hour (spot for interruptible work), release just before the billing boundary, consolidation, off-peak deferral"}, nil
	case "static-peak":
		return Policy{Name: name, Peak: true, Modes: []core.BillingMode{core.Monthly},
			Engine: engine.Config{NoAcquire: true, NoRelease: true, Fleet: fleet.Config{NoConsolidation: true}},
			Doc:    "a fixed fleet sized for the peak concurrent GPU demand, on monthly terms, rented from the start"}, nil
	case "reactive":
		return Policy{Name: name, Modes: []core.BillingMode{core.OnDemand},
			Engine: engine.Config{Fleet: fleet.Config{WaitTarget: zeroWait(), IgnoreBoundary: true, MinIdle: 10 * time.Minute, NoConsolidation: true}},
			Doc:    "cluster-autoscaler style: on-demand only, scale up on pending work, scale down after 10 idle minutes"}, nil
	case "autostop":
		return Policy{Name: name, Modes: []core.BillingMode{core.OnDemand},
			Engine: engine.Config{Fleet: fleet.Config{WaitTarget: zeroWait(), IgnoreBoundary: true, MinIdle: 10 * time.Minute, NoPacking: true, NoConsolidation: true}},
			Doc:    "autostop style: one on-demand machine rented per waiting job, released 10 minutes after it goes idle (an idle machine may be reused meanwhile)"}, nil
	}
	return Policy{}, &core.FieldError{Field: "policy", Value: name, Allowed: "one of " + strings.Join(PolicyNames, ", ")}
}

func zeroWait() map[core.Tier]time.Duration {
	return map[core.Tier]time.Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}
}

// restrict keeps only the plans of the allowed modes, and offers that
// still have one.
func restrict(offers []core.Offer, modes []core.BillingMode) []core.Offer {
	if modes == nil {
		return offers
	}
	var out []core.Offer
	for _, o := range offers {
		var plans []core.PricePlan
		for _, p := range o.Plans {
			for _, m := range modes {
				if p.Mode == m {
					plans = append(plans, p)
				}
			}
		}
		if len(plans) > 0 {
			o.Plans = plans
			out = append(out, o)
		}
	}
	return out
}

// peakFleet sizes static-peak: per GPU model the jobs may use, the peak
// of concurrent GPU demand, in machines of the offer with the cheapest
// committed price per GPU.
func peakFleet(w *Workload, offers []core.Offer, start time.Time) (map[string]int, error) {
	type edge struct {
		at    time.Time
		milli int64
	}
	// Each job goes to the model of the cheapest offer it may use.
	perModel := map[string][]edge{}
	best := map[string]*core.Offer{}
	for i := range offers {
		o := &offers[i]
		p, ok := o.Plan(core.Monthly)
		if !ok {
			continue
		}
		b, _ := billing.Cost(p, billing.Span{Start: start, End: start})
		if cur := best[o.GPUModel]; cur == nil || perGPU(b.Amount, o) < perGPUOf(cur, start) {
			best[o.GPUModel] = o
		}
	}
	for _, j := range w.Jobs {
		model := ""
		var bestPrice core.Micros
		for m, o := range best {
			if !j.Request.Admits(o.Hardware()) || o.GPUs < min(j.Request.GPUs, o.GPUs) {
				continue
			}
			if pr := perGPUOf(o, start); model == "" || pr < bestPrice || pr == bestPrice && m < model {
				model, bestPrice = m, pr
			}
		}
		if model == "" {
			return nil, fmt.Errorf("job %s: no offer with a monthly plan for %v", j.ID, j.Request.Models)
		}
		milli := int64(j.Request.GPUs) * int64(j.Request.MilliPerGPU) * int64(max(j.Shards, 1))
		perModel[model] = append(perModel[model], edge{j.Submit, milli}, edge{j.Submit.Add(w.Actual[j.ID]), -milli})
	}
	out := map[string]int{}
	for model, es := range perModel {
		sort.Slice(es, func(i, k int) bool {
			if !es[i].at.Equal(es[k].at) {
				return es[i].at.Before(es[k].at)
			}
			return es[i].milli < es[k].milli
		})
		var cur, peak int64
		for _, e := range es {
			cur += e.milli
			peak = max(peak, cur)
		}
		per := int64(best[model].CapMilli())
		out[model] = int((peak + per - 1) / per)
	}
	return out, nil
}

// perGPU is m per whole GPU of a machine of o (a slice's m / its share).
func perGPU(m core.Micros, o *core.Offer) core.Micros {
	return m * core.Micros(core.WholeGPU) / core.Micros(max(o.CapMilli(), 1))
}

func perGPUOf(o *core.Offer, start time.Time) core.Micros {
	p, _ := o.Plan(core.Monthly)
	b, _ := billing.Cost(p, billing.Span{Start: start, End: start})
	return perGPU(b.Amount, o)
}
