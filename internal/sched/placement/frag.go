package placement

import (
	"math"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Fragmentation, as the FGD paper defines it: a node's free GPU share is a
// fragment for a pod type when the pod type cannot use it. For each type t
// of the target workload, with popularity p_t:
//
//   - a type that asks for no GPU, or may not run on the node's model,
//     cannot use any of the free share: all of it is a fragment;
//   - a type the node can host (enough GPUs with enough free share each,
//     and the CPU) can use the GPUs with at least its share free: the
//     GPUs with less are a fragment;
//   - a type the node cannot host cannot use any of it.
//
// The node's fragmentation is Σ_t p_t × fragment_t. Here the popularities
// are the types' counts, so the value is an integer: milli-GPUs × count.
// Divide by the workload's total count for milli-GPUs.

// fragIndex is a workload compiled for fast evaluation: for each GPU
// model, the GPU-using types the model can host, grouped by (share,
// GPUs) with their counts cumulated by CPU.
type fragIndex struct {
	w     Workload
	total int64
	// gpuCPU and gpuMilli sum the CPU and GPU share of the GPU types,
	// weighted by count: the workload's CPU per GPU share.
	gpuCPU, gpuMilli int64
	byModel          map[string]*modelGroups
}

// modelGroups are the groups of GPU types one GPU model can host, by
// ascending share.
type modelGroups struct {
	groups []fragGroup
}

// fragGroup is the types that ask for gpus GPUs of milli share each: a
// node with cnt GPUs having at least milli free, cnt >= gpus, and c
// milli-CPU free can host those with CPU <= c, whose counts sum to cum[j]
// for the largest j with cpus[j] <= c.
type fragGroup struct {
	milli int64
	gpus  int
	cpus  []int64
	cum   []int64
}

func newFragIndex(w Workload) *fragIndex {
	x := &fragIndex{w: w, total: w.Total(), byModel: map[string]*modelGroups{}}
	for _, t := range w.Types {
		if t.GPUs > 0 && t.MilliPerGPU > 0 {
			x.gpuCPU += t.Count * t.CPUMilli
			x.gpuMilli += t.Count * int64(t.GPUs) * int64(t.MilliPerGPU)
		}
	}
	return x
}

// accessible reports whether a type allowing models may run on model (the
// simulator's IsNodeAccessibleToPodByType).
func accessible(models []string, model string) bool {
	if len(models) == 0 {
		return true
	}
	if model == "" {
		return false
	}
	return slices.Contains(models, model)
}

// groups returns (building once) the groups for GPU model.
func (x *fragIndex) groups(model string) *modelGroups {
	if mg, ok := x.byModel[model]; ok {
		return mg
	}
	type gk struct {
		milli int64
		gpus  int
	}
	type cc struct{ cpu, count int64 }
	by := map[gk][]cc{}
	var keys []gk
	for _, t := range x.w.Types {
		if t.GPUs <= 0 || t.MilliPerGPU <= 0 || !accessible(t.Models, model) {
			continue
		}
		k := gk{milli: int64(t.MilliPerGPU), gpus: t.GPUs}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], cc{t.CPUMilli, t.Count})
	}
	slices.SortFunc(keys, func(a, b gk) int {
		if a.milli != b.milli {
			return int(a.milli - b.milli)
		}
		return a.gpus - b.gpus
	})
	mg := &modelGroups{}
	for _, k := range keys {
		list := by[k]
		slices.SortFunc(list, func(a, b cc) int {
			switch {
			case a.cpu < b.cpu:
				return -1
			case a.cpu > b.cpu:
				return 1
			}
			return 0
		})
		g := fragGroup{milli: k.milli, gpus: k.gpus}
		var run int64
		for _, e := range list {
			run += e.count
			if n := len(g.cpus); n > 0 && g.cpus[n-1] == e.cpu {
				g.cum[n-1] = run
				continue
			}
			g.cpus = append(g.cpus, e.cpu)
			g.cum = append(g.cum, run)
		}
		mg.groups = append(mg.groups, g)
	}
	x.byModel[model] = mg
	return mg
}

// frag is the fragmentation (milli × count) of a node of the groups' model
// with the given free shares, sorted ascending, and cpu milli-CPU free.
func (x *fragIndex) frag(mg *modelGroups, sorted []int64, cpu int64) int64 {
	var total int64
	for _, v := range sorted {
		total += v
	}
	f := x.total * total
	if total == 0 {
		return f
	}
	p, below := 0, int64(0)
	for gi := range mg.groups {
		g := &mg.groups[gi]
		for p < len(sorted) && sorted[p] < g.milli {
			below += sorted[p]
			p++
		}
		if len(sorted)-p < g.gpus {
			continue
		}
		// Types of the group with CPU <= cpu can use the GPUs with at
		// least milli free.
		lo, hi := 0, len(g.cpus)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if g.cpus[m] <= cpu {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo > 0 {
			f -= g.cum[lo-1] * (total - below)
		}
	}
	return f
}

// FragMeter measures nodes' fragmentation against one workload. It keeps a
// scratch buffer: use one per goroutine.
type FragMeter struct {
	x      *fragIndex
	sorted []int64
}

// NewFragMeter returns a FragMeter for workload w.
func NewFragMeter(w Workload) *FragMeter { return &FragMeter{x: newFragIndex(w)} }

// Frag is the fragmentation of node n in milli-GPUs: how much of its free
// GPU share the workload's pod types, weighted by popularity, could not
// use. It is 0 for an empty workload.
func (m *FragMeter) Frag(n *core.Node) float64 {
	if m.x.total == 0 {
		return 0
	}
	return float64(m.Score(n)) / float64(m.x.total)
}

// Score is Frag before the division by the workload's total count: an
// integer, milli-GPUs × count, for decisions (the live scheduler ranks by
// its growth). It is 0 for an empty workload.
func (m *FragMeter) Score(n *core.Node) int64 {
	if m.x.total == 0 {
		return 0
	}
	m.sorted = m.sorted[:0]
	for i := range n.GPUs {
		m.sorted = append(m.sorted, int64(n.GPUs[i].FreeMilli))
	}
	slices.Sort(m.sorted)
	return m.x.frag(m.x.groups(n.GPUModel), m.sorted, cpuLeft(n, 0))
}

// cpuLeft is the CPU n would have free after taking req milli-CPU; a
// node that does not track CPU has unlimited.
func cpuLeft(n *core.Node, req int64) int64 {
	if n.CPUMilli == 0 {
		return math.MaxInt64
	}
	return n.FreeCPUMilli - req
}

// withChange writes into dst the ascending shares of src (ascending) with
// one GPU's share changed from old to new.
func withChange(dst, src []int64, old, new int64) []int64 {
	dst = dst[:0]
	removed, inserted := false, false
	for _, v := range src {
		if !removed && v == old {
			removed = true
			continue
		}
		if !inserted && new <= v {
			dst = append(dst, new)
			inserted = true
		}
		dst = append(dst, v)
	}
	if !inserted {
		dst = append(dst, new)
	}
	return dst
}

// stranded is the free GPU share (milli) that a node with cpu milli-CPU
// and gpu milli-GPU free cannot feed at the workload's CPU per GPU share;
// 0 for a workload without GPU types.
func (x *fragIndex) stranded(cpu, gpu int64) int64 {
	if x.gpuCPU == 0 {
		return 0
	}
	cpu = max(cpu, 0)
	if cpu > math.MaxInt64/max(x.gpuMilli, 1) {
		return 0
	}
	return max(0, gpu-cpu*x.gpuMilli/x.gpuCPU)
}
