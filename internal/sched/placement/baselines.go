package placement

import (
	"github.com/gpufleet/gpufleet/internal/core"
)

// The simulator's normalisers: the largest node it expects (128 cores,
// 8 GPUs) and the Kubernetes score range 0..100.
const (
	maxSpecCPU   = 128000
	maxSpecGPU   = 8000
	maxNodeScore = 100
)

var (
	_ Policy  = (*Random)(nil)
	_ Policy  = (*DotProd)(nil)
	_ Policy  = (*GpuClustering)(nil)
	_ Tracker = (*GpuClustering)(nil)
	_ Policy  = (*GpuPacking)(nil)
	_ Policy  = (*BestFit)(nil)
)

// hostFree is the free CPU the scoring sees: zero on a node that does not
// track its CPU, so that the CPU term drops out.
func hostFree(n *core.Node) int64 {
	if n.CPUMilli == 0 {
		return 0
	}
	return n.FreeCPUMilli
}

// hostReq is the CPU of req the scoring sees on n.
func hostReq(n *core.Node, req *core.Request) int64 {
	if n.CPUMilli == 0 {
		return 0
	}
	return req.CPUMilli
}

// Random places a request on a node drawn uniformly from those it fits,
// and a share on a GPU drawn uniformly from those that can take it.
type Random struct {
	rng      Rand
	feasible []int
	buf      gpuBuf
}

// NewRandom returns the Random baseline drawing from rng. With a nil rng
// it takes the first node and GPU that fit.
func NewRandom(rng Rand) *Random { return &Random{rng: rng} }

// draw is a uniform index below n, or 0 without a random source.
func (p *Random) draw(n int) int {
	if p.rng == nil {
		return 0
	}
	return p.rng.Intn(n)
}

// Name returns "random".
func (p *Random) Name() string { return "random" }

// Place implements Policy.
func (p *Random) Place(nodes []core.Node, req *core.Request) (Fit, bool) {
	p.feasible = p.feasible[:0]
	for i := range nodes {
		if Fits(&nodes[i], req) {
			p.feasible = append(p.feasible, i)
		}
	}
	if len(p.feasible) == 0 {
		return Fit{}, false
	}
	i := p.feasible[p.draw(len(p.feasible))]
	n := &nodes[i]
	if req.GPUs == 1 && !IsWhole(req) {
		pick, seen := -1, 0
		for g := range n.GPUs {
			if GPUFits(n, g, req) {
				seen++
				if p.draw(seen) == 0 && (p.rng != nil || pick < 0) {
					pick = g
				}
			}
		}
		return p.buf.one(i, pick), true
	}
	return p.buf.place(n, i, req), true
}

// DotProd is Tetris's alignment heuristic as the FGD artifact configures
// it (GPU dimensions merged, normalised by the largest node): a node
// scores 100 × (1 − (free·request)/2) with free CPU and free GPU share
// each divided by the largest node's, so the node whose free resources
// align least with the request wins — it packs. A share goes to the
// best-fitting GPU.
type DotProd struct {
	rng Rand
	buf gpuBuf
}

// NewDotProd returns the DotProd baseline. Ties go to a node drawn with
// rng, or, when rng is nil, to the first node offered (the FGD artifact's
// scheduler: the first in its seeded node order).
func NewDotProd(rng Rand) *DotProd { return &DotProd{rng: rng} }

// Name returns "dotprod".
func (p *DotProd) Name() string { return "dotprod" }

// Score is the simulator's integer score of req on n.
func (p *DotProd) Score(n *core.Node, req *core.Request) int64 {
	nodeCPU := float64(hostFree(n)) / maxSpecCPU
	nodeGPU := float64(freeMilli(n)) / maxSpecGPU
	podCPU := float64(hostReq(n, req)) / maxSpecCPU
	podGPU := float64(int64(req.GPUs)*int64(req.MilliPerGPU)) / maxSpecGPU
	dot := float64(0)
	dot += float64(nodeCPU * podCPU)
	dot += float64(nodeGPU * podGPU)
	s := float64(1 - dot/2)
	return int64(float64(maxNodeScore * s))
}

// Place implements Policy.
func (p *DotProd) Place(nodes []core.Node, req *core.Request) (Fit, bool) {
	return placeBest(nodes, req, p.rng, &p.buf, func(i int) int64 { return p.Score(&nodes[i], req) })
}

// BestFit prefers the node left with the least free resources: it scores
// 100 × (1 − ½·cpu_left/128 cores − ½·gpu_left/8 GPUs), truncated to an
// integer, where the lefts are what stays free after the placement. (The
// simulator then rescales scores to 0..100, which keeps the same nodes on
// top.) A share goes to the best-fitting GPU.
type BestFit struct {
	rng Rand
	buf gpuBuf
}

// NewBestFit returns the BestFit baseline. Ties go to a node drawn with
// rng, or, when rng is nil, to the first node offered (the FGD artifact's
// scheduler: the first in its seeded node order).
func NewBestFit(rng Rand) *BestFit { return &BestFit{rng: rng} }

// Name returns "bestfit".
func (p *BestFit) Name() string { return "bestfit" }

// Score is the simulator's integer score of req on n (before rescaling).
func (p *BestFit) Score(n *core.Node, req *core.Request) int64 {
	cpuLeft := float64(hostFree(n) - hostReq(n, req))
	gpuLeft := float64(freeMilli(n) - int64(req.GPUs)*int64(req.MilliPerGPU))
	s := float64(0)
	s += float64(float64(cpuLeft/maxSpecCPU) * 0.5)
	s += float64(float64(gpuLeft/maxSpecGPU) * 0.5)
	s = float64((1 - s) * maxNodeScore)
	return int64(s)
}

// Place implements Policy.
func (p *BestFit) Place(nodes []core.Node, req *core.Request) (Fit, bool) {
	return placeBest(nodes, req, p.rng, &p.buf, func(i int) int64 { return p.Score(&nodes[i], req) })
}

// GpuPacking fills used GPUs first, then used nodes, then empty nodes:
//
//   - a request that fits on GPUs already shared scores in 50..100, higher
//     when those GPUs have less left;
//   - one that must take empty GPUs of a node in use scores in 33..50,
//     higher when it takes fewer;
//   - one on an empty node scores max(33 − GPUs of the node, GPUs of the
//     node);
//   - a request for no GPU scores 0 everywhere (ties: random).
//
// A share goes to the best-fitting GPU.
type GpuPacking struct {
	rng Rand
	buf gpuBuf
	idx []int
}

// NewGpuPacking returns the GpuPacking baseline. Ties go to a node drawn with
// rng, or, when rng is nil, to the first node offered (the FGD artifact's
// scheduler: the first in its seeded node order).
func NewGpuPacking(rng Rand) *GpuPacking { return &GpuPacking{rng: rng} }

// Name returns "gpupacking".
func (p *GpuPacking) Name() string { return "gpupacking" }

// Score is the simulator's integer score of req on n.
func (p *GpuPacking) Score(n *core.Node, req *core.Request) int64 {
	if req.GPUs == 0 || req.MilliPerGPU <= 0 {
		return 0
	}
	free := int64(wholeFree(n))
	if int(free) == len(n.GPUs) {
		return max(maxNodeScore/3-free, free)
	}
	// The GPUs it would use: least free first, stable.
	p.idx = p.idx[:0]
	for g := range n.GPUs {
		p.idx = append(p.idx, g)
	}
	for a := 1; a < len(p.idx); a++ {
		for b := a; b > 0 && n.GPUs[p.idx[b]].FreeMilli < n.GPUs[p.idx[b-1]].FreeMilli; b-- {
			p.idx[b], p.idx[b-1] = p.idx[b-1], p.idx[b]
		}
	}
	need, wholeUsed := req.GPUs, int64(0)
	var ratio int64
	for _, g := range p.idx {
		if need == 0 {
			break
		}
		if GPUFits(n, g, req) {
			need--
			left := int64(n.GPUs[g].FreeMilli)
			if left == int64(core.WholeGPU) {
				wholeUsed++
			}
			ratio += left * 100 / int64(core.WholeGPU)
		}
	}
	if need > 0 {
		return 0
	}
	if wholeUsed > 0 {
		return max(maxNodeScore/2-wholeUsed, maxNodeScore/3)
	}
	return max(maxNodeScore-ratio/10, maxNodeScore/2)
}

// Place implements Policy.
func (p *GpuPacking) Place(nodes []core.Node, req *core.Request) (Fit, bool) {
	return placeBest(nodes, req, p.rng, &p.buf, func(i int) int64 { return p.Score(&nodes[i], req) })
}

// GpuClustering keeps requests of the same kind together — shares with
// shares, k-GPU requests with k-GPU requests. A GPU request scores, with
// b = 25 × (8 GPUs − free share)/8 GPUs:
//
//   - b + 75 on a node whose GPU requests are all of its kind;
//   - b + 50 on a node that has some of its kind among others;
//   - b + 25 on a node with no GPU request yet;
//   - b on a node with only other kinds.
//
// A request for no GPU scores 0 everywhere. A share goes to the
// best-fitting GPU. It implements Tracker: it must be told what runs where.
type GpuClustering struct {
	rng   Rand
	buf   gpuBuf
	kinds [][]kindCount // per node
}

// kindCount is how many GPU requests of one kind (0: a share; k: k whole
// GPUs) run on a node.
type kindCount struct {
	kind, count int
}

// NewGpuClustering returns the GpuClustering baseline. Ties go to a node
// drawn with rng, or, when rng is nil, to the first node offered (the FGD
// artifact's scheduler: the first in its seeded node order).
func NewGpuClustering(rng Rand) *GpuClustering { return &GpuClustering{rng: rng} }

// Name returns "gpuclustering".
func (p *GpuClustering) Name() string { return "gpuclustering" }

// kindOf is req's clustering kind, or -1 for a request of no GPU.
func kindOf(req *core.Request) int {
	switch {
	case req.GPUs == 0 || req.MilliPerGPU <= 0:
		return -1
	case req.GPUs == 1 && req.MilliPerGPU < core.WholeGPU:
		return 0
	default:
		return req.GPUs
	}
}

func (p *GpuClustering) grow(n int) {
	if len(p.kinds) < n {
		p.kinds = append(p.kinds, make([][]kindCount, n-len(p.kinds))...)
	}
}

// Placed implements Tracker.
func (p *GpuClustering) Placed(nodes []core.Node, req *core.Request, f Fit) {
	p.count(nodes, req, f, 1)
}

// Removed implements Tracker.
func (p *GpuClustering) Removed(nodes []core.Node, req *core.Request, f Fit) {
	p.count(nodes, req, f, -1)
}

func (p *GpuClustering) count(nodes []core.Node, req *core.Request, f Fit, d int) {
	k := kindOf(req)
	if k < 0 || f.Node < 0 {
		return
	}
	p.grow(max(len(nodes), f.Node+1))
	ks := p.kinds[f.Node]
	for j := range ks {
		if ks[j].kind == k {
			ks[j].count += d
			if ks[j].count <= 0 {
				ks = append(ks[:j], ks[j+1:]...)
			}
			p.kinds[f.Node] = ks
			return
		}
	}
	if d > 0 {
		p.kinds[f.Node] = append(ks, kindCount{kind: k, count: d})
	}
}

// Score is the simulator's integer score of req on node i.
func (p *GpuClustering) Score(nodes []core.Node, i int, req *core.Request) int64 {
	k := kindOf(req)
	if k < 0 {
		return 0
	}
	b := int64(maxNodeScore/4) * (maxSpecGPU - freeMilli(&nodes[i])) / maxSpecGPU
	var ks []kindCount
	if i < len(p.kinds) {
		ks = p.kinds[i]
	}
	mine := false
	for _, kc := range ks {
		if kc.kind == k {
			mine = true
		}
	}
	switch {
	case mine && len(ks) == 1:
		return b + maxNodeScore*3/4
	case mine:
		return b + maxNodeScore*2/4
	case len(ks) == 0:
		return b + maxNodeScore/4
	default:
		return b
	}
}

// Place implements Policy.
func (p *GpuClustering) Place(nodes []core.Node, req *core.Request) (Fit, bool) {
	return placeBest(nodes, req, p.rng, &p.buf, func(i int) int64 { return p.Score(nodes, i, req) })
}

// placeBest is the node-scoring policies' Place: the best-scoring node
// that fits (ties by rng), the request's GPUs on it chosen by buf.
func placeBest(nodes []core.Node, req *core.Request, rng Rand, buf *gpuBuf, score func(i int) int64) (Fit, bool) {
	pk := newPicker(rng)
	for i := range nodes {
		if Fits(&nodes[i], req) {
			pk.offer(score(i), i, -1)
		}
	}
	if !pk.found {
		return Fit{}, false
	}
	return buf.place(&nodes[pk.node], pk.node, req), true
}
