package placement

import (
	"errors"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/capacity"
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
	ErrDoesNotFit = capacity.ErrDoesNotFit
	// ErrBadFit: the fit names a GPU that does not exist, names one twice,
	// or names a different number of GPUs than the request asks for.
	ErrBadFit = errors.New("placement: malformed fit")
	// ErrNotAllocated: Remove would give back more than the node has.
	ErrNotAllocated = capacity.ErrNotAllocated
)

// IsWhole reports whether req takes whole GPUs (or none).
func IsWhole(req *core.Request) bool { return req.MilliPerGPU >= core.WholeGPU || req.GPUs == 0 }

// GPUMem is the GPU memory one GPU's worth of req takes on n: the
// capacity module's one rule ([capacity.GPUMem]).
func GPUMem(n *core.Node, req *core.Request) int64 { return capacity.GPUMem(n, req) }

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
	return capacity.HostFits(n, req.CPUMilli, req.MemMiB)
}

// GPUFits reports whether GPU g of n can take one GPU's worth of req
// ([capacity.GPUFits]).
func GPUFits(n *core.Node, g int, req *core.Request) bool { return capacity.GPUFits(n, g, req) }

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
// f.Node names), through [capacity.Take]. It re-validates everything first
// — the shape of the fit, the model, the host, every GPU — and changes
// nothing when it returns an error, so a decision made on stale state is
// refused, never half-applied.
func Apply(n *core.Node, f Fit, req *core.Request) error {
	if err := checkFit(n, f, req); err != nil {
		return err
	}
	if !ModelAllowed(n, req) {
		return fmt.Errorf("GPU model %q not among %v: %w", n.GPUModel, req.Models, ErrDoesNotFit)
	}
	return capacity.Take(n, req, f.GPUs)
}

// Remove gives back to n what Apply(n, f, req) took ([capacity.Give]):
// Apply then Remove leaves the node exactly as it was. It refuses (and
// changes nothing) when that would leave more free than the node has.
func Remove(n *core.Node, f Fit, req *core.Request) error {
	if err := checkFit(n, f, req); err != nil {
		return err
	}
	return capacity.Give(n, req, f.GPUs)
}
