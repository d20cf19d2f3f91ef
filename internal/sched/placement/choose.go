package placement

import (
	"math"

	"github.com/gpufleet/gpufleet/internal/core"
)

// picker keeps the best-scoring node seen so far. Ties go to the first
// node offered when it has no random source — what the FGD artifact's
// scheduler does over its seeded node order — and otherwise to one drawn
// uniformly by reservoir sampling, as stock Kubernetes' selectHost does.
type picker struct {
	rng   Rand
	best  int64
	node  int
	gpu   int
	ties  int
	found bool
}

func newPicker(rng Rand) picker { return picker{rng: rng, best: math.MinInt64, node: -1, gpu: -1} }

// offer considers node i with score s (and, for a share, GPU g).
func (p *picker) offer(s int64, i, g int) {
	switch {
	case !p.found || s > p.best:
		p.best, p.node, p.gpu, p.ties, p.found = s, i, g, 1, true
	case s == p.best && p.rng != nil:
		p.ties++
		if p.rng.Intn(p.ties) == 0 {
			p.node, p.gpu = i, g
		}
	}
}

// gpuBuf is a policy's reusable buffer for the GPUs of the Fit it returns.
type gpuBuf []int

// one returns a fit of node i on GPU g (or on no GPU when g < 0).
func (b *gpuBuf) one(i, g int) Fit {
	*b = (*b)[:0]
	if g >= 0 {
		*b = append(*b, g)
	}
	return Fit{Node: i, GPUs: *b}
}

// lowest returns a fit of node i on the req.GPUs lowest-indexed GPUs that
// can take req — for whole GPUs, the simulator's AllocateExclusiveGpuId.
func (b *gpuBuf) lowest(n *core.Node, i int, req *core.Request) Fit {
	*b = (*b)[:0]
	for g := range n.GPUs {
		if len(*b) == req.GPUs {
			break
		}
		if GPUFits(n, g, req) {
			*b = append(*b, g)
		}
	}
	return Fit{Node: i, GPUs: *b}
}

// packed returns a fit of node i on the req.GPUs GPUs that can take req
// with the least free share, lowest index first among equals — the
// simulator's NodeResource.Sub. For whole GPUs it is lowest.
func (b *gpuBuf) packed(n *core.Node, i int, req *core.Request) Fit {
	if IsWhole(req) || req.GPUs == 1 {
		if req.GPUs == 1 {
			return b.one(i, bestFitGPU(n, req))
		}
		return b.lowest(n, i, req)
	}
	*b = (*b)[:0]
	for len(*b) < req.GPUs {
		pick := -1
		for g := range n.GPUs {
			if !GPUFits(n, g, req) || contains(*b, g) {
				continue
			}
			if pick < 0 || n.GPUs[g].FreeMilli < n.GPUs[pick].FreeMilli {
				pick = g
			}
		}
		if pick < 0 {
			break
		}
		*b = append(*b, pick)
	}
	return Fit{Node: i, GPUs: *b}
}

// place returns the fit a baseline's GPU selection makes once it has
// chosen node i: best fit for a single share, the lowest free GPUs for
// whole ones.
func (b *gpuBuf) place(n *core.Node, i int, req *core.Request) Fit {
	if req.GPUs == 0 {
		return b.one(i, -1)
	}
	return b.packed(n, i, req)
}

// bestFitGPU is the GPU of n that can take one GPU's worth of req with
// the least free share (lowest index among equals), or -1 — the
// simulator's "best" GPU selection.
func bestFitGPU(n *core.Node, req *core.Request) int {
	pick := -1
	for g := range n.GPUs {
		if GPUFits(n, g, req) && (pick < 0 || n.GPUs[g].FreeMilli < n.GPUs[pick].FreeMilli) {
			pick = g
		}
	}
	return pick
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// freeMilli is n's total free GPU share.
func freeMilli(n *core.Node) int64 {
	var s int64
	for i := range n.GPUs {
		s += int64(n.GPUs[i].FreeMilli)
	}
	return s
}

// wholeFree counts n's empty GPUs.
func wholeFree(n *core.Node) int {
	c := 0
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.FreeMilli == core.WholeGPU && !g.Shared {
			c++
		}
	}
	return c
}
