package placement

import (
	"errors"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Fit is a placement: the index of a node in the slice the policy was
// given and the indexes of the GPUs (into that node's GPUs) that take one
// GPU's worth of the request each. A request for no GPUs has no GPUs.
//
// A Fit a policy returns may share its GPUs slice with the policy's own
// buffer: it is valid until the policy's next Place. Copy it to keep it.
type Fit struct {
	Node int
	GPUs []int
}

// Policy chooses where one request goes. Place returns false when the
// request fits on no node. It does not change the nodes: the caller
// applies the fit (with [Apply]) or not.
type Policy interface {
	Name() string
	Place(nodes []core.Node, req *core.Request) (Fit, bool)
}

// Tracker is implemented by a policy that scores by what runs on a node,
// not only by what is free there (GpuClustering). The caller reports each
// fit it applies and each it removes, with the nodes as they are after
// the change.
type Tracker interface {
	Placed(nodes []core.Node, req *core.Request, f Fit)
	Removed(nodes []core.Node, req *core.Request, f Fit)
}

// Rand is the random source a policy breaks ties with; *math/rand.Rand is
// one. It comes in as an argument, seeded, so that every run can be
// replayed.
type Rand interface {
	// Intn returns a uniform integer in [0, n); n > 0.
	Intn(n int) int
}

// Errors Apply and Remove wrap.
var (
	// ErrDoesNotFit: the fit asks for more than is free.
	ErrDoesNotFit = errors.New("placement: request does not fit")
	// ErrBadFit: the fit names a GPU that does not exist, names one twice,
	// or names a different number of GPUs than the request asks for.
	ErrBadFit = errors.New("placement: malformed fit")
	// ErrNotAllocated: Remove would give back more than the node has.
	ErrNotAllocated = errors.New("placement: removing more than is allocated")
)

// IsWhole reports whether req takes whole GPUs (or none).
func IsWhole(req *core.Request) bool { return req.MilliPerGPU >= core.WholeGPU || req.GPUs == 0 }

// GPUMem is the GPU memory one GPU's worth of req takes on n: what it
// asks for; for a whole GPU, all of it; for a share that does not say, its
// share of the GPU's memory, so that memory is never oversubscribed.
func GPUMem(n *core.Node, req *core.Request) int64 {
	if req.MilliPerGPU >= core.WholeGPU {
		return n.GPUMemMiB
	}
	if req.MemPerGPUMiB > 0 {
		return req.MemPerGPUMiB
	}
	return n.GPUMemMiB * int64(req.MilliPerGPU) / int64(core.WholeGPU)
}

// ModelAllowed reports whether req may run on n's GPU model.
func ModelAllowed(n *core.Node, req *core.Request) bool {
	if len(req.Models) == 0 {
		return true
	}
	for _, m := range req.Models {
		if m == n.GPUModel {
			return true
		}
	}
	return false
}

// HostFits reports whether n's host has the CPU and memory req asks for.
// A node that does not track a host resource (zero capacity) always has
// it.
func HostFits(n *core.Node, req *core.Request) bool {
	return (n.CPUMilli == 0 || n.FreeCPUMilli >= req.CPUMilli) && (n.MemMiB == 0 || n.FreeMemMiB >= req.MemMiB)
}

// GPUFits reports whether GPU g of n can take one GPU's worth of req: a
// whole-GPU request needs an empty GPU; a share needs a GPU that is empty
// or already shared, with the milli-share and the memory free.
func GPUFits(n *core.Node, g int, req *core.Request) bool {
	gp := &n.GPUs[g]
	if req.MilliPerGPU >= core.WholeGPU {
		return gp.FreeMilli == core.WholeGPU && !gp.Shared && gp.FreeMemMiB >= n.GPUMemMiB
	}
	if req.MilliPerGPU <= 0 || gp.FreeMilli < req.MilliPerGPU || gp.FreeMemMiB < GPUMem(n, req) {
		return false
	}
	return gp.Shared || gp.FreeMilli == core.WholeGPU
}

// FittingGPUs counts the GPUs of n that can take one GPU's worth of req.
func FittingGPUs(n *core.Node, req *core.Request) int {
	c := 0
	for g := range n.GPUs {
		if GPUFits(n, g, req) {
			c++
		}
	}
	return c
}

// Fits reports whether req fits on n: its model is allowed, the host has
// the CPU and memory, and at least req.GPUs GPUs can each take a GPU's
// worth of it.
func Fits(n *core.Node, req *core.Request) bool {
	if req.GPUs < 0 || !ModelAllowed(n, req) || !HostFits(n, req) {
		return false
	}
	if req.GPUs == 0 {
		return true
	}
	if len(n.GPUs) < req.GPUs {
		return false
	}
	need := req.GPUs
	for g := range n.GPUs {
		if GPUFits(n, g, req) {
			if need--; need == 0 {
				return true
			}
		}
	}
	return false
}

// checkFit validates the shape of f for n and req: as many distinct, valid
// GPU indexes as req asks for.
func checkFit(n *core.Node, f Fit, req *core.Request) error {
	if req.GPUs < 0 || len(f.GPUs) != req.GPUs {
		return fmt.Errorf("%d GPUs in the fit for a request of %d: %w", len(f.GPUs), req.GPUs, ErrBadFit)
	}
	for i, g := range f.GPUs {
		if g < 0 || g >= len(n.GPUs) {
			return fmt.Errorf("GPU %d on a node of %d GPUs: %w", g, len(n.GPUs), ErrBadFit)
		}
		for _, h := range f.GPUs[:i] {
			if h == g {
				return fmt.Errorf("GPU %d named twice: %w", g, ErrBadFit)
			}
		}
	}
	return nil
}

// Apply takes req from n's free capacity on the GPUs of f (n is the node
// f.Node names). It re-validates everything first — the model, the host,
// every GPU — and changes nothing when it returns an error, so a decision
// made on stale state is refused, never half-applied. A shared GPU is
// marked Shared while it holds shares.
func Apply(n *core.Node, f Fit, req *core.Request) error {
	if err := checkFit(n, f, req); err != nil {
		return err
	}
	if !ModelAllowed(n, req) {
		return fmt.Errorf("GPU model %q not among %v: %w", n.GPUModel, req.Models, ErrDoesNotFit)
	}
	if !HostFits(n, req) {
		return fmt.Errorf("host has %d milli-CPU and %d MiB free, request wants %d and %d: %w",
			n.FreeCPUMilli, n.FreeMemMiB, req.CPUMilli, req.MemMiB, ErrDoesNotFit)
	}
	for _, g := range f.GPUs {
		if !GPUFits(n, g, req) {
			gp := &n.GPUs[g]
			return fmt.Errorf("GPU %d has %d milli and %d MiB free (shared %t), request wants %d milli: %w",
				g, gp.FreeMilli, gp.FreeMemMiB, gp.Shared, req.MilliPerGPU, ErrDoesNotFit)
		}
	}
	mem := GPUMem(n, req)
	for _, g := range f.GPUs {
		gp := &n.GPUs[g]
		gp.FreeMilli -= req.MilliPerGPU
		gp.FreeMemMiB -= mem
		if req.MilliPerGPU < core.WholeGPU {
			gp.Shared = true
		}
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli -= req.CPUMilli
	}
	if n.MemMiB > 0 {
		n.FreeMemMiB -= req.MemMiB
	}
	return nil
}

// Remove gives back to n what Apply(n, f, req) took: Apply then Remove
// leaves the node exactly as it was. It refuses (and changes nothing) when
// that would leave more free than the node has.
func Remove(n *core.Node, f Fit, req *core.Request) error {
	if err := checkFit(n, f, req); err != nil {
		return err
	}
	if (n.CPUMilli > 0 && n.FreeCPUMilli+req.CPUMilli > n.CPUMilli) || (n.MemMiB > 0 && n.FreeMemMiB+req.MemMiB > n.MemMiB) {
		return fmt.Errorf("host would have %d milli-CPU and %d MiB free of %d and %d: %w",
			n.FreeCPUMilli+req.CPUMilli, n.FreeMemMiB+req.MemMiB, n.CPUMilli, n.MemMiB, ErrNotAllocated)
	}
	mem := GPUMem(n, req)
	for _, g := range f.GPUs {
		gp := &n.GPUs[g]
		if gp.FreeMilli+req.MilliPerGPU > core.WholeGPU || gp.FreeMemMiB+mem > n.GPUMemMiB ||
			(req.MilliPerGPU < core.WholeGPU && !gp.Shared) || (req.MilliPerGPU >= core.WholeGPU && gp.Shared) {
			return fmt.Errorf("GPU %d has %d milli and %d MiB free (shared %t), cannot give back %d milli: %w",
				g, gp.FreeMilli, gp.FreeMemMiB, gp.Shared, req.MilliPerGPU, ErrNotAllocated)
		}
	}
	for _, g := range f.GPUs {
		gp := &n.GPUs[g]
		gp.FreeMilli += req.MilliPerGPU
		gp.FreeMemMiB += mem
		if req.MilliPerGPU < core.WholeGPU {
			gp.Shared = gp.FreeMilli < core.WholeGPU
		}
	}
	if n.CPUMilli > 0 {
		n.FreeCPUMilli += req.CPUMilli
	}
	if n.MemMiB > 0 {
		n.FreeMemMiB += req.MemMiB
	}
	return nil
}
