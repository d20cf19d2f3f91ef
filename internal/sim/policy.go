package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// peakFleet sizes a peak-sized base (static-peak): per GPU model the jobs
// may use, the peak of concurrent GPU demand, in whole machines of the
// offer that covers it cheapest (fleet.ReservedFit). Each job goes to
// the model of the cheapest offer per GPU it may use among the offers
// whose machines hold the workload's largest gang whole (or, when none
// does, the largest machines there are); a job none of those admits,
// among all offers. Sizing in machines of the cheapest offer per GPU of
// any size rented the plain AWS list's peak as about a thousand 1- and
// 2-GPU machines that gangs of up to 160 GPUs had to span: a replay
// that did not end in 400 s. It returns machines and the offer per
// model.
func peakFleet(w *Workload, offers []core.Offer, mode core.BillingMode, start time.Time) (map[string]int, map[string]string, error) {
	type edge struct {
		at    time.Time
		milli int64
	}
	// The offers with a committed plan on mode, cheapest per GPU first
	// (then the model's name, then more GPUs per machine).
	type priced struct {
		o   *core.Offer
		per core.Micros
	}
	var cands []priced
	for i := range offers {
		o := &offers[i]
		if p, ok := o.Plan(mode); ok && p.Committed() {
			cands = append(cands, priced{o, perGPUOf(o, mode, start)})
		}
	}
	sort.SliceStable(cands, func(i, k int) bool {
		a, b := cands[i], cands[k]
		if a.per != b.per {
			return a.per < b.per
		}
		if a.o.GPUModel != b.o.GPUModel {
			return a.o.GPUModel < b.o.GPUModel
		}
		return a.o.GPUs > b.o.GPUs
	})
	largest := 0
	for _, j := range w.Jobs {
		largest = max(largest, j.Request.GPUs)
	}
	perModel := map[string][]edge{}
	for _, j := range w.Jobs {
		most := 0
		for _, c := range cands {
			if c.o.GPUs > most && j.Request.Admits(c.o.Hardware()) {
				most = c.o.GPUs
			}
		}
		model := ""
		for _, c := range cands {
			if c.o.GPUs >= min(largest, most) && j.Request.Admits(c.o.Hardware()) {
				model = c.o.GPUModel
				break
			}
		}
		if model == "" {
			return nil, nil, fmt.Errorf("job %s: no offer with a %s plan for %v", j.ID, mode, j.Request.Models)
		}
		milli := int64(j.Request.GPUs) * int64(j.Request.MilliPerGPU) * int64(max(j.Shards, 1))
		perModel[model] = append(perModel[model], edge{j.Submit, milli}, edge{j.Submit.Add(w.Actual[j.ID]), -milli})
	}
	out, ids := map[string]int{}, map[string]string{}
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
		gpus := (peak + int64(core.WholeGPU) - 1) / int64(core.WholeGPU)
		o, n := fleet.ReservedFit(start, model, mode, int(min(gpus, math.MaxInt32)), largest, offers)
		if o == nil { // cannot happen: the model's jobs came from such an offer
			return nil, nil, fmt.Errorf("GPU model %s: no offer with a %s plan", model, mode)
		}
		out[model], ids[model] = n, o.ID
	}
	return out, ids, nil
}

// perGPU is m per whole GPU of a machine of o (a slice's m / its share).
func perGPU(m core.Micros, o *core.Offer) core.Micros {
	return m * core.Micros(core.WholeGPU) / core.Micros(max(o.CapMilli(), 1))
}

// perGPUOf is a whole term of o's plan on mode per whole GPU.
func perGPUOf(o *core.Offer, mode core.BillingMode, start time.Time) core.Micros {
	p, _ := o.Plan(mode)
	b, _ := fleet.TermBill(start, p)
	return perGPU(b, o)
}
