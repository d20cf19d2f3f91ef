package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
)

// peakFleet sizes a peak-sized base (static-peak): per GPU model the jobs
// may use, the peak of concurrent GPU demand, in machines of the offer
// with the cheapest price per GPU on the committed mode.
func peakFleet(w *Workload, offers []core.Offer, mode core.BillingMode, start time.Time) (map[string]int, error) {
	type edge struct {
		at    time.Time
		milli int64
	}
	// Each job goes to the model of the cheapest offer it may use.
	perModel := map[string][]edge{}
	best := map[string]*core.Offer{}
	for i := range offers {
		o := &offers[i]
		p, ok := o.Plan(mode)
		if !ok {
			continue
		}
		b, _ := billing.Cost(p, billing.Span{Start: start, End: start})
		if cur := best[o.GPUModel]; cur == nil || perGPU(b.Amount, o) < perGPUOf(cur, mode, start) {
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
			if pr := perGPUOf(o, mode, start); model == "" || pr < bestPrice || pr == bestPrice && m < model {
				model, bestPrice = m, pr
			}
		}
		if model == "" {
			return nil, fmt.Errorf("job %s: no offer with a %s plan for %v", j.ID, mode, j.Request.Models)
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

func perGPUOf(o *core.Offer, mode core.BillingMode, start time.Time) core.Micros {
	p, _ := o.Plan(mode)
	b, _ := billing.Cost(p, billing.Span{Start: start, End: start})
	return perGPU(b.Amount, o)
}
