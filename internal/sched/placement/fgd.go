package placement

import (
	"math"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

var (
	_ Policy = (*FGD)(nil)
	_ Policy = (*Gpufleet)(nil)
)

// FGD is Fragmentation Gradient Descent: it places a request where it
// increases the node's fragmentation (against a target Workload) the
// least. As the artifact scores it, a node gets
//
//	int64(100 × sigmoid(Δ / 1000))
//
// where Δ is the node's fragmentation before minus after, in milli-GPUs;
// the highest score wins and ties are broken at random. A share goes to
// the GPU whose score is highest, the lowest index among equals.
type FGD struct {
	fgdCore
}

// NewFGD returns FGD measuring fragmentation against w and breaking ties
// with rng.
func NewFGD(w Workload, rng Rand) *FGD {
	return &FGD{fgdCore: newFGDCore(w, rng, "fgd", maxNodeScore, maxNodeScore, false)}
}

// Gpufleet is gpufleet's default placement policy: fragmentation gradient
// descent scored exactly. Where FGD squashes each node's fragmentation
// change through a sigmoid and truncates it to one of 100 integers — so
// that nodes differing by up to a few hundredths of a GPU tie, and the
// tie is broken at random — Gpufleet compares the changes themselves (an
// integer), picks a share's GPU by the exact change with best fit among
// equals, and breaks the remaining ties in favour of the node left with
// the least free GPU share, then the least free CPU, before chance.
type Gpufleet struct {
	fgdCore
}

// NewGpufleet returns gpufleet's policy measuring fragmentation against w
// and breaking the last ties with rng.
func NewGpufleet(w Workload, rng Rand) *Gpufleet {
	v := GpufleetVariant
	g := &Gpufleet{fgdCore: newFGDCore(w, rng, "gpufleet", int64(v/10000), int64(v%10000/100), v%10 == 1)}
	g.balance = v % 100 / 10
	return g
}

// maxTypes bounds the request types whose per-node scores are kept; past
// it the cache starts over, so a long-running scheduler's memory stays
// bounded.
const maxTypes = 1024

// fgdCore is the machinery FGD and Gpufleet share: per-node state with
// its current fragmentation, recomputed only when the node changes, and
// per-(request type, node) scores, recomputed only when that node changes.
type fgdCore struct {
	name string
	// levels quantizes node scores (0: exact); gpuLevels a share's GPU
	// scores; gpuExact breaks GPU ties by the exact change, then best fit.
	levels, gpuLevels int64
	gpuExact          bool
	balance           int
	rng               Rand
	x                 *fragIndex
	nodes             []nodeState
	types             map[reqKey]int
	cache             [][]entry
	buf               gpuBuf
	a, b              []int64
}

// nodeState is what a score depends on, as last seen, and the node's
// fragmentation then. ver changes whenever any of it does.
type nodeState struct {
	ver      uint32
	model    string
	cpuCap   int64
	cpuFree  int64
	gpuMem   int64
	free     []core.Milli
	freeMem  []int64
	shared   []bool
	sorted   []int64
	frag     int64
	groups   *modelGroups
	occupied bool
}

// reqKey is what of a request a score depends on.
type reqKey struct {
	cpu   int64
	gpus  int
	milli core.Milli
	gmem  int64
}

// entry is a cached score of a request type on a node at version ver, with
// the GPU chosen for a share.
type entry struct {
	ver   uint32
	gpu   int32
	score int64
}

func newFGDCore(w Workload, rng Rand, name string, levels, gpuLevels int64, gpuExact bool) fgdCore {
	return fgdCore{name: name, levels: levels, gpuLevels: gpuLevels, gpuExact: gpuExact, rng: rng, x: newFragIndex(w), types: map[reqKey]int{}}
}

// Name returns "fgd" or "gpufleet".
func (c *fgdCore) Name() string { return c.name }

// sync brings the per-node state up to date with nodes, bumping the
// version of each node that changed.
func (c *fgdCore) sync(nodes []core.Node) {
	if len(c.nodes) != len(nodes) {
		c.nodes = make([]nodeState, len(nodes))
		c.types = map[reqKey]int{}
		c.cache = nil
	}
	for i := range nodes {
		n, s := &nodes[i], &c.nodes[i]
		if s.occupied && s.same(n) {
			continue
		}
		s.load(n, c.x)
	}
}

// same reports whether n is as s last saw it.
func (s *nodeState) same(n *core.Node) bool {
	if s.model != n.GPUModel || s.cpuCap != n.CPUMilli || s.cpuFree != n.FreeCPUMilli || s.gpuMem != n.GPUMemMiB || len(s.free) != len(n.GPUs) {
		return false
	}
	for g := range n.GPUs {
		gp := &n.GPUs[g]
		if s.free[g] != gp.FreeMilli || s.freeMem[g] != gp.FreeMemMiB || s.shared[g] != gp.Shared {
			return false
		}
	}
	return true
}

// load records n in s and recomputes its fragmentation.
func (s *nodeState) load(n *core.Node, x *fragIndex) {
	s.ver++
	s.occupied = true
	if s.model != n.GPUModel || s.groups == nil {
		s.groups = x.groups(n.GPUModel)
	}
	s.model, s.cpuCap, s.cpuFree, s.gpuMem = n.GPUModel, n.CPUMilli, n.FreeCPUMilli, n.GPUMemMiB
	s.free, s.freeMem, s.shared, s.sorted = s.free[:0], s.freeMem[:0], s.shared[:0], s.sorted[:0]
	for g := range n.GPUs {
		gp := &n.GPUs[g]
		s.free = append(s.free, gp.FreeMilli)
		s.freeMem = append(s.freeMem, gp.FreeMemMiB)
		s.shared = append(s.shared, gp.Shared)
		s.sorted = append(s.sorted, int64(gp.FreeMilli))
	}
	slices.Sort(s.sorted)
	s.frag = x.frag(s.groups, s.sorted, cpuLeft(n, 0))
}

// typeOf returns the cache slot of req's type.
func (c *fgdCore) typeOf(req *core.Request, nodes int) int {
	k := reqKey{cpu: req.CPUMilli, gpus: req.GPUs, milli: req.MilliPerGPU, gmem: req.MemPerGPUMiB}
	if t, ok := c.types[k]; ok {
		return t
	}
	if len(c.cache) >= maxTypes {
		c.types = map[reqKey]int{}
		c.cache = c.cache[:0]
	}
	t := len(c.cache)
	c.types[k] = t
	c.cache = append(c.cache, make([]entry, nodes))
	return t
}

// Place implements Policy.
func (c *fgdCore) Place(nodes []core.Node, req *core.Request) (Fit, bool) {
	c.sync(nodes)
	t := c.typeOf(req, len(nodes))
	cache := c.cache[t]
	pk := newPicker(c.rng)
	share := req.GPUs == 1 && !IsWhole(req)
	for i := range nodes {
		n := &nodes[i]
		if !Fits(n, req) {
			continue
		}
		e := &cache[i]
		if e.ver != c.nodes[i].ver {
			e.score, e.gpu = c.score(n, &c.nodes[i], req, share)
			e.ver = c.nodes[i].ver
		}
		pk.offer(e.score, i, int(e.gpu))
	}
	if !pk.found {
		return Fit{}, false
	}
	if share {
		return c.buf.one(pk.node, pk.gpu), true
	}
	return c.buf.place(&nodes[pk.node], pk.node, req), true
}

// score is req's score on n (whose state is s) and, for a share, the GPU
// it would take.
func (c *fgdCore) score(n *core.Node, s *nodeState, req *core.Request, share bool) (int64, int32) {
	cpu := cpuLeft(n, req.CPUMilli)
	if !share {
		after := s.sorted
		if req.GPUs > 0 {
			f := c.buf.place(n, 0, req)
			for _, g := range f.GPUs {
				old := int64(n.GPUs[g].FreeMilli)
				c.a = withChange(c.a, after, old, old-int64(req.MilliPerGPU))
				c.a, c.b = c.b, c.a
				after = c.b
			}
		}
		d := s.frag - c.x.frag(s.groups, after, cpu) - c.strandCost(n, req)
		return c.withBalance(c.nodeScore(d), n, req), -1
	}
	// A share: try each GPU that can take it; GPUs with the same free
	// share score the same, so each distinct value is evaluated once.
	var seenVal, seenD [8]int64
	seen := 0
	bestD, bestQ, bestGPU := int64(0), int64(0), int32(-1)
	for g := range n.GPUs {
		if !GPUFits(n, g, req) {
			continue
		}
		old := int64(n.GPUs[g].FreeMilli)
		var d int64
		found := false
		for k := 0; k < seen; k++ {
			if seenVal[k] == old {
				d, found = seenD[k], true
				break
			}
		}
		if !found {
			c.a = withChange(c.a, s.sorted, old, old-int64(req.MilliPerGPU))
			d = s.frag - c.x.frag(s.groups, c.a, cpu)
			if seen < len(seenVal) {
				seenVal[seen], seenD[seen] = old, d
				seen++
			}
		}
		q := c.quantize(d, c.gpuLevels)
		better := bestGPU < 0 || q > bestQ
		if c.gpuExact && bestGPU >= 0 && q == bestQ {
			// Among GPUs of the same score: the larger exact change, then
			// the least free share.
			better = d > bestD || (d == bestD && n.GPUs[g].FreeMilli < n.GPUs[bestGPU].FreeMilli)
		}
		if better {
			bestD, bestQ, bestGPU = d, q, int32(g)
		}
	}
	return c.withBalance(c.nodeScore(bestD-c.strandCost(n, req)), n, req), bestGPU
}

// strandCost is how much more GPU share (milli × count) req would strand
// on n for lack of CPU at the workload's CPU per GPU share.
func (c *fgdCore) strandCost(n *core.Node, req *core.Request) int64 {
	if c.balance < 3 || n.CPUMilli == 0 || c.x.gpuCPU == 0 {
		return 0
	}
	strand := func(cpu, gpu int64) int64 {
		return max(0, gpu-cpu*c.x.gpuMilli/c.x.gpuCPU)
	}
	cpu, gpu := n.FreeCPUMilli, freeMilli(n)
	d := strand(cpu-req.CPUMilli, gpu-int64(req.GPUs)*int64(req.MilliPerGPU)) - strand(cpu, gpu)
	switch c.balance {
	case 3:
		return d * c.x.total
	case 4:
		return d * c.x.total / 2
	case 5:
		return d * c.x.total * 2
	}
	return d * c.x.total / 4
}

// withBalance adds, under score q, the node's CPU surplus after the
// placement: free CPU beyond what its free GPUs need at the workload's
// CPU per GPU.
func (c *fgdCore) withBalance(q int64, n *core.Node, req *core.Request) int64 {
	if c.balance == 0 || c.balance >= 3 || (c.balance == 1 && req.GPUs > 0) || n.CPUMilli == 0 {
		return q
	}
	cpu := n.FreeCPUMilli - req.CPUMilli
	gpu := freeMilli(n) - int64(req.GPUs)*int64(req.MilliPerGPU)
	sur := cpu
	if c.x.gpuMilli > 0 {
		sur -= gpu * c.x.gpuCPU / c.x.gpuMilli
	}
	return q<<32 + min(max(sur, -1<<30), 1<<30-1) + 1<<30
}

// nodeScore is the node score for a fragmentation change d.
func (c *fgdCore) nodeScore(d int64) int64 { return c.quantize(d, c.levels) }

// quantize is FGD's score for a fragmentation change d (milli × count):
// int64(levels × sigmoid(Δ/1000)) with Δ = d / total count in milli-GPUs;
// levels 0 keeps d itself.
func (c *fgdCore) quantize(d int64, levels int64) int64 {
	if levels == 0 {
		return d
	}
	delta := 0.0
	if c.x.total > 0 {
		delta = float64(d) / float64(c.x.total)
	}
	return int64(1 / (1 + math.Exp(-delta/1000)) * float64(levels))
}

// GpufleetVariant selects an experimental variant (exploration only).
var GpufleetVariant int
