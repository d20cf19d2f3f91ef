package placement

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// TestCachedMatchesFresh: a policy that has kept state over many
// placements — and over changes it did not make — decides exactly as a
// fresh one does on the same nodes.
func TestCachedMatchesFresh(t *testing.T) {
	makers := map[string]func(Workload) Policy{
		"fgd":      func(w Workload) Policy { return NewFGD(w, nil) },
		"gpufleet": func(w Workload) Policy { return NewGpufleet(w, nil) },
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				w := genWorkload(t)
				nodes := genNodes(t)
				kept := mk(w)
				var live []applied
				for step := 0; step < 40; step++ {
					if len(live) > 0 && rapid.IntRange(0, 3).Draw(t, "remove") == 0 {
						k := rapid.IntRange(0, len(live)-1).Draw(t, "which")
						a := live[k]
						if err := Remove(&nodes[a.f.Node], a.f, &a.r); err != nil {
							t.Fatal(err)
						}
						live = append(live[:k], live[k+1:]...)
						continue
					}
					r := genRequest(t)
					got, gok := kept.Place(nodes, &r)
					got.GPUs = slices.Clone(got.GPUs)
					want, wok := mk(w).Place(nodes, &r)
					if gok != wok || (gok && !cmp.Equal(got, want, cmpopts.EquateEmpty())) {
						t.Fatalf("step %d: kept policy placed %+v (%t), fresh %+v (%t)", step, got, gok, want, wok)
					}
					if gok {
						if err := Apply(&nodes[got.Node], got, &r); err != nil {
							t.Fatal(err)
						}
						live = append(live, applied{f: got, r: r})
					}
				}
			})
		})
	}
}

func TestGpufleetKeepsCPUForGPUs(t *testing.T) {
	// The workload's GPU pods need 12 cores per GPU. A CPU-only pod ties
	// on fragmentation everywhere; FGD gives it to the first node, whose
	// 8 GPUs need all 96 of its cores, and so strands one; gpufleet puts
	// it on the node with CPU to spare.
	w := Workload{Types: []PodType{
		{CPUMilli: 12000, GPUs: 1, MilliPerGPU: core.WholeGPU, Count: 10},
		{CPUMilli: 16000, Count: 2},
	}}
	nodes := []core.Node{
		node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000),
		node("T4", 104, 512, 1000, 1000),
	}
	r := core.Request{CPUMilli: 16000}
	if f, _ := NewFGD(w, nil).Place(nodes, &r); f.Node != 0 {
		t.Errorf("fgd: node %d, want 0 (first of the tie)", f.Node)
	}
	if f, _ := NewGpufleet(w, nil).Place(nodes, &r); f.Node != 1 {
		t.Errorf("gpufleet: node %d, want 1 (CPU to spare)", f.Node)
	}
}

func TestFGDShareGPU(t *testing.T) {
	// Shares of 500 are the whole workload. A 500 share on the GPU with
	// 500 left fills it (no fragment); on an empty one it leaves 500, still
	// usable: the same fragmentation, so FGD takes the first (GPU 0) and
	// gpufleet the best fit (GPU 1).
	w := Workload{Types: []PodType{{CPUMilli: 1000, GPUs: 1, MilliPerGPU: 500, Count: 1}}}
	nodes := []core.Node{node("T4", 8, 8, 1000, 500)}
	r := share(1, 500)
	if f, _ := NewFGD(w, nil).Place(nodes, &r); !cmp.Equal(f.GPUs, []int{0}) {
		t.Errorf("fgd: GPUs %v, want [0]", f.GPUs)
	}
	if f, _ := NewGpufleet(w, nil).Place(nodes, &r); !cmp.Equal(f.GPUs, []int{1}) {
		t.Errorf("gpufleet: GPUs %v, want [1]", f.GPUs)
	}
	// Against shares of 700, the GPU with 500 left is a fragment already.
	// A 300 share there shrinks the fragment to 200; on the empty GPU it
	// leaves 700 usable and the fragment as it was. Both take GPU 1.
	w = Workload{Types: []PodType{{CPUMilli: 1000, GPUs: 1, MilliPerGPU: 700, Count: 1}}}
	r = share(1, 300)
	for _, p := range []Policy{NewFGD(w, nil), NewGpufleet(w, nil)} {
		if f, _ := p.Place(nodes, &r); !cmp.Equal(f.GPUs, []int{1}) {
			t.Errorf("%s: GPUs %v, want [1]", p.Name(), f.GPUs)
		}
	}
}

func TestFragMeter(t *testing.T) {
	// Shares of 700 (count 3) and CPU-only pods (count 1): a node with
	// GPUs at 1000 and 500 free. For the 700s the 500 is a fragment; for
	// the CPU pods all 1500 is. (3·500 + 1·1500) / 4 = 750.
	w := Workload{Types: []PodType{
		{CPUMilli: 1000, GPUs: 1, MilliPerGPU: 700, Count: 3},
		{CPUMilli: 1000, Count: 1},
	}}
	n := node("T4", 8, 8, 1000, 500)
	m := NewFragMeter(w)
	if got := m.Frag(&n); got != 750 {
		t.Errorf("frag %v, want 750", got)
	}
	// Without CPU for the 700s, all of it: 1500.
	n.FreeCPUMilli = 500
	if got := m.Frag(&n); got != 1500 {
		t.Errorf("frag without CPU %v, want 1500", got)
	}
	if got := NewFragMeter(Workload{}).Frag(&n); got != 0 {
		t.Errorf("empty workload: %v, want 0", got)
	}
}

func TestWithChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		src := rapid.SliceOfN(rapid.Int64Range(0, 1000), 1, 8).Draw(t, "src")
		slices.Sort(src)
		old := rapid.SampledFrom(src).Draw(t, "old")
		nw := rapid.Int64Range(0, old).Draw(t, "new")
		got := withChange(nil, src, old, nw)
		want := slices.Clone(src)
		want[slices.Index(want, old)] = nw
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("withChange(%v, %d→%d) = %v, want %v", src, old, nw, got, want)
		}
	})
}

// cluster is n G2-like nodes with a mix of free shares, for benchmarks.
func cluster(n int) []core.Node {
	nodes := make([]core.Node, n)
	for i := range nodes {
		nodes[i] = node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
		for g := 0; g < i%8; g++ {
			nodes[i].GPUs[g].FreeMilli = core.Milli(1000 - 100*(g+1))
			nodes[i].GPUs[g].Shared = true
		}
		nodes[i].FreeCPUMilli -= int64(i%7) * 8000
	}
	return nodes
}

func benchWorkload() Workload {
	return Workload{Types: []PodType{
		{CPUMilli: 3152, GPUs: 1, MilliPerGPU: 810, Count: 1047},
		{CPUMilli: 11300, GPUs: 1, MilliPerGPU: 1000, Count: 874},
		{CPUMilli: 11908, GPUs: 1, MilliPerGPU: 470, Count: 388},
		{CPUMilli: 4000, GPUs: 1, MilliPerGPU: 230, Count: 122},
		{CPUMilli: 88000, GPUs: 8, MilliPerGPU: 1000, Count: 44},
		{CPUMilli: 6000, Count: 1088},
	}}
}

// TestPlaceAllocates nothing once the policy has seen the nodes and the
// request type.
func TestPlaceAllocatesNothing(t *testing.T) {
	nodes := cluster(64)
	reqs := []core.Request{share(3, 810), whole(11, 1), {CPUMilli: 6000}}
	for _, p := range allPolicies(benchWorkload(), nil) {
		for i := range reqs {
			p.Place(nodes, &reqs[i])
		}
		allocs := testing.AllocsPerRun(20, func() {
			for i := range reqs {
				p.Place(nodes, &reqs[i])
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Place", p.Name(), allocs)
		}
	}
}

// BenchmarkPlace is one decision over 1,213 nodes (openb's GPU nodes),
// with a node changed between decisions as a placement would.
func BenchmarkPlace(b *testing.B) {
	for _, p := range allPolicies(benchWorkload(), nil) {
		b.Run(p.Name(), func(b *testing.B) {
			nodes := cluster(1213)
			reqs := []core.Request{share(3, 810), whole(11, 1), share(12, 470), {CPUMilli: 6000}}
			i := 0
			for b.Loop() {
				r := &reqs[i%len(reqs)]
				n := &nodes[i%len(nodes)]
				n.FreeCPUMilli ^= 1000 // a change elsewhere, as after a placement
				p.Place(nodes, r)
				i++
			}
		})
	}
}

func BenchmarkApplyRemove(b *testing.B) {
	n := node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
	r := share(4, 300)
	f := Fit{GPUs: []int{3}}
	for b.Loop() {
		if err := Apply(&n, f, &r); err != nil {
			b.Fatal(err)
		}
		if err := Remove(&n, f, &r); err != nil {
			b.Fatal(err)
		}
	}
}
