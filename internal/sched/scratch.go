package sched

import (
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched/placement"
)

// Scratch is working space Schedule and Consolidate reuse from one call to
// the next instead of allocating it afresh: the copy of the nodes, the
// placement index and the per-pass tables. A caller that schedules the
// same fleet over and over — the engine, at every step of a replay —
// keeps one in State.Scratch; the zero value is ready to use. Nothing a
// call returns points into it. It serves one call at a time.
type Scratch struct {
	schedule, consolidate placerScratch
	onNode                [][]int
	gone                  []bool
	sorted                []bool
	lost                  []int64
	nodeVer               []int
	// runCosts keeps the deferral's prices of running from each hour.
	runCosts runCosts
	// maps are a pass's tables, emptied for each pass; modelSums and
	// modelSeen teamAlloc's working space.
	maps      passMaps
	modelSums []int64
	modelSeen []bool
}

// passMaps are the maps a scheduling pass keeps its tables in.
type passMaps struct {
	caps        map[Class]int64
	alloc       map[string]map[Class]int64
	spent       map[string]core.Micros
	teams       map[string]*core.Team
	preemptFail map[shapeKey]bool
	deferCache  map[time.Duration]deferAnswer
}

// placerScratch is one placer's reusable storage.
type placerScratch struct {
	pl    Placer
	ix    index
	nodes []core.Node
	gpus  []core.GPU
	// counts is workloadMix's tally.
	counts map[[2]int64]int64
	// frag is the fragmentation meter of the mix fragMix, kept while the
	// next call's mix is the same (a replay's steps mostly are).
	frag    *placement.FragMeter
	fragMix []reqType
	// whole and partial keep the index's bucket arrays by model id, so
	// that a model seen in an earlier call gets its buckets back emptied
	// rather than allocated.
	whole, partial [][][]int32
}

// newPlacer is NewPlacer building in ps when it is not nil.
func newPlacer(ps *placerScratch, nodes []core.Node, cost []core.Micros, mix []Unit, scorer Scorer) *Placer {
	if ps == nil {
		return NewPlacer(nodes, cost, mix, scorer)
	}
	own := ps.nodes[:0]
	total := 0
	for i := range nodes {
		total += len(nodes[i].GPUs)
	}
	// One backing array for every node's GPUs; each node's slice has its
	// capacity capped, as a slice of its own would.
	gpus := ps.gpus[:0]
	if cap(gpus) < total {
		gpus = make([]core.GPU, 0, total)
	}
	for i := range nodes {
		n := nodes[i]
		first := len(gpus)
		gpus = append(gpus, nodes[i].GPUs...)
		n.GPUs = gpus[first:len(gpus):len(gpus)]
		own = append(own, n)
	}
	ps.nodes, ps.gpus = own, gpus
	if ps.counts == nil {
		ps.counts = map[[2]int64]int64{}
	}
	clear(ps.counts)
	ix := &ps.ix
	ix.reset(own, ps)
	ps.pl = Placer{nodes: own, ix: ix, cost: cost, mix: workloadMixInto(ps.pl.mix[:0], ps.counts, mix), scorer: scorer, k: 8,
		modelBuf: ps.pl.modelBuf[:0], cands: ps.pl.cands[:0]}
	if ps.frag == nil || !slices.Equal(ps.pl.mix, ps.fragMix) {
		ps.frag, ps.fragMix = fragMeter(ps.pl.mix), append(ps.fragMix[:0], ps.pl.mix...)
	}
	ps.pl.frag = ps.frag
	return &ps.pl
}

// reset makes ix the index newIndex(nodes) would return, reusing its
// storage and the bucket arrays kept in ps.
func (ix *index) reset(nodes []core.Node, ps *placerScratch) {
	// Keep the bucket arrays of the last call before forgetting them.
	for m := range ix.whole {
		if m < len(ps.whole) {
			ps.whole[m] = ix.whole[m]
		} else {
			ps.whole = append(ps.whole, ix.whole[m])
		}
		if ix.partial[m] != nil {
			for len(ps.partial) <= m {
				ps.partial = append(ps.partial, nil)
			}
			ps.partial[m] = ix.partial[m]
		}
	}
	if ix.models == nil {
		ix.models = map[string]int{}
	}
	clear(ix.models)
	*ix = index{nodes: nodes, models: ix.models, whole: ix.whole[:0], partial: ix.partial[:0], nodeC: resize(ix.nodeC, len(nodes)), nodePos: resize(ix.nodePos, len(nodes)),
		nodeModel: resize(ix.nodeModel, len(nodes)),
		gpuFree:   ix.gpuFree, gpuPos: ix.gpuPos, modelIDs: ix.modelIDs[:0], shapes: ix.shapes[:0], pool: ps}
	for i := range nodes {
		ix.maxGPUs = max(ix.maxGPUs, len(nodes[i].GPUs))
	}
	ix.maxGPUs = max(ix.maxGPUs, 1)
	ix.gpuFree = resize(ix.gpuFree, len(nodes)*ix.maxGPUs)
	clear(ix.gpuFree)
	ix.gpuPos = resize(ix.gpuPos, len(nodes)*ix.maxGPUs)
	ix.fill()
}

// resize returns s with length n, reusing its array when large enough;
// the contents are unspecified.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// wholeBuckets returns empty per-free-count buckets for model id m.
func (ix *index) wholeBuckets(m int) [][]int32 {
	if ix.pool == nil || m >= len(ix.pool.whole) || ix.pool.whole[m] == nil {
		return make([][]int32, ix.maxGPUs+1)
	}
	b := ix.pool.whole[m]
	ix.pool.whole[m] = nil // taken: no other model may get it
	if len(b) < ix.maxGPUs+1 {
		b = append(b, make([][]int32, ix.maxGPUs+1-len(b))...)
	}
	b = b[:ix.maxGPUs+1]
	for c := range b {
		b[c] = b[c][:0]
	}
	return b
}

// partialBuckets returns empty per-free-share buckets for model id m.
func (ix *index) partialBuckets(m int) [][]int32 {
	if ix.pool == nil || m >= len(ix.pool.partial) || ix.pool.partial[m] == nil {
		return make([][]int32, core.WholeGPU)
	}
	b := ix.pool.partial[m]
	ix.pool.partial[m] = nil
	for v := range b {
		b[v] = b[v][:0]
	}
	return b
}

// workloadMixInto is workloadMix reusing mix's array and the counts map
// (empty on entry).
func workloadMixInto(mix []reqType, counts map[[2]int64]int64, units []Unit) []reqType {
	for _, u := range units {
		r := &u.Job.Request
		counts[[2]int64{int64(r.GPUs), int64(r.MilliPerGPU)}]++
	}
	return sortMix(mix, counts)
}
