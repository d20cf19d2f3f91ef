package placement

import (
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// fixedRand always draws 0: ties keep the first node offered.
type fixedRand struct{}

func (fixedRand) Intn(int) int { return 0 }

// genNodes draws a small cluster of empty nodes.
func genNodes(t *rapid.T) []core.Node {
	n := rapid.IntRange(1, 6).Draw(t, "nodes")
	nodes := make([]core.Node, n)
	for i := range nodes {
		g := rapid.SampledFrom([]int{0, 1, 2, 4, 8}).Draw(t, "gpus")
		cpu := rapid.Int64Range(1, 16).Draw(t, "cores") * 1000
		mem := rapid.Int64Range(1, 64).Draw(t, "gib") * 1024
		nodes[i] = core.Node{
			LeaseID: "n", GPUModel: rapid.SampledFrom([]string{"A", "B"}).Draw(t, "model"),
			CPUMilli: cpu, FreeCPUMilli: cpu, MemMiB: mem, FreeMemMiB: mem,
			GPUs: make([]core.GPU, g),
		}
		for j := range nodes[i].GPUs {
			nodes[i].GPUs[j] = core.GPU{Index: j, FreeMilli: core.WholeGPU}
		}
	}
	return nodes
}

// genRequest draws a request like openb's: host only, one share, or whole
// GPUs, sometimes constrained to a model.
func genRequest(t *rapid.T) core.Request {
	r := core.Request{CPUMilli: rapid.Int64Range(0, 6).Draw(t, "reqcpu") * 1000, MemMiB: rapid.Int64Range(0, 8).Draw(t, "reqgib") * 1024}
	switch rapid.IntRange(0, 2).Draw(t, "reqkind") {
	case 1:
		r.GPUs, r.MilliPerGPU = 1, core.Milli(rapid.IntRange(1, 9).Draw(t, "reqshare")*100)
	case 2:
		r.GPUs, r.MilliPerGPU = rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "reqgpus"), core.WholeGPU
	}
	if rapid.IntRange(0, 3).Draw(t, "reqconstrained") == 0 {
		r.Models = []string{rapid.SampledFrom([]string{"A", "B"}).Draw(t, "reqmodel")}
	}
	return r
}

// cycleRand draws 0, 1, 2, … modulo n: deterministic but not always the
// first.
type cycleRand struct{ k int }

func (c *cycleRand) Intn(n int) int {
	c.k++
	return c.k % n
}

// cloneNode is a deep copy of n.
func cloneNode(n core.Node) core.Node {
	n.GPUs = slices.Clone(n.GPUs)
	return n
}
