package placement

import (
	"math"
	"slices"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// naiveFrag is the simulator's NodeGpuShareFragAmountScore, type by type,
// in counts × milli.
func naiveFrag(w Workload, model string, free []int64, cpu int64) int64 {
	var total int64
	for _, v := range free {
		total += v
	}
	var f int64
	for _, t := range w.Types {
		full := t.Count * total
		if t.MilliPerGPU == 0 || t.GPUs == 0 || !accessible(t.Models, model) {
			f += full
			continue
		}
		cnt, below := 0, int64(0)
		for _, v := range free {
			if v >= int64(t.MilliPerGPU) {
				cnt++
			} else {
				below += v
			}
		}
		if cnt >= t.GPUs && cpu >= t.CPUMilli {
			f += t.Count * below
		} else {
			f += full
		}
	}
	return f
}

func genWorkload(t *rapid.T) Workload {
	n := rapid.IntRange(0, 12).Draw(t, "types")
	var w Workload
	for i := 0; i < n; i++ {
		pt := PodType{CPUMilli: rapid.Int64Range(0, 8).Draw(t, "cpu") * 1000, Count: rapid.Int64Range(1, 50).Draw(t, "count")}
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 1:
			pt.GPUs, pt.MilliPerGPU = 1, core.Milli(rapid.IntRange(1, 10).Draw(t, "share")*100)
		case 2:
			pt.GPUs, pt.MilliPerGPU = rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus"), core.WholeGPU
		}
		if rapid.Bool().Draw(t, "constrained") {
			pt.Models = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"A", "B", "C"}), 1, 2, rapid.ID[string]).Draw(t, "models")
		}
		w.Types = append(w.Types, pt)
	}
	return w
}

func TestFragMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorkload(t)
		model := rapid.SampledFrom([]string{"A", "B", ""}).Draw(t, "model")
		free := rapid.SliceOfN(rapid.SampledFrom([]int64{0, 50, 100, 300, 500, 700, 1000}), 0, 8).Draw(t, "free")
		cpu := rapid.Int64Range(-1000, 10000).Draw(t, "cpu")
		x := newFragIndex(w)
		sorted := slices.Clone(free)
		slices.Sort(sorted)
		got := x.frag(x.groups(model), sorted, cpu)
		want := naiveFrag(w, model, free, cpu)
		if got != want {
			t.Fatalf("frag %d, naive %d (model %q free %v cpu %d workload %+v)", got, want, model, free, cpu, w)
		}
	})
}

// naiveFGDScore is the artifact's calculateGpuShareFragExtendScore.
func naiveFGDScore(w Workload, n *core.Node, req *core.Request) (int64, int) {
	free := make([]int64, len(n.GPUs))
	for g := range n.GPUs {
		free[g] = int64(n.GPUs[g].FreeMilli)
	}
	old := naiveFrag(w, n.GPUModel, free, n.FreeCPUMilli)
	total := float64(w.Total())
	q := func(newF int64) int64 {
		d := 0.0
		if total > 0 {
			d = float64(old-newF) / total
		}
		return int64(1 / (1 + math.Exp(-d/1000)) * 100)
	}
	if req.GPUs == 1 && req.MilliPerGPU < core.WholeGPU {
		best, gpu := int64(0), -1
		for g := range free {
			if free[g] >= int64(req.MilliPerGPU) {
				nf := slices.Clone(free)
				nf[g] -= int64(req.MilliPerGPU)
				s := q(naiveFrag(w, n.GPUModel, nf, n.FreeCPUMilli-req.CPUMilli))
				if gpu < 0 || s > best {
					best, gpu = s, g
				}
			}
		}
		return best, gpu
	}
	nf := slices.Clone(free)
	need := req.GPUs
	for g := range nf {
		if need > 0 && nf[g] == 1000 {
			nf[g] = 0
			need--
		}
	}
	return q(naiveFrag(w, n.GPUModel, nf, n.FreeCPUMilli-req.CPUMilli)), -1
}

func TestFGDScoreMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorkload(t)
		nodes := genNodes(t)
		p := NewFGD(w, fixedRand{})
		for step := 0; step < 20; step++ {
			req := genRequest(t)
			p.sync(nodes)
			for i := range nodes {
				n := &nodes[i]
				if !Fits(n, &req) {
					continue
				}
				share := req.GPUs == 1 && !IsWhole(&req)
				got, gg := p.score(n, &p.nodes[i], &req, share)
				want, wg := naiveFGDScore(w, n, &req)
				if got != want || int(gg) != wg {
					t.Fatalf("step %d node %d: score %d gpu %d, naive %d gpu %d; node %+v req %+v", step, i, got, gg, want, wg, *n, req)
				}
			}
			if f, ok := p.Place(nodes, &req); ok {
				if err := Apply(&nodes[f.Node], f, &req); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
