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

// why says which field leaves j no admissible offer among offers. It
// narrows the offers in the order Request.Admits checks them
// (accelerator family, workload, model, slice share, memory; then the
// spot-only plans), so the field named is the first that rules out the
// last offer standing, with what the offers left before it allow.
func why(j *core.Job, offers []core.Offer) error {
	r := &j.Request
	left := make([]*core.Offer, 0, len(offers))
	for i := range offers {
		left = append(left, &offers[i])
	}
	if len(left) == 0 {
		return &core.FieldError{Field: "gpus", Value: fmt.Sprint(r.GPUs), Allowed: "an offer in the catalog (it has none)"}
	}
	// narrow keeps the offers keep admits; when none is left it says what
	// the offers before it had, as allowed values.
	narrow := func(keep func(o *core.Offer) bool, has func(o *core.Offer) string) (string, bool) {
		var kept []*core.Offer
		var seen []string
		for _, o := range left {
			if keep(o) {
				kept = append(kept, o)
			}
			if v := has(o); !slices.Contains(seen, v) {
				seen = append(seen, v)
			}
		}
		if len(kept) == 0 {
			slices.Sort(seen)
			return strings.Join(seen, ", "), false
		}
		left = kept
		return "", true
	}
	family := func(o *core.Offer) string { return string(o.Accelerator.Or()) }
	if len(r.Accelerators) == 0 {
		if have, ok := narrow(func(o *core.Offer) bool { return o.Accelerator.Or() == core.NVIDIA }, family); !ok {
			return &core.FieldError{Field: "accelerators", Value: string(core.NVIDIA) + " (the default)", Allowed: "the accelerator families the catalog offers: " + have}
		}
	} else if have, ok := narrow(func(o *core.Offer) bool { return slices.Contains(r.Accelerators, o.Accelerator.Or()) }, family); !ok {
		return &core.FieldError{Field: "accelerators", Value: core.FormatAccelerators(r.Accelerators), Allowed: "the accelerator families the catalog offers: " + have}
	}
	if _, ok := narrow(func(o *core.Offer) bool { return core.Runs(o.Capability, r.Workload) }, func(o *core.Offer) string { return string(o.Capability.Or()) }); !ok {
		return &core.FieldError{Field: "workload", Value: string(r.Workload.Or()), Allowed: "inference: the offers of the accelerators this job allows run inference only"}
	}
	model := func(o *core.Offer) string { return o.GPUModel }
	if have, ok := narrow(func(o *core.Offer) bool {
		return (len(r.Models) == 0 || slices.Contains(r.Models, o.GPUModel)) && (len(r.Throughput) == 0 || r.Throughput[o.GPUModel] > 0)
	}, model); !ok {
		allowed := "GPU models the catalog offers: " + have
		if len(r.Models) == 0 {
			return &core.FieldError{Field: "throughput", Value: strings.Join(sortedKeys(r.Throughput), ","), Allowed: allowed}
		}
		return &core.FieldError{Field: "models", Value: strings.Join(r.Models, ","), Allowed: allowed}
	}
	share := func(o *core.Offer) string { return fmt.Sprint(o.MilliPerGPU()) }
	if have, ok := narrow(func(o *core.Offer) bool { return o.SliceMilli == 0 || r.MilliPerGPU <= o.SliceMilli }, share); !ok {
		return &core.FieldError{Field: "gpu_milli", Value: fmt.Sprint(r.MilliPerGPU), Allowed: "at most the GPU share of a machine this job allows: " + have}
	}
	var mem int64
	for _, o := range left {
		if o.MemPerGPUMiB() <= 0 {
			mem = -1 // unknown memory: admissible for any request
			break
		}
		mem = max(mem, o.MemPerGPUMiB())
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
