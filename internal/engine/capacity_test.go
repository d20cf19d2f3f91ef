package engine

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestOccupyTestsMemory: the engine's view takes a running unit's share
// through the same rule as the scheduler, memory included, so two shares
// that together want more GPU memory than the GPU has are not both
// counted as running there (the state is corrupt; the engine stops).
func TestOccupyTestsMemory(t *testing.T) {
	n := core.Node{LeaseID: "l1", GPUModel: "A100", GPUMemMiB: 80_000,
		GPUs: []core.GPU{{FreeMilli: core.WholeGPU, FreeMemMiB: 80_000}}}
	r := core.Request{GPUs: 1, MilliPerGPU: 300, MemPerGPUMiB: 60_000}
	occupy(&n, &r, []int{0})
	defer func() {
		p := recover()
		if p == nil {
			t.Fatalf("a second 60 GB share on an 80 GB GPU was taken: %+v", n.GPUs[0])
		}
		if !strings.Contains(p.(string), "l1") {
			t.Errorf("panic %q does not name the lease", p)
		}
	}()
	occupy(&n, &r, []int{0})
}
