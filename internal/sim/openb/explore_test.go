package openb

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched/placement"
	"github.com/gpufleet/gpufleet/internal/trace"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	dir := "../../../../shared/data/alibaba-openb-gpu-sharing/"
	nodes, err := trace.LoadOpenbNodes(dir + "openb_node_list_gpu_node.csv")
	if err != nil {
		t.Fatal(err)
	}
	pf := os.Getenv("PODS")
	if pf == "" {
		pf = "default"
	}
	pods, err := trace.LoadOpenbPods(dir + "openb_pod_list_" + pf + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScenario(nodes, pods, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("typical types %d", len(s.Workload().Types))
	seeds := []int64{42}
	if v := os.Getenv("SEEDS"); v != "" {
		seeds = nil
		for _, x := range strings.Split(v, ",") {
			n, _ := strconv.Atoi(x)
			seeds = append(seeds, int64(n))
		}
	}
	pols := strings.Split(os.Getenv("EXPLORE"), ",")
	if os.Getenv("SWEEP") != "" {
		for _, p := range pols {
			res := make([]float64, len(seeds))
			var wg sync.WaitGroup
			sem := make(chan bool, 2)
			for k, seed := range seeds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- true
					r, err := s.Run(p, seed, 1.3)
					<-sem
					if err != nil {
						t.Error(err)
					}
					res[k] = r.AllocationRatio * 100
				}()
			}
			wg.Wait()
			var sum float64
			var b strings.Builder
			for _, v := range res {
				sum += v
				b.WriteString(strconv.FormatFloat(v, 'f', 2, 64) + " ")
			}
			t.Logf("%-14s mean %.2f  %s", p, sum/float64(len(res)), b.String())
		}
		return
	}
	for _, p := range pols {
		var sum float64
		for _, seed := range seeds {
			start := time.Now()
			r, err := s.Run(p, seed, 1.3)
			if err != nil {
				t.Fatal(err)
			}
			sum += r.AllocationRatio
			at, _ := r.At(130)
			t.Logf("%s seed %d: alloc %.4f at130 %.4f unalloc %.1f placed %d failed %d frag %.1f pods %d arrived %.1f (%v) curve0..3 %v", p, seed, r.AllocationRatio, at, r.UnallocatedGPUs, r.Placed, r.Failed, r.FragGPUs, r.Pods, r.ArrivedGPUs, time.Since(start), r.Curve[:4])
		}
		t.Logf("%s mean %.4f", p, sum/float64(len(seeds)))
	}
}

func TestExploreCurve(t *testing.T) {
	if os.Getenv("CURVE") == "" {
		t.Skip()
	}
	dir := "../../../../shared/data/alibaba-openb-gpu-sharing/"
	nodes, _ := trace.LoadOpenbNodes(dir + "openb_node_list_gpu_node.csv")
	pods, _ := trace.LoadOpenbPods(dir + "openb_pod_list_default.csv")
	s, _ := NewScenario(nodes, pods, 0)
	seed, _ := strconv.Atoi(os.Getenv("SEED"))
	r, _ := s.Run(os.Getenv("CURVE"), int64(seed), 1.3)
	var b strings.Builder
	for _, p := range r.Curve {
		b.WriteString(strconv.FormatFloat(p.AllocationRatio*100, 'f', 2, 64) + ",")
	}
	t.Log(b.String())
}

func TestExploreDiag(t *testing.T) {
	if os.Getenv("DIAG") == "" {
		t.Skip()
	}
	dir := "../../../../shared/data/alibaba-openb-gpu-sharing/"
	nodes, _ := trace.LoadOpenbNodes(dir + "openb_node_list_gpu_node.csv")
	pods, _ := trace.LoadOpenbPods(dir + "openb_pod_list_default.csv")
	s, _ := NewScenario(nodes, pods, 0)
	order, rng := s.Arrivals(42, 1.3)
	perm := rng.Perm(len(s.nodes))
	p, _ := NewPolicy(os.Getenv("DIAG"), s.workload, nil)
	ns := make([]core.Node, len(s.nodes))
	for i, n := range s.nodes {
		ns[perm[i]] = n
		ns[perm[i]].GPUs = append([]core.GPU(nil), n.GPUs...)
	}
	tr, _ := p.(placement.Tracker)
	fails := map[string]int{}
	for _, idx := range order {
		r := &s.pods[idx]
		if f, ok := p.Place(ns, r); ok {
			placement.Apply(&ns[f.Node], f, r)
			if tr != nil {
				tr.Placed(ns, r, f)
			}
		} else {
			k := strconv.Itoa(r.GPUs) + "x" + strconv.Itoa(int(r.MilliPerGPU))
			fails[k]++
		}
	}
	t.Log(fails)
	// free GPU by node: how much free gpu on nodes with little cpu
	var freeGPU, lowCPU, lowMem, both, partial int64
	for _, n := range ns {
		fm := int64(n.FreeMilli())
		freeGPU += fm
		c := n.FreeCPUMilli < 3152
		m := n.FreeMemMiB < 16384
		switch {
		case c && m:
			both += fm
		case c:
			lowCPU += fm
		case m:
			lowMem += fm
		default:
			partial += fm
		}
	}
	t.Logf("free gpu %d: cpu<3.1c %d, mem<16G %d, both %d, neither %d", freeGPU, lowCPU, lowMem, both, partial)
	hist := map[int64]int{}
	bym := map[string]int64{}
	for _, n := range ns {
		for _, g := range n.GPUs {
			if g.FreeMilli > 0 {
				hist[int64(g.FreeMilli)/100*100]++
				bym[n.GPUModel] += int64(g.FreeMilli)
			}
		}
	}
	t.Log(hist, bym)
}
