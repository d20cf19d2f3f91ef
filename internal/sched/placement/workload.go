package placement

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PodType is one kind of request in a target workload.
type PodType struct {
	// CPUMilli is the host CPU it asks for.
	CPUMilli int64
	// GPUs and MilliPerGPU are its GPU request; MilliPerGPU is 0 when GPUs
	// is 0.
	GPUs        int
	MilliPerGPU core.Milli
	// Models are the GPU models it may run on; nil means any.
	Models []string
	// Count is how many requests of the workload are of this type: its
	// popularity.
	Count int64
}

// Workload is the target workload fragmentation is measured against: pod
// types and their popularity. The zero Workload is empty: nothing is a
// fragment.
type Workload struct {
	Types []PodType
}

// Total is the sum of the types' counts.
func (w Workload) Total() int64 {
	var s int64
	for _, t := range w.Types {
		s += t.Count
	}
	return s
}

// DefaultPopularity is the share of requests, in percent, the typical
// pod types must cover: the FGD artifact's podPopularityThreshold.
const DefaultPopularity = 95

// TypicalWorkload is the target workload the FGD simulator derives from a
// trace: requests are grouped into types by (CPU, GPUs, share per GPU,
// allowed models) — host memory is not part of a type — and the most
// popular types are kept, most popular first, until they cover at least
// popularity percent of the requests. Ties in popularity are ordered by
// larger CPU, share, GPU count and model list first, as the simulator
// does. A popularity of 0 or less means DefaultPopularity; 100 or more
// keeps every type.
func TypicalWorkload(reqs []core.Request, popularity int) Workload {
	if popularity <= 0 {
		popularity = DefaultPopularity
	}
	type key struct {
		cpu    int64
		gpus   int
		milli  core.Milli
		models string
	}
	idx := map[key]int{}
	var types []PodType
	var keys []key
	for i := range reqs {
		r := &reqs[i]
		k := key{cpu: r.CPUMilli, gpus: r.GPUs, milli: r.MilliPerGPU, models: strings.Join(r.Models, "|")}
		if r.GPUs == 0 {
			k.milli, k.models = 0, ""
		}
		j, ok := idx[k]
		if !ok {
			j = len(types)
			idx[k] = j
			t := PodType{CPUMilli: k.cpu, GPUs: k.gpus, MilliPerGPU: k.milli}
			if k.models != "" {
				t.Models = strings.Split(k.models, "|")
			}
			types = append(types, t)
			keys = append(keys, k)
		}
		types[j].Count++
	}
	order := make([]int, len(types))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ka, kb := keys[a], keys[b]
		return cmp.Or(
			cmp.Compare(types[b].Count, types[a].Count),
			cmp.Compare(kb.cpu, ka.cpu),
			cmp.Compare(kb.milli, ka.milli),
			cmp.Compare(kb.gpus, ka.gpus),
			cmp.Compare(kb.models, ka.models),
		)
	})
	total := int64(len(reqs))
	var w Workload
	var cum int64
	for _, j := range order {
		if popularity < 100 && 100*cum >= int64(popularity)*total {
			break
		}
		w.Types = append(w.Types, types[j])
		cum += types[j].Count
	}
	return w
}
