package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Capacity is the most machines of an offer a provider may hold at once;
// 0 means no known limit.
type Capacity func(offerID string) int

// Feasible reports whether some offer could ever run j, by the rules the
// fleet rents by (admissible, and a whole-GPU gang spans machines of one
// offer only when no admissible offer holds it whole): nil if one could,
// else a *core.FieldError naming the request field that makes it
// impossible (models or throughput, gpu_mem_mib, interruptible, gpus) and
// what the catalog allows. capacity (nil: no limit) bounds how many
// machines of an offer a gang may span. A job Feasible refuses would wait
// forever: no acquisition is ever made for it.
func Feasible(j *core.Job, offers []core.Offer, capacity Capacity) error {
	d := Demand{Unit: sched.Unit{Job: j}}
	r := &j.Request
	var cand []*core.Offer
	for i := range offers {
		o := &offers[i]
		if slices.ContainsFunc(o.Plans, func(p core.PricePlan) bool { return admissible(o, p.Mode, d) }) {
			cand = append(cand, o)
		}
	}
	if len(cand) == 0 {
		return why(j, offers)
	}
	largest := 0
	for _, o := range cand {
		largest = max(largest, o.GPUs)
	}
	if r.GPUs <= largest {
		return nil
	}
	if r.MilliPerGPU < core.WholeGPU {
		return &core.FieldError{Field: "gpus", Value: fmt.Sprint(r.GPUs), Allowed: fmt.Sprintf("at most %d for a shared GPU (the largest admissible machine)", largest)}
	}
	// A gang larger than every admissible machine is rented as machines
	// of one of the largest offers (bestOption).
	most := 0
	for _, o := range cand {
		if o.GPUs < largest {
			continue
		}
		n := 0
		if capacity != nil {
			n = capacity(o.ID)
		}
		if n <= 0 {
			return nil // no known limit
		}
		most = max(most, n*o.GPUs)
	}
	if r.GPUs > most {
		return &core.FieldError{Field: "gpus", Value: fmt.Sprint(r.GPUs), Allowed: fmt.Sprintf("at most %d (the most GPUs of one admissible offer the provider may hold at once)", most)}
	}
	return nil
}

// why says which field leaves j no admissible offer among offers.
func why(j *core.Job, offers []core.Offer) error {
	r := &j.Request
	var models []string // the offers' models, sorted, once each
	var byModel []*core.Offer
	for i := range offers {
		o := &offers[i]
		if !slices.Contains(models, o.GPUModel) {
			models = append(models, o.GPUModel)
		}
		if (len(r.Models) == 0 || slices.Contains(r.Models, o.GPUModel)) && (len(r.Throughput) == 0 || r.Throughput[o.GPUModel] > 0) {
			byModel = append(byModel, o)
		}
	}
	slices.Sort(models)
	allowed := "GPU models the catalog offers: " + strings.Join(models, ", ")
	if len(offers) == 0 {
		allowed = "an offer in the catalog (it has none)"
	}
	if len(byModel) == 0 {
		if len(r.Models) == 0 {
			return &core.FieldError{Field: "throughput", Value: strings.Join(sortedKeys(r.Throughput), ","), Allowed: allowed}
		}
		return &core.FieldError{Field: "models", Value: strings.Join(r.Models, ","), Allowed: allowed}
	}
	var mem int64
	for _, o := range byModel {
		if o.GPUMemMiB <= 0 {
			mem = -1 // unknown memory: admissible for any request
			break
		}
		mem = max(mem, o.GPUMemMiB)
	}
	if mem >= 0 && r.MemPerGPUMiB > mem {
		return &core.FieldError{Field: "gpu_mem_mib", Value: fmt.Sprint(r.MemPerGPUMiB), Allowed: fmt.Sprintf("at most %d MiB per GPU (the largest GPU memory of the offers this job allows)", mem)}
	}
	return &core.FieldError{Field: "interruptible", Value: fmt.Sprint(j.Interruptible), Allowed: "true: the offers this job allows are spot only"}
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
