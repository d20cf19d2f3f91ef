package sched

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// naiveFragmentation is the FGD measure by its definition: for each
// request shape of the mix, all of the node's free share if the shape
// cannot fit there, else the free share of the GPUs too small for it (a
// shared GPU is too small for whole-GPU work), weighted by the shape's
// count.
func naiveFragmentation(mix []reqType, n *core.Node) int64 {
	var total int64
	for _, t := range mix {
		var free, unusable int64
		fitting := 0
		for _, g := range n.GPUs {
			free += int64(g.FreeMilli)
			if g.FreeMilli < t.milli || (t.milli >= core.WholeGPU && g.Shared) {
				unusable += int64(g.FreeMilli)
			} else {
				fitting++
			}
		}
		if fitting < t.gpus {
			unusable = free
		}
		total += unusable * t.weight
	}
	return total
}

// TestFragmentationIsFGD: the live scheduler's fragmentation score is the
// one FGD score (placement.FragMeter) and equals the brute-force
// recomputation on any node the capacity module can produce.
func TestFragmentationIsFGD(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var pending []Unit
		for range rapid.IntRange(0, 20).Draw(t, "units") {
			r := core.Request{GPUs: 1, MilliPerGPU: core.Milli(rapid.IntRange(1, 10).Draw(t, "share") * 100)}
			if r.MilliPerGPU == core.WholeGPU {
				r.GPUs = rapid.SampledFrom([]int{1, 2, 4, 8, 16}).Draw(t, "gpus")
			}
			pending = append(pending, Unit{Job: &core.Job{Request: r}})
		}
		n := core.Node{LeaseID: "n", GPUModel: rapid.SampledFrom([]string{"A100", "H100"}).Draw(t, "model"), GPUMemMiB: 80_000}
		if rapid.Bool().Draw(t, "slice") {
			n.SliceMilli = core.Milli(rapid.SampledFrom([]int{250, 500}).Draw(t, "sliceMilli"))
			n.GPUs = []core.GPU{{FreeMilli: n.SliceMilli, FreeMemMiB: 80_000 * int64(n.SliceMilli) / 1000, Shared: true}}
		} else {
			for g := range rapid.IntRange(0, 8).Draw(t, "nodeGPUs") {
				n.GPUs = append(n.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: 80_000})
			}
		}
		p := NewPlacer([]core.Node{n}, nil, pending, nil)
		for range rapid.IntRange(0, 12).Draw(t, "takes") {
			r := core.Request{GPUs: 1, MilliPerGPU: core.Milli(rapid.IntRange(1, 10).Draw(t, "takeShare") * 100)}
			if len(p.nodes[0].GPUs) == 0 {
				break
			}
			g := rapid.IntRange(0, len(p.nodes[0].GPUs)-1).Draw(t, "gpu")
			if gpuFits(&p.nodes[0], g, &r) {
				apply(p.nodes, &Unit{Job: &core.Job{Request: r}}, Part{GPUs: []int{g}}, 1)
			}
			if got, want := p.fragmentation(&p.nodes[0]), naiveFragmentation(p.mix, &p.nodes[0]); got != want {
				t.Fatalf("fragmentation = %d, brute force %d; node %+v mix %+v", got, want, p.nodes[0].GPUs, p.mix)
			}
		}
	})
}
