package placement

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// node builds a node of model with cpu cores, gib GiB and the given free
// shares per GPU (a GPU below 1000 is marked shared).
func node(model string, cores, gib int64, free ...core.Milli) core.Node {
	n := core.Node{LeaseID: "n", GPUModel: model, CPUMilli: cores * 1000, FreeCPUMilli: cores * 1000, MemMiB: gib * 1024, FreeMemMiB: gib * 1024}
	for i, f := range free {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, FreeMilli: f, Shared: f < core.WholeGPU})
	}
	return n
}

func share(cores int64, milli core.Milli) core.Request {
	return core.Request{GPUs: 1, MilliPerGPU: milli, CPUMilli: cores * 1000}
}

func whole(cores int64, gpus int) core.Request {
	return core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU, CPUMilli: cores * 1000}
}

func TestFilters(t *testing.T) {
	memNode := node("T4", 8, 8, core.WholeGPU, core.WholeGPU)
	memNode.GPUMemMiB = 16000
	for g := range memNode.GPUs {
		memNode.GPUs[g].FreeMemMiB = 16000
	}
	memNode.GPUs[1].FreeMemMiB = 4000 // shared, and short of memory
	memNode.GPUs[1].FreeMilli = 900
	memNode.GPUs[1].Shared = true
	tests := []struct {
		name string
		n    core.Node
		r    core.Request
		gpu  int
		want bool // GPUFits(n, gpu, r)
		fits bool // Fits(n, r)
	}{
		{"whole on empty", node("T4", 8, 8, 1000), whole(1, 1), 0, true, true},
		{"whole on shared", node("T4", 8, 8, 900), whole(1, 1), 0, false, false},
		{"whole on emptied but still marked shared", core.Node{GPUs: []core.GPU{{FreeMilli: 1000, Shared: true}}}, whole(0, 1), 0, false, false},
		{"share on empty", node("T4", 8, 8, 1000), share(1, 500), 0, true, true},
		{"share on shared with room", node("T4", 8, 8, 600), share(1, 500), 0, true, true},
		{"share exactly fills", node("T4", 8, 8, 500), share(1, 500), 0, true, true},
		{"share on shared without room", node("T4", 8, 8, 400), share(1, 500), 0, false, false},
		{"share on a whole-allocated GPU", core.Node{GPUs: []core.GPU{{FreeMilli: 0}}}, share(0, 100), 0, false, false},
		{"share memory pro rata: 1/2 of 16000 > 4000 free", memNode, share(1, 500), 1, false, true},
		{"share memory as asked", memNode, core.Request{GPUs: 1, MilliPerGPU: 500, MemPerGPUMiB: 4000}, 1, true, true},
		{"not enough CPU", node("T4", 1, 8, 1000), share(2, 500), 0, true, false},
		{"not enough memory", node("T4", 8, 1, 1000), core.Request{GPUs: 1, MilliPerGPU: 500, MemMiB: 2048}, 0, true, false},
		{"untracked host", core.Node{GPUs: []core.GPU{{FreeMilli: 1000}}}, core.Request{GPUs: 1, MilliPerGPU: 1000, CPUMilli: 1e9, MemMiB: 1e9}, 0, true, true},
		{"model not allowed", node("T4", 8, 8, 1000), core.Request{GPUs: 1, MilliPerGPU: 1000, Models: []string{"A10", "V100M16"}}, 0, true, false},
		{"model allowed", node("A10", 8, 8, 1000), core.Request{GPUs: 1, MilliPerGPU: 1000, Models: []string{"T4", "A10"}}, 0, true, true},
		{"too few free GPUs", node("G2", 96, 8, 1000, 1000, 500), whole(1, 3), 0, true, false},
		{"enough free GPUs", node("G2", 96, 8, 1000, 500, 1000, 1000), whole(1, 3), 0, true, true},
		{"no GPU asked", node("G2", 96, 8), core.Request{CPUMilli: 1000}, 0, false, true},
		{"no share asked", node("G2", 96, 8, 1000), core.Request{GPUs: 1}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.gpu < len(tt.n.GPUs) {
				if got := GPUFits(&tt.n, tt.gpu, &tt.r); got != tt.want {
					t.Errorf("GPUFits = %t, want %t", got, tt.want)
				}
			}
			if got := Fits(&tt.n, &tt.r); got != tt.fits {
				t.Errorf("Fits = %t, want %t", got, tt.fits)
			}
		})
	}
}

func TestApplyRemove(t *testing.T) {
	n := node("G2", 16, 64, 1000, 1000, 700)
	r := share(4, 300)
	if err := Apply(&n, Fit{GPUs: []int{2}}, &r); err != nil {
		t.Fatal(err)
	}
	want := node("G2", 16, 64, 1000, 1000, 400)
	want.FreeCPUMilli = 12000
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("after Apply (-want +got):\n%s", diff)
	}
	if err := Remove(&n, Fit{GPUs: []int{2}}, &r); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(node("G2", 16, 64, 1000, 1000, 700), n); diff != "" {
		t.Errorf("after Remove (-want +got):\n%s", diff)
	}

	w := whole(8, 2)
	if err := Apply(&n, Fit{GPUs: []int{0, 1}}, &w); err != nil {
		t.Fatal(err)
	}
	if n.GPUs[0].FreeMilli != 0 || n.GPUs[0].Shared || n.FreeCPUMilli != 8000 {
		t.Errorf("whole GPUs: %+v", n)
	}
}

func TestApplyRemoveErrors(t *testing.T) {
	tests := []struct {
		name   string
		remove bool
		n      core.Node
		f      Fit
		r      core.Request
		want   error
	}{
		{"too few GPUs in the fit", false, node("G2", 8, 8, 1000, 1000), Fit{GPUs: []int{0}}, whole(1, 2), ErrBadFit},
		{"GPU out of range", false, node("G2", 8, 8, 1000), Fit{GPUs: []int{3}}, whole(1, 1), ErrBadFit},
		{"GPU named twice", false, node("G2", 8, 8, 1000, 1000), Fit{GPUs: []int{1, 1}}, whole(1, 2), ErrBadFit},
		{"GPU not free", false, node("G2", 8, 8, 1000, 400), Fit{GPUs: []int{1}}, share(1, 500), ErrDoesNotFit},
		{"host full", false, node("G2", 1, 8, 1000), Fit{GPUs: []int{0}}, whole(2, 1), ErrDoesNotFit},
		{"model", false, node("G2", 8, 8, 1000), Fit{GPUs: []int{0}}, core.Request{GPUs: 1, MilliPerGPU: 1000, Models: []string{"T4"}}, ErrDoesNotFit},
		{"give back to an empty GPU", true, node("G2", 8, 8, 1000), Fit{GPUs: []int{0}}, share(0, 100), ErrNotAllocated},
		{"give back more CPU than the host has", true, node("G2", 8, 8, 800), Fit{GPUs: []int{0}}, share(1, 100), ErrNotAllocated},
		{"give back a whole GPU to a shared one", true, node("G2", 0, 8, 0, 500), Fit{GPUs: []int{1}}, whole(0, 1), ErrNotAllocated},
		// A quarter slice holds 250 milli: giving back a share to a full
		// one would leave it with more than it has.
		{"give back to a full slice", true, quarterSlice(), Fit{GPUs: []int{0}}, share(0, 100), ErrNotAllocated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneNode(tt.n)
			var err error
			if tt.remove {
				err = Remove(&tt.n, tt.f, &tt.r)
			} else {
				err = Apply(&tt.n, tt.f, &tt.r)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if diff := cmp.Diff(before, tt.n); diff != "" {
				t.Errorf("a refused change changed the node (-before +after):\n%s", diff)
			}
		})
	}
}

// applied is one fit the property test has applied and may remove.
type applied struct {
	f Fit
	r core.Request
}

// checkNode is the capacity invariant: nothing over-allocated, nothing
// free beyond capacity, a GPU shared exactly while it holds shares.
func checkNode(t *rapid.T, n *core.Node, shares []int) {
	if n.CPUMilli > 0 && (n.FreeCPUMilli < 0 || n.FreeCPUMilli > n.CPUMilli) {
		t.Fatalf("host CPU free %d of %d", n.FreeCPUMilli, n.CPUMilli)
	}
	if n.MemMiB > 0 && (n.FreeMemMiB < 0 || n.FreeMemMiB > n.MemMiB) {
		t.Fatalf("host memory free %d of %d", n.FreeMemMiB, n.MemMiB)
	}
	for g, gp := range n.GPUs {
		if gp.FreeMilli < 0 || gp.FreeMilli > core.WholeGPU || gp.FreeMemMiB < 0 || gp.FreeMemMiB > n.GPUMemMiB {
			t.Fatalf("GPU %d: %+v", g, gp)
		}
		if gp.Shared != (shares[g] > 0) {
			t.Fatalf("GPU %d shared %t with %d shares", g, gp.Shared, shares[g])
		}
	}
}

func TestApplyRemoveProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := genNodes(t)[0]
		if rapid.Bool().Draw(t, "gpu memory tracked") {
			n.GPUMemMiB = 16000
			for g := range n.GPUs {
				n.GPUs[g].FreeMemMiB = 16000
			}
		}
		start := cloneNode(n)
		shares := make([]int, len(n.GPUs))
		var live []applied
		for step := rapid.IntRange(0, 40).Draw(t, "steps"); step > 0; step-- {
			if len(live) > 0 && rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				k := rapid.IntRange(0, len(live)-1).Draw(t, "which")
				a := live[k]
				if err := Remove(&n, a.f, &a.r); err != nil {
					t.Fatalf("remove %+v: %v", a, err)
				}
				if !IsWhole(&a.r) {
					for _, g := range a.f.GPUs {
						shares[g]--
					}
				}
				live = append(live[:k], live[k+1:]...)
				checkNode(t, &n, shares)
				continue
			}
			r := genRequest(t)
			r.Models = nil
			r.MemPerGPUMiB = rapid.SampledFrom([]int64{0, 0, 2000}).Draw(t, "gpumem")
			var f Fit
			for g := range n.GPUs {
				if len(f.GPUs) < r.GPUs && GPUFits(&n, g, &r) && rapid.Bool().Draw(t, "take") {
					f.GPUs = append(f.GPUs, g)
				}
			}
			before := cloneNode(n)
			err := Apply(&n, f, &r)
			if err != nil {
				if diff := cmp.Diff(before, n); diff != "" {
					t.Fatalf("refused Apply changed the node:\n%s", diff)
				}
				if len(f.GPUs) == r.GPUs && Fits(&n, &r) && HostFits(&n, &r) {
					t.Fatalf("Apply refused a fitting placement %+v of %+v: %v", f, r, err)
				}
				continue
			}
			// Apply then Remove restores the node exactly.
			probe := cloneNode(n)
			if err := Remove(&probe, f, &r); err != nil {
				t.Fatalf("remove just applied: %v", err)
			}
			if diff := cmp.Diff(before, probe); diff != "" {
				t.Fatalf("Apply then Remove (-before +after):\n%s", diff)
			}
			if !IsWhole(&r) {
				for _, g := range f.GPUs {
					shares[g]++
				}
			}
			live = append(live, applied{f: Fit{GPUs: append([]int(nil), f.GPUs...)}, r: r})
			checkNode(t, &n, shares)
		}
		for _, a := range live {
			if err := Remove(&n, a.f, &a.r); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(start, n); diff != "" {
			t.Fatalf("after removing everything (-start +end):\n%s", diff)
		}
	})
}

// allPolicies are fresh instances of every policy.
func allPolicies(w Workload, rng Rand) []Policy {
	return []Policy{NewRandom(rng), NewDotProd(rng), NewGpuClustering(rng), NewGpuPacking(rng), NewBestFit(rng), NewFGD(w, rng), NewGpufleet(w, rng)}
}

// TestPoliciesPlaceWhatFits: every policy places a request exactly when
// some node fits it, on a node and GPUs that Apply accepts.
func TestPoliciesPlaceWhatFits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorkload(t)
		for _, p := range allPolicies(w, rapid.SampledFrom([]Rand{nil, fixedRand{}, &cycleRand{}}).Draw(t, "rng")) {
			nodes := genNodes(t)
			tr, _ := p.(Tracker)
			for step := 0; step < 30; step++ {
				r := genRequest(t)
				any := false
				for i := range nodes {
					any = any || Fits(&nodes[i], &r)
				}
				f, ok := p.Place(nodes, &r)
				if ok != any {
					t.Fatalf("%s: placed %t, but some node fits: %t", p.Name(), ok, any)
				}
				if !ok {
					continue
				}
				if err := Apply(&nodes[f.Node], f, &r); err != nil {
					t.Fatalf("%s: its fit %+v of %+v does not apply: %v", p.Name(), f, r, err)
				}
				if tr != nil {
					tr.Placed(nodes, &r, f)
				}
			}
		}
	})
}

// quarterSlice is an empty quarter-GPU slice of 80 GB: one GPU, shared,
// 250 milli and 20 GB free.
func quarterSlice() core.Node {
	return core.Node{LeaseID: "s", GPUModel: "A100", GPUMemMiB: 80_000, SliceMilli: 250,
		GPUs: []core.GPU{{FreeMilli: 250, FreeMemMiB: 20_000, Shared: true}}}
}
