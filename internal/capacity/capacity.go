package capacity

import (
	"errors"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Errors Take and Give wrap.
var (
	// ErrDoesNotFit: the take asks for more than is free.
	ErrDoesNotFit = errors.New("capacity: request does not fit")
	// ErrBadGPUs: the GPUs named do not exist or one is named twice.
	ErrBadGPUs = errors.New("capacity: bad GPU list")
	// ErrNotAllocated: the give would leave more free than the node has.
	ErrNotAllocated = errors.New("capacity: giving back more than is allocated")
)

// GPUMilli is the milli-share one GPU of n holds when empty: a slice's
// share, else a whole GPU.
func GPUMilli(n *core.Node) core.Milli {
	if n.SliceMilli > 0 && n.SliceMilli < core.WholeGPU {
		return n.SliceMilli
	}
	return core.WholeGPU
}

// GPUMemCap is the GPU memory one GPU of n holds when empty: a slice's
// share of the whole GPU's memory, else all of it.
func GPUMemCap(n *core.Node) int64 { return n.Hardware().MemPerGPUMiB }

// GPUMem is the GPU memory one GPU's worth of r takes on n: for a whole
// GPU, all of it; for a share, what r asks for or, when it does not say,
// its share of the GPU's memory, so that memory is never oversubscribed.
// This is the one memory rule: a share fits only where this much is free.
func GPUMem(n *core.Node, r *core.Request) int64 {
	if r.MilliPerGPU >= core.WholeGPU {
		return n.GPUMemMiB
	}
	if r.MemPerGPUMiB > 0 {
		return r.MemPerGPUMiB
	}
	return n.GPUMemMiB * int64(r.MilliPerGPU) / int64(core.WholeGPU)
}

// HostShare is the host CPU and memory k of r's GPUs take: all of r's for
// a part holding all its GPUs (or a request of none), else the rounded-up
// proportion, so that the parts of a unit split over nodes never take
// less than the whole.
func HostShare(r *core.Request, k int) (cpu, mem int64) {
	if r.GPUs <= 1 || k >= r.GPUs {
		return r.CPUMilli, r.MemMiB
	}
	return (r.CPUMilli*int64(k) + int64(r.GPUs) - 1) / int64(r.GPUs), (r.MemMiB*int64(k) + int64(r.GPUs) - 1) / int64(r.GPUs)
}

// HostFits reports whether n's host has cpu milli-CPU and mem MiB free. A
// node that does not track a host resource (zero capacity) always has it.
func HostFits(n *core.Node, cpu, mem int64) bool {
	return (n.CPUMilli == 0 || n.FreeCPUMilli >= cpu) && (n.MemMiB == 0 || n.FreeMemMiB >= mem)
}

// GPUFits reports whether GPU g of n can take one GPU's worth of r: a
// whole-GPU request needs an empty, unshared GPU; a share needs a GPU that
// is empty or already shared, with the milli-share and [GPUMem] free.
func GPUFits(n *core.Node, g int, r *core.Request) bool {
	gp := &n.GPUs[g]
	if r.MilliPerGPU >= core.WholeGPU {
		return gp.FreeMilli == core.WholeGPU && !gp.Shared && gp.FreeMemMiB >= n.GPUMemMiB
	}
	if r.MilliPerGPU <= 0 || gp.FreeMilli < r.MilliPerGPU || gp.FreeMemMiB < GPUMem(n, r) {
		return false
	}
	return gp.Shared || gp.FreeMilli == core.WholeGPU
}

// FreeWhole counts n's empty, unshared GPUs.
func FreeWhole(n *core.Node) int {
	c := 0
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.FreeMilli == core.WholeGPU && !g.Shared {
			c++
		}
	}
	return c
}

// checkGPUs refuses GPU indexes that n does not have or that repeat.
func checkGPUs(n *core.Node, gpus []int) error {
	for i, g := range gpus {
		if g < 0 || g >= len(n.GPUs) {
			return fmt.Errorf("GPU %d on a node of %d GPUs: %w", g, len(n.GPUs), ErrBadGPUs)
		}
		for _, h := range gpus[:i] {
			if h == g {
				return fmt.Errorf("GPU %d named twice: %w", g, ErrBadGPUs)
			}
		}
	}
	return nil
}

// Take takes from n one GPU's worth of r on each of gpus and the host's
// share for that many GPUs ([HostShare]). It re-validates every GPU and
// the host first and changes nothing when it returns an error, so a
// decision made on stale state is refused, never half-applied. A GPU that
// takes a share is Shared while it holds one.
func Take(n *core.Node, r *core.Request, gpus []int) error {
	if err := checkGPUs(n, gpus); err != nil {
		return err
	}
	cpu, hmem := HostShare(r, len(gpus))
	if !HostFits(n, cpu, hmem) {
		return fmt.Errorf("host has %d milli-CPU and %d MiB free, request wants %d and %d: %w",
			n.FreeCPUMilli, n.FreeMemMiB, cpu, hmem, ErrDoesNotFit)
	}
	for _, g := range gpus {
		if !GPUFits(n, g, r) {
			gp := &n.GPUs[g]
			return fmt.Errorf("GPU %d has %d milli and %d MiB free (shared %t), request wants %d milli and %d MiB: %w",
				g, gp.FreeMilli, gp.FreeMemMiB, gp.Shared, r.MilliPerGPU, GPUMem(n, r), ErrDoesNotFit)
		}
	}
	mem := GPUMem(n, r)
	for _, g := range gpus {
		gp := &n.GPUs[g]
		gp.FreeMilli -= r.MilliPerGPU
		gp.FreeMemMiB -= mem
		if r.MilliPerGPU < core.WholeGPU {
			gp.Shared = true
		}
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli -= cpu
	}
	if n.MemMiB > 0 {
		n.FreeMemMiB -= hmem
	}
	return nil
}

// Give gives back to n what Take(n, r, gpus) took: Take then Give leaves
// the node exactly as it was. It refuses, changing nothing, a give that
// would leave more free than the node has. A GPU stays Shared while shares
// remain on it; a slice is always Shared.
func Give(n *core.Node, r *core.Request, gpus []int) error {
	if err := checkGPUs(n, gpus); err != nil {
		return err
	}
	cpu, hmem := HostShare(r, len(gpus))
	if (n.CPUMilli > 0 && n.FreeCPUMilli+cpu > n.CPUMilli) || (n.MemMiB > 0 && n.FreeMemMiB+hmem > n.MemMiB) {
		return fmt.Errorf("host would have %d milli-CPU and %d MiB free of %d and %d: %w",
			n.FreeCPUMilli+cpu, n.FreeMemMiB+hmem, n.CPUMilli, n.MemMiB, ErrNotAllocated)
	}
	mem, capMilli, capMem := GPUMem(n, r), GPUMilli(n), GPUMemCap(n)
	for _, g := range gpus {
		gp := &n.GPUs[g]
		if gp.FreeMilli+r.MilliPerGPU > capMilli || gp.FreeMemMiB+mem > capMem ||
			(r.MilliPerGPU < core.WholeGPU && !gp.Shared) || (r.MilliPerGPU >= core.WholeGPU && gp.Shared) {
			return fmt.Errorf("GPU %d has %d milli and %d MiB free (shared %t), cannot give back %d milli and %d MiB: %w",
				g, gp.FreeMilli, gp.FreeMemMiB, gp.Shared, r.MilliPerGPU, mem, ErrNotAllocated)
		}
	}
	for _, g := range gpus {
		gp := &n.GPUs[g]
		gp.FreeMilli += r.MilliPerGPU
		gp.FreeMemMiB += mem
		if r.MilliPerGPU < core.WholeGPU {
			gp.Shared = gp.FreeMilli < core.WholeGPU || n.SliceMilli > 0
		}
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli += cpu
	}
	if n.MemMiB > 0 {
		n.FreeMemMiB += hmem
	}
	return nil
}
