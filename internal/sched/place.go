package sched

import (
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched/placement"
)

// Scorer is a placement policy's ranking of one candidate: the unit's
// request r on GPUs gpus of node n. Higher is better. Ties go to the
// lower node index.
type Scorer interface {
	Score(p *Placer, node int, gpus []int, r *core.Request) int64
}

// Placer finds where units go on the current capacity. It holds the
// working copy of the nodes and the index over them; apply and remove are
// the only ways to change them.
type Placer struct {
	nodes []core.Node
	ix    *index
	cost  []core.Micros
	paid  []time.Time
	// end is when the unit being placed is expected to end (zero: not
	// known); see horizon.
	end time.Time
	mix []reqType
	// frag scores fragmentation against mix; built on first use.
	frag   *placement.FragMeter
	scorer Scorer
	// candidates per placement to score.
	k int

	modelBuf []int
	cands    []cand
}

type cand struct {
	node int
	gpus []int
	// key is compared lexicographically; lower is better.
	key [5]int64
}

// reqType is one kind of request in the workload mix, with its weight
// (how many pending units ask for it), for fragmentation scoring.
type reqType struct {
	gpus   int
	milli  core.Milli
	weight int64
}

// NewPlacer returns a placer over a copy of nodes. cost is the marginal
// price of a GPU-hour per node; mix the pending units whose request
// shapes define fragmentation; scorer nil means the default policy.
func NewPlacer(nodes []core.Node, cost []core.Micros, mix []Unit, scorer Scorer) *Placer {
	own := make([]core.Node, len(nodes))
	for i := range nodes {
		own[i] = nodes[i]
		own[i].GPUs = append([]core.GPU(nil), nodes[i].GPUs...)
	}
	return &Placer{nodes: own, ix: newIndex(own), cost: cost, mix: workloadMix(mix), scorer: scorer, k: 8}
}

// Nodes returns the placer's view of the nodes, with every placement so
// far applied.
func (p *Placer) Nodes() []core.Node { return p.nodes }

// workloadMix summarises the request shapes of units, at most 16, most
// common first.
func workloadMix(units []Unit) []reqType {
	return workloadMixInto(nil, map[[2]int64]int64{}, units)
}

// sortMix appends the tallied request shapes to mix, at most 16, most
// common first.
func sortMix(mix []reqType, counts map[[2]int64]int64) []reqType {
	for k, c := range counts {
		mix = append(mix, reqType{gpus: int(k[0]), milli: core.Milli(k[1]), weight: c})
	}
	sort.Slice(mix, func(i, j int) bool {
		if mix[i].weight != mix[j].weight {
			return mix[i].weight > mix[j].weight
		}
		if mix[i].gpus != mix[j].gpus {
			return mix[i].gpus < mix[j].gpus
		}
		return mix[i].milli < mix[j].milli
	})
	if len(mix) > 16 {
		mix = mix[:16]
	}
	return mix
}

// fragmentation is the FGD measure of node n (placement.FragMeter, the
// one fragmentation score, which sim openb measures too) against the
// pending mix: the free GPU capacity, in milli-GPUs weighted by each
// request shape's count, that the shape could not use. The mix's shapes
// ask for no host CPU and may run on any model, so only GPU shares count.
func (p *Placer) fragmentation(n *core.Node) int64 {
	if p.frag == nil {
		p.frag = fragMeter(p.mix)
	}
	return p.frag.Score(n)
}

// fragMeter is the FGD meter of mix: its shapes as pod types weighted by
// their counts.
func fragMeter(mix []reqType) *placement.FragMeter {
	types := make([]placement.PodType, len(mix))
	for i, t := range mix {
		types[i] = placement.PodType{GPUs: t.gpus, MilliPerGPU: t.milli, Count: t.weight}
	}
	return placement.NewFragMeter(placement.Workload{Types: types})
}

// find returns the best single-node placement of r, or ok false.
func (p *Placer) find(r *core.Request, allowed func(node int) bool) (node int, gpus []int, ok bool) {
	p.cands = p.cands[:0]
	models := p.ix.allowedModels(r, p.modelBuf)
	p.modelBuf = models
	if r.MilliPerGPU < core.WholeGPU && r.GPUs == 1 {
		// Partly used shared GPUs, tightest first.
		for v := int(r.MilliPerGPU); v < int(core.WholeGPU) && len(p.cands) < p.k; v++ {
			for _, m := range models {
				if p.ix.partial[m] == nil {
					continue // no partly used GPU of this model
				}
				for _, ref := range p.ix.partial[m][v] {
					n, g := p.ix.unref(ref)
					if p.viable(n, r, allowed) && gpuFits(&p.nodes[n], g, r) && hostFits(&p.nodes[n], r, 1) {
						p.cands = append(p.cands, cand{node: n, gpus: []int{g}})
						if len(p.cands) >= p.k {
							break
						}
					}
				}
			}
		}
	}
	// Nodes with enough empty GPUs, fewest empty first (packing).
	limit := len(p.cands) + p.k
	for c := max(r.GPUs, 1); c <= p.ix.maxGPUs && len(p.cands) < limit; c++ {
		for _, m := range models {
			for _, ni := range p.ix.whole[m][c] {
				n := int(ni)
				if !p.viable(n, r, allowed) || !hostFits(&p.nodes[n], r, r.GPUs) {
					continue
				}
				gs := p.pickWhole(n, r)
				if gs == nil {
					continue
				}
				p.cands = append(p.cands, cand{node: n, gpus: gs})
				if len(p.cands) >= limit {
					break
				}
			}
		}
	}
	if len(p.cands) == 0 {
		return 0, nil, false
	}
	best := -1
	for i := range p.cands {
		c := &p.cands[i]
		c.key = p.rank(c.node, c.gpus, r)
		if best < 0 || less(c, &p.cands[best]) {
			best = i
		}
	}
	return p.cands[best].node, p.cands[best].gpus, true
}

func less(a, b *cand) bool {
	for i := range a.key {
		if a.key[i] != b.key[i] {
			return a.key[i] < b.key[i]
		}
	}
	return a.node < b.node
}

// viable applies the per-node filters that the index does not encode:
// whether r may run on the node's hardware at all (core's one rule), and
// the caller's.
func (p *Placer) viable(n int, r *core.Request, allowed func(int) bool) bool {
	if !r.Admits(p.nodes[n].Hardware()) {
		return false
	}
	return allowed == nil || allowed(n)
}

// pickWhole returns r.GPUs GPUs of node n for r: empty GPUs for whole-GPU
// work, or for a single share the empty GPU (shares on partly used GPUs
// come from the partial buckets).
func (p *Placer) pickWhole(n int, r *core.Request) []int {
	node := &p.nodes[n]
	gs := make([]int, 0, r.GPUs)
	for g := range node.GPUs {
		if node.GPUs[g].FreeMilli == core.WholeGPU && !node.GPUs[g].Shared && gpuFits(node, g, r) {
			gs = append(gs, g)
			if len(gs) == r.GPUs {
				return gs
			}
		}
	}
	return nil
}

// rank is the default policy's key, lower better: the price of the work
// (marginal cost per GPU-hour, per unit of work when the job gives a
// throughput table), then whether it would break an empty node (whole),
// then the fit to time already paid (horizon), then the growth of
// fragmentation (FGD), then the empty GPUs left (packing).
// Fit comes before fragmentation: on Helios and the synthetic traces it
// saved more than the other order (docs/simulator.md).
func (p *Placer) rank(n int, gpus []int, r *core.Request) [5]int64 {
	if p.scorer != nil {
		return [5]int64{-p.scorer.Score(p, n, gpus, r), 0, 0, 0, 0}
	}
	node := &p.nodes[n]
	var cost int64
	if n < len(p.cost) {
		cost = int64(p.cost[n])
	}
	if tp := r.Throughput[node.GPUModel]; tp > 0 {
		cost = core.MulDivHalfEven(cost, 1_000_000, tp)
	} else if len(r.Throughput) > 0 {
		cost = 1 << 60 // a model the job has no figure for: last resort
	}
	before := p.fragmentation(node)
	breaks := whole(node, r)
	u := Unit{Job: &core.Job{Request: *r}}
	part := Part{Node: n, GPUs: gpus}
	apply(p.nodes, &u, part, 1)
	after := p.fragmentation(node)
	left := freeWhole(node)
	apply(p.nodes, &u, part, -1)
	return [5]int64{cost, breaks, p.horizon(n), after - before, int64(left)}
}

// whole is 1 when r, smaller than node, would go on it while it is
// empty, else 0 (asked before r is placed): a unit that leaves GPUs over
// goes on an empty node only when no node already in use at the same
// price takes it, whatever its fit to the nodes' paid time. An empty node is the
// only place a job asking a whole machine starts at once, and the only
// one a boundary can release; a small unit on it blocks the one and
// defers the other.
func whole(node *core.Node, r *core.Request) int64 {
	if r.GPUs < len(node.GPUs) && freeWhole(node) == len(node.GPUs) {
		return 1
	}
	return 0
}

// horizon ranks a committed node by how well the unit fits the time
// already paid on it, lower better: the paid time left after the unit
// ends when it ends in time (the tightest fit leaves the machines paid
// longest for longer work), else past every fit by the renewals it makes
// the node pay (Node.Renewal), then by the renewed time it leaves unused
// — the same tightest fit, on the time it buys. Without a renewal term,
// by how far it runs over. Zero when either end is unknown.
func (p *Placer) horizon(n int) int64 {
	if p.end.IsZero() || n >= len(p.paid) || p.paid[n].IsZero() {
		return 0
	}
	if !p.end.After(p.paid[n]) {
		return int64(p.paid[n].Sub(p.end) / time.Second)
	}
	over := p.end.Sub(p.paid[n])
	if r := p.nodes[n].Renewal; r > 0 {
		// Renewals, then unused seconds (under 2^32 for any term).
		k := (over + r - 1) / r
		return 1<<40 + int64(k)<<32 + int64((time.Duration(k)*r-over)/time.Second)
	}
	return 1<<40 + int64(over/time.Second)
}

// place applies a placement of u to the working nodes and the index.
func (p *Placer) place(u *Unit, parts []Part) {
	for _, part := range parts {
		apply(p.nodes, u, part, 1)
		p.ix.update(part.Node)
	}
}

// remove gives a unit's parts back.
func (p *Placer) remove(u *Unit, parts []Part) {
	for _, part := range parts {
		apply(p.nodes, u, part, -1)
		p.ix.update(part.Node)
	}
}

// findGang places a whole-GPU gang larger than any single allowed node
// across nodes, fewest nodes first (largest free counts first), all or
// nothing.
func (p *Placer) findGang(r *core.Request, allowed func(int) bool) ([]Part, bool) {
	type gangCand struct {
		node, free int
		cost, fit  int64
	}
	var cands []gangCand
	models := p.ix.allowedModels(r, p.modelBuf)
	for c := p.ix.maxGPUs; c >= 1; c-- {
		for _, m := range models {
			for _, ni := range p.ix.whole[m][c] {
				n := int(ni)
				if !p.viable(n, r, allowed) || !hostFits(&p.nodes[n], r, min(c, r.GPUs)) {
					continue
				}
				var cost int64
				if n < len(p.cost) {
					cost = int64(p.cost[n])
				}
				cands = append(cands, gangCand{node: n, free: c, cost: cost, fit: p.horizon(n)})
			}
		}
	}
	// Cheapest GPUs first, then the fewest nodes (most free first), then
	// the best fit to paid time.
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := &cands[i], &cands[j]
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		if a.free != b.free {
			return a.free > b.free
		}
		return a.fit < b.fit
	})
	need := r.GPUs
	var parts []Part
	for _, c := range cands {
		if need == 0 {
			break
		}
		take := min(c.free, need)
		gs := make([]int, 0, take)
		node := &p.nodes[c.node]
		for g := range node.GPUs {
			if len(gs) < take && node.GPUs[g].FreeMilli == core.WholeGPU && !node.GPUs[g].Shared {
				gs = append(gs, g)
			}
		}
		parts = append(parts, Part{Node: c.node, GPUs: gs})
		need -= take
	}
	if need > 0 {
		return nil, false
	}
	return parts, true
}

// fitOn returns GPUs of node n that can take r now, or nil: for a share
// the tightest GPU that fits, for whole-GPU work the first empty ones.
func (p *Placer) fitOn(n int, r *core.Request) []int {
	node := &p.nodes[n]
	if !r.Admits(node.Hardware()) || !hostFits(node, r, r.GPUs) {
		return nil
	}
	if r.MilliPerGPU < core.WholeGPU && r.GPUs == 1 {
		best := -1
		for g := range node.GPUs {
			if gpuFits(node, g, r) && (best < 0 || node.GPUs[g].FreeMilli < node.GPUs[best].FreeMilli) {
				best = g
			}
		}
		if best < 0 {
			return nil
		}
		return []int{best}
	}
	return p.pickWhole(n, r)
}

// maxNodeGPUs returns the most GPUs any node r may run on has.
func (p *Placer) maxNodeGPUs(r *core.Request) int { return p.ix.shapes.Largest(r) }
