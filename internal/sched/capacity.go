package sched

import (
	"github.com/gpufleet/gpufleet/internal/core"
)

// gpuMem is the GPU memory a unit takes on each GPU: what it asks for, or
// for a shared unit that does not say, its share of the GPU's memory — so
// that memory is never oversubscribed.
func gpuMem(n *core.Node, r *core.Request) int64 {
	if r.MilliPerGPU >= core.WholeGPU {
		return n.GPUMemMiB
	}
	if r.MemPerGPUMiB > 0 {
		return r.MemPerGPUMiB
	}
	return n.GPUMemMiB * int64(r.MilliPerGPU) / int64(core.WholeGPU)
}

// hostShare is the host CPU and memory a part of k of a unit's GPUs takes.
func hostShare(r *core.Request, k int) (cpu, mem int64) {
	if r.GPUs <= 1 || k >= r.GPUs {
		return r.CPUMilli, r.MemMiB
	}
	return (r.CPUMilli*int64(k) + int64(r.GPUs) - 1) / int64(r.GPUs), (r.MemMiB*int64(k) + int64(r.GPUs) - 1) / int64(r.GPUs)
}

// gpuFits reports whether GPU g of n can take one GPU of r: a whole-GPU
// request needs an empty GPU; a share needs a GPU that is empty or already
// shared, with the milli-share and memory free.
func gpuFits(n *core.Node, g int, r *core.Request) bool {
	gp := &n.GPUs[g]
	if r.MilliPerGPU >= core.WholeGPU {
		return gp.FreeMilli == core.WholeGPU && !gp.Shared && gp.FreeMemMiB >= n.GPUMemMiB
	}
	if gp.FreeMilli < r.MilliPerGPU || gp.FreeMemMiB < gpuMem(n, r) {
		return false
	}
	return gp.Shared || gp.FreeMilli == core.WholeGPU
}

// hostFits reports whether n's host has CPU and memory for k GPUs' worth
// of r. A node that does not track host resources always fits.
func hostFits(n *core.Node, r *core.Request, k int) bool {
	cpu, mem := hostShare(r, k)
	return (n.CPUMilli == 0 || n.FreeCPUMilli >= cpu) && (n.MemMiB == 0 || n.FreeMemMiB >= mem)
}

// apply takes part p of unit u from the nodes' free capacity (sign 1) or
// gives it back (sign -1). It is the only place that changes free
// capacity, so the invariants live here: free never negative, never above
// capacity, a GPU shared exactly while it holds shares.
func apply(nodes []core.Node, u *Unit, p Part, sign int64) {
	n := &nodes[p.Node]
	r := &u.Job.Request
	mem := gpuMem(n, r)
	for _, g := range p.GPUs {
		gp := &n.GPUs[g]
		gp.FreeMilli -= core.Milli(sign) * r.MilliPerGPU
		gp.FreeMemMiB -= sign * mem
		if r.MilliPerGPU < core.WholeGPU {
			gp.Shared = gp.FreeMilli < core.WholeGPU
		}
		if gp.FreeMilli < 0 || gp.FreeMilli > core.WholeGPU || gp.FreeMemMiB < 0 || gp.FreeMemMiB > n.GPUMemMiB {
			panic("sched: GPU capacity accounting broken on " + n.LeaseID)
		}
	}
	cpu, hmem := hostShare(r, len(p.GPUs))
	if n.CPUMilli > 0 {
		n.FreeCPUMilli -= sign * cpu
	}
	if n.MemMiB > 0 {
		n.FreeMemMiB -= sign * hmem
	}
}

// freeWhole counts n's empty GPUs.
func freeWhole(n *core.Node) int {
	c := 0
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.FreeMilli == core.WholeGPU && !g.Shared {
			c++
		}
	}
	return c
}
