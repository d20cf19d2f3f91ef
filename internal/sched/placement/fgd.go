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
// the highest score wins. A share goes to the GPU whose score is highest,
// the lowest index among equals.
type FGD struct {
	fgdCore
}

// NewFGD returns FGD measuring fragmentation against w. Ties go to a node
// drawn with rng, or, when rng is nil, to the first node offered — what
// the FGD artifact's scheduler does with its (seeded, shuffled) node
// order.
func NewFGD(w Workload, rng Rand) *FGD {
	return &FGD{fgdCore: newFGDCore(w, rng, "fgd", fgdMode{levels: maxNodeScore})}
}

// Gpufleet is gpufleet's default placement policy: fragmentation gradient
// descent that also counts the GPUs a placement strands for lack of CPU.
//
// FGD's fragmentation looks one pod ahead: a node is fine for a pod type
// while one more such pod fits. But a node whose free CPU cannot feed its
// free GPUs at the workload's usual CPU per GPU will strand some of them
// however the next pods come — and on openb, where CPU runs out before GPU
// share does, that is where FGD loses most. So Gpufleet scores a node by
//
//	Δfragmentation + Δstranded × (pod types' total count)
//
// where stranded is the free GPU share beyond what the node's free CPU
// can feed (free CPU × Σ GPU share / Σ CPU over the workload's GPU types,
// weighted by popularity). It compares these integer scores exactly —
// FGD's sigmoid truncates to one of 100 values — takes a share's GPU by
// the same exact score with best fit among equals, and gives a tie to the
// first node offered (or a draw from rng). On the openb default trace at
// 130% it leaves 12% fewer GPUs unallocated than FGD, and it is ahead on
// every openb trace (docs/openb.md).
type Gpufleet struct {
	fgdCore
}

// NewGpufleet returns gpufleet's policy measuring fragmentation against
// w. Ties go to a node drawn with rng, or, when rng is nil, to the first
// node offered.
func NewGpufleet(w Workload, rng Rand) *Gpufleet {
	return &Gpufleet{fgdCore: newFGDCore(w, rng, "gpufleet", fgdMode{exact: true, strand: true})}
}

// fgdMode is what distinguishes FGD from Gpufleet.
type fgdMode struct {
	// levels quantizes scores as FGD does: int64(levels × sigmoid(Δ/1000)).
	levels int64
	// exact compares the fragmentation change itself and breaks a share's
	// GPU ties by best fit.
	exact bool
	// strand adds the change in GPU share stranded for lack of CPU.
	strand bool
}

// maxTypes bounds the request types whose per-node scores are kept; past
// it the cache starts over, so a long-running scheduler's memory stays
// bounded.
const maxTypes = 1024

// fgdCore is the machinery FGD and Gpufleet share: per-node state with
// its current fragmentation, recomputed only when the node changes, and
// per-(request type, node) scores, recomputed only when that node changes.
type fgdCore struct {
	name  string
	mode  fgdMode
	rng   Rand
	x     *fragIndex
	nodes []nodeState
	types map[reqKey]int
	cache [][]entry
	buf   gpuBuf
	a, b  []int64
}

// nodeState is what a score depends on, as last seen, and the node's
// fragmentation then. ver changes whenever any of it does.
type nodeState struct {
	ver     uint32
	loaded  bool
	model   string
	cpuCap  int64
	cpuFree int64
	gpuMem  int64
	free    []core.Milli
	freeMem []int64
	shared  []bool
	sorted  []int64
	frag    int64
	groups  *modelGroups
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

func newFGDCore(w Workload, rng Rand, name string, mode fgdMode) fgdCore {
	return fgdCore{name: name, mode: mode, rng: rng, x: newFragIndex(w), types: map[reqKey]int{}}
}

// Name returns "fgd" or "gpufleet".
func (c *fgdCore) Name() string { return c.name }

// sync brings the per-node state up to date with nodes, bumping the
// version of each node that changed.
func (c *fgdCore) sync(nodes []core.Node) {
	if len(c.nodes) != len(nodes) {
		c.nodes = make([]nodeState, len(nodes))
		c.types = map[reqKey]int{}
		c.cache = c.cache[:0]
	}
	for i := range nodes {
		n, s := &nodes[i], &c.nodes[i]
		if s.loaded && s.same(n) {
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
	if !s.loaded || s.model != n.GPUModel {
		s.groups = x.groups(n.GPUModel)
	}
	s.loaded = true
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
	cache := c.cache[c.typeOf(req, len(nodes))]
	pk := newPicker(c.rng)
	share := req.GPUs == 1 && !IsWhole(req)
	for i := range nodes {
		n := &nodes[i]
		if !Fits(n, req) {
			continue
		}
		e, s := &cache[i], &c.nodes[i]
		if e.ver != s.ver {
			e.score, e.gpu = c.score(n, s, req, share)
			e.ver = s.ver
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
	strand := c.strandCost(n, req)
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
		return c.quantize(s.frag - c.x.frag(s.groups, after, cpu) - strand), -1
	}
	// A share: try each GPU that can take it. GPUs with the same free
	// share score the same, so each distinct value is evaluated once.
	var seenVal, seenScore [8]int64
	seen := 0
	best, bestGPU := int64(0), int32(-1)
	for g := range n.GPUs {
		if !GPUFits(n, g, req) {
			continue
		}
		old := int64(n.GPUs[g].FreeMilli)
		var sc int64
		found := false
		for k := 0; k < seen; k++ {
			if seenVal[k] == old {
				sc, found = seenScore[k], true
				break
			}
		}
		if !found {
			c.a = withChange(c.a, s.sorted, old, old-int64(req.MilliPerGPU))
			sc = c.quantize(s.frag - c.x.frag(s.groups, c.a, cpu) - strand)
			if seen < len(seenVal) {
				seenVal[seen], seenScore[seen] = old, sc
				seen++
			}
		}
		// FGD keeps the first GPU of the highest score; Gpufleet, among
		// GPUs of the same score, the one with the least free share.
		if bestGPU < 0 || sc > best || (c.mode.exact && sc == best && n.GPUs[g].FreeMilli < n.GPUs[bestGPU].FreeMilli) {
			best, bestGPU = sc, int32(g)
		}
	}
	return best, bestGPU
}

// quantize turns a fragmentation change d (milli × count) into a score:
// d itself in exact mode; otherwise FGD's int64(levels × sigmoid(Δ/1000))
// with Δ = d / total count in milli-GPUs, in float64 as the artifact
// computes it.
func (c *fgdCore) quantize(d int64) int64 {
	if c.mode.exact {
		return d
	}
	delta := 0.0
	if c.x.total > 0 {
		delta = float64(d) / float64(c.x.total)
	}
	return int64(1 / (1 + math.Exp(-delta/1000)) * float64(c.mode.levels))
}

// strandCost is how much more GPU share req would strand on n for lack of
// CPU, in the fragmentation's units (milli × count); 0 unless the mode
// counts stranding.
func (c *fgdCore) strandCost(n *core.Node, req *core.Request) int64 {
	if !c.mode.strand || n.CPUMilli == 0 || c.x.gpuCPU == 0 {
		return 0
	}
	cpu, gpu := n.FreeCPUMilli, freeMilli(n)
	after := c.x.stranded(cpu-req.CPUMilli, gpu-int64(req.GPUs)*int64(req.MilliPerGPU))
	return (after - c.x.stranded(cpu, gpu)) * c.x.total
}
