package capacity

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// node builds an empty node of gpus GPUs of memMiB each; slice > 0 makes
// each GPU a slice of that share.
func node(gpus int, memMiB int64, slice core.Milli, cpu, mem int64) core.Node {
	n := core.Node{LeaseID: "n", GPUModel: "A100", GPUMemMiB: memMiB, SliceMilli: slice,
		CPUMilli: cpu, FreeCPUMilli: cpu, MemMiB: mem, FreeMemMiB: mem}
	for g := 0; g < gpus; g++ {
		n.GPUs = append(n.GPUs, core.GPU{Index: g, FreeMilli: GPUMilli(&n), FreeMemMiB: GPUMemCap(&n), Shared: slice > 0})
	}
	return n
}

func clone(n core.Node) core.Node {
	n.GPUs = append([]core.GPU(nil), n.GPUs...)
	return n
}

func TestGPUMem(t *testing.T) {
	n := node(1, 80_000, 0, 0, 0)
	for _, tc := range []struct {
		name string
		r    core.Request
		want int64
	}{
		{"whole GPU takes all its memory", core.Request{GPUs: 1, MilliPerGPU: 1000, MemPerGPUMiB: 10}, 80_000},
		{"share that says", core.Request{GPUs: 1, MilliPerGPU: 250, MemPerGPUMiB: 30_000}, 30_000},
		{"share that does not say takes its share", core.Request{GPUs: 1, MilliPerGPU: 250}, 20_000},
	} {
		if got := GPUMem(&n, &tc.r); got != tc.want {
			t.Errorf("%s: GPUMem = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTakeRefusesHostAndMemory: what the engine's copy never tested — a
// share whose memory is not free, a host without the CPU — is refused
// and leaves the node as it was.
func TestTakeRefusesHostAndMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    core.Node
		r    core.Request
		gpus []int
		want error
	}{
		{"memory of a share", node(1, 80_000, 0, 0, 0), core.Request{GPUs: 1, MilliPerGPU: 100, MemPerGPUMiB: 90_000}, []int{0}, ErrDoesNotFit},
		{"host CPU", node(1, 80_000, 0, 500, 0), core.Request{GPUs: 1, MilliPerGPU: 1000, CPUMilli: 600}, []int{0}, ErrDoesNotFit},
		{"whole GPU on a slice", node(1, 80_000, 250, 0, 0), core.Request{GPUs: 1, MilliPerGPU: 1000}, []int{0}, ErrDoesNotFit},
		{"GPU out of range", node(1, 80_000, 0, 0, 0), core.Request{GPUs: 1, MilliPerGPU: 1000}, []int{1}, ErrBadGPUs},
		{"GPU twice", node(2, 80_000, 0, 0, 0), core.Request{GPUs: 2, MilliPerGPU: 500}, []int{1, 1}, ErrBadGPUs},
	} {
		before := clone(tc.n)
		if err := Take(&tc.n, &tc.r, tc.gpus); !errors.Is(err, tc.want) {
			t.Errorf("%s: Take = %v, want %v", tc.name, err, tc.want)
		}
		if d := cmp.Diff(before, tc.n); d != "" {
			t.Errorf("%s: a refused Take changed the node (-before +after):\n%s", tc.name, d)
		}
	}
}

// TestTakeGiveProperty: any sequence of takes and gives keeps every GPU
// and the host within capacity, a GPU is Shared exactly while it holds a
// share (or is a slice), free capacity is capacity less what the live
// takes hold, and giving back the takes in any order restores the node
// exactly.
func TestTakeGiveProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := rapid.IntRange(1, 8).Draw(t, "gpus")
		slice := core.Milli(rapid.SampledFrom([]int{0, 0, 250, 500}).Draw(t, "slice"))
		if slice > 0 {
			gpus = 1
		}
		n := node(gpus, rapid.Int64Range(1, 100_000).Draw(t, "gpuMem"), slice,
			rapid.Int64Range(0, 16_000).Draw(t, "cpu"), rapid.Int64Range(0, 64_000).Draw(t, "mem"))
		empty := clone(n)
		var live []take
		for range rapid.IntRange(0, 60).Draw(t, "steps") {
			if len(live) > 0 && rapid.Bool().Draw(t, "give") {
				i := rapid.IntRange(0, len(live)-1).Draw(t, "which")
				h := live[i]
				before := clone(n)
				if err := Give(&n, &h.r, h.gpus); err != nil {
					t.Fatalf("Give of a live take %+v on %v: %v", h.r, h.gpus, err)
				}
				if err := Take(&n, &h.r, h.gpus); err != nil {
					t.Fatalf("Take right after its Give %+v: %v", h.r, err)
				}
				if d := cmp.Diff(before, n); d != "" {
					t.Fatalf("Give then Take did not restore the node (-before +after):\n%s", d)
				}
				if err := Give(&n, &h.r, h.gpus); err != nil {
					t.Fatal(err)
				}
				live = append(live[:i], live[i+1:]...)
			} else {
				k := rapid.IntRange(0, len(n.GPUs)).Draw(t, "k")
				r := core.Request{GPUs: k, MilliPerGPU: core.Milli(rapid.IntRange(1, 1000).Draw(t, "milli")),
					CPUMilli: rapid.Int64Range(0, 4000).Draw(t, "reqCPU"), MemMiB: rapid.Int64Range(0, 16_000).Draw(t, "reqMem")}
				if rapid.Bool().Draw(t, "saysMem") {
					r.MemPerGPUMiB = rapid.Int64Range(1, 100_000).Draw(t, "memPerGPU")
				}
				idx := rapid.Permutation(indexes(len(n.GPUs))).Draw(t, "perm")[:k]
				before := clone(n)
				if err := Take(&n, &r, idx); err != nil {
					if d := cmp.Diff(before, n); d != "" {
						t.Fatalf("a refused Take changed the node:\n%s", d)
					}
					continue
				}
				after := clone(n)
				if err := Give(&n, &r, idx); err != nil {
					t.Fatalf("Give right after Take: %v", err)
				}
				if d := cmp.Diff(before, n); d != "" {
					t.Fatalf("Take then Give did not restore the node (-before +after):\n%s", d)
				}
				n = after
				live = append(live, take{r, idx})
			}
			check(t, &n, live)
		}
		for i := len(live) - 1; i >= 0; i-- {
			if err := Give(&n, &live[i].r, live[i].gpus); err != nil {
				t.Fatalf("final Give: %v", err)
			}
		}
		if d := cmp.Diff(empty, n); d != "" {
			t.Fatalf("giving back every take did not empty the node (-empty +got):\n%s", d)
		}
	})
}

// take is one Take that has not been given back.
type take struct {
	r    core.Request
	gpus []int
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// check recomputes n's free capacity from the live takes by brute force
// and compares it with what Take and Give keep.
func check(t *rapid.T, n *core.Node, live []take) {
	milli := make([]core.Milli, len(n.GPUs))
	mem := make([]int64, len(n.GPUs))
	shares := make([]int, len(n.GPUs))
	var cpu, hmem int64
	for i := range live {
		h := &live[i]
		for _, g := range h.gpus {
			milli[g] += h.r.MilliPerGPU
			mem[g] += GPUMem(n, &h.r)
			if h.r.MilliPerGPU < core.WholeGPU {
				shares[g]++
			}
		}
		c, m := HostShare(&h.r, len(h.gpus))
		cpu, hmem = cpu+c, hmem+m
	}
	for g := range n.GPUs {
		gp := n.GPUs[g]
		if gp.FreeMilli < 0 || gp.FreeMilli > GPUMilli(n) || gp.FreeMemMiB < 0 || gp.FreeMemMiB > GPUMemCap(n) {
			t.Fatalf("GPU %d over-allocated or over-freed: %+v", g, gp)
		}
		if gp.FreeMilli != GPUMilli(n)-milli[g] || gp.FreeMemMiB != GPUMemCap(n)-mem[g] {
			t.Fatalf("GPU %d free %d milli %d MiB, want %d and %d", g, gp.FreeMilli, gp.FreeMemMiB, GPUMilli(n)-milli[g], GPUMemCap(n)-mem[g])
		}
		if want := shares[g] > 0 || n.SliceMilli > 0; gp.Shared != want {
			t.Fatalf("GPU %d Shared %t with %d shares on it", g, gp.Shared, shares[g])
		}
	}
	if n.CPUMilli > 0 && n.FreeCPUMilli != n.CPUMilli-cpu || n.MemMiB > 0 && n.FreeMemMiB != n.MemMiB-hmem {
		t.Fatalf("host free %d milli-CPU %d MiB, want %d and %d", n.FreeCPUMilli, n.FreeMemMiB, n.CPUMilli-cpu, n.MemMiB-hmem)
	}
	if n.FreeCPUMilli < 0 || n.FreeMemMiB < 0 {
		t.Fatalf("host over-allocated: %d milli-CPU %d MiB free", n.FreeCPUMilli, n.FreeMemMiB)
	}
}
