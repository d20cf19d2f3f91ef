package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

var benchNow = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func benchNodes(n, gpus int) []core.Node {
	models := []string{"A100", "H100", "V100", "A10"}
	nodes := make([]core.Node, n)
	for i := range nodes {
		nodes[i] = core.Node{LeaseID: fmt.Sprintf("n%05d", i), GPUModel: models[i%len(models)], GPUMemMiB: 81920}
		for g := 0; g < gpus; g++ {
			nodes[i].GPUs = append(nodes[i].GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: 81920})
		}
	}
	return nodes
}

// benchJobs draws a mix like openb's: mostly single GPUs, many of them
// fractional, a few 2/4/8-GPU gangs, across teams and tiers.
func benchJobs(n, teams int, seed uint64) []Unit {
	rng := rand.New(rand.NewPCG(seed, 1))
	units := make([]Unit, n)
	tiers := []core.Tier{core.TierCore, core.TierRegular, core.TierOffline}
	for i := range units {
		r := core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}
		switch x := rng.IntN(100); {
		case x < 40:
			r.MilliPerGPU = core.Milli(100 * (1 + rng.IntN(9)))
		case x < 90:
		case x < 95:
			r.GPUs = 2
		case x < 98:
			r.GPUs = 4
		default:
			r.GPUs = 8
		}
		units[i] = Unit{Job: &core.Job{ID: fmt.Sprintf("j%06d", i), Team: fmt.Sprintf("t%04d", rng.IntN(teams)), Tier: tiers[rng.IntN(3)],
			Request: r, Submit: benchNow.Add(-time.Duration(rng.IntN(86400)) * time.Second), EstDuration: time.Duration(1+rng.IntN(10)) * time.Hour}}
	}
	return units
}

func placements(d Decisions) int { return len(d.Placements) }

// BenchmarkPlacement: 5,000 nodes × 8 GPUs and 50,000 pending units, one
// full Schedule pass per op. Reports placements per second.
func BenchmarkPlacement(b *testing.B) {
	st := &State{Now: benchNow, Nodes: benchNodes(5000, 8), Pending: benchJobs(50000, 200, 1)}
	var placed int
	start := time.Now()
	for b.Loop() {
		placed += placements(Schedule(st, Config{NoPreemption: true, NoBackfill: true}))
	}
	b.ReportMetric(float64(placed)/time.Since(start).Seconds(), "placements/s")
}

// kubeStyle is the baseline: for each unit in queue order, filter every
// node, score every feasible node, take the best (kube-scheduler's
// framework without its sampling).
func kubeStyle(st *State) int {
	p := NewPlacer(st.Nodes, st.NodeCost, st.Pending, nil)
	placed := 0
	for i := range st.Pending {
		u := st.Pending[i]
		r := &u.Job.Request
		best, bestKey := -1, [5]int64{}
		var bestGPUs []int
		for n := range p.nodes {
			gpus := p.fitOn(n, r)
			if gpus == nil {
				continue
			}
			key := p.rank(n, gpus, r)
			c, bc := cand{node: n, key: key}, cand{node: best, key: bestKey}
			if best < 0 || less(&c, &bc) {
				best, bestKey, bestGPUs = n, key, gpus
			}
		}
		if best >= 0 {
			p.place(&u, []Part{{Node: best, GPUs: bestGPUs}})
			placed++
		}
	}
	return placed
}

// BenchmarkPlacementKubeStyle is the same workload through kubeStyle.
func BenchmarkPlacementKubeStyle(b *testing.B) {
	st := &State{Now: benchNow, Nodes: benchNodes(5000, 8), Pending: benchJobs(50000, 200, 1)}
	var placed int
	start := time.Now()
	for b.Loop() {
		placed += kubeStyle(st)
	}
	b.ReportMetric(float64(placed)/time.Since(start).Seconds(), "placements/s")
}

// BenchmarkPreemption: 5,000 full nodes, each running 4 offline
// interruptible 2-GPU units; every pending core unit needs a preemption.
// Reports decisions (a placement with its victims) per second.
func BenchmarkPreemption(b *testing.B) {
	nodes := benchNodes(5000, 8)
	var running []Allocation
	for n := range nodes {
		for k := 0; k < 4; k++ {
			u := Unit{Job: &core.Job{ID: fmt.Sprintf("off-%d-%d", n, k), Team: "batch", Tier: core.TierOffline, Interruptible: true,
				Request: core.Request{GPUs: 2, MilliPerGPU: core.WholeGPU}}}
			a := Allocation{Unit: u, Parts: []Part{{Node: n, GPUs: []int{2 * k, 2*k + 1}}}, Start: benchNow.Add(-time.Duration(1+(n*7+k*13)%300) * time.Minute)}
			apply(nodes, &a.Unit, a.Parts[0], 1)
			running = append(running, a)
		}
	}
	var pending []Unit
	for i := 0; i < 2000; i++ {
		pending = append(pending, Unit{Job: &core.Job{ID: fmt.Sprintf("core-%d", i), Team: "ml", Tier: core.TierCore, Request: core.Request{GPUs: 2, MilliPerGPU: core.WholeGPU}, Submit: benchNow}})
	}
	st := &State{Now: benchNow, Nodes: nodes, Running: running, Pending: pending}
	var decided int
	start := time.Now()
	for b.Loop() {
		d := Schedule(st, Config{NoBackfill: true})
		decided += len(d.Placements)
	}
	b.ReportMetric(float64(decided)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkAdmission: 2,000 team queues in 20 cohorts with quotas and
// 60,000 pending fractional units. Reports admissions per second.
func BenchmarkAdmission(b *testing.B) {
	nodes := benchNodes(2000, 8)
	for i := range nodes {
		nodes[i].GPUModel = "A100"
	}
	var teams []core.Team
	for t := 0; t < 2000; t++ {
		teams = append(teams, core.Team{ID: fmt.Sprintf("t%04d", t), Cohort: fmt.Sprintf("c%02d", t%20), Weight: 1,
			Quotas: []core.Quota{{GPUClass: "A100", Guaranteed: 8000, BorrowLimit: 4000, LendLimit: -1}}})
	}
	pending := benchJobs(60000, 2000, 2)
	for _, u := range pending {
		u.Job.Request = core.Request{GPUs: 1, MilliPerGPU: 250}
	}
	st := &State{Now: benchNow, Nodes: nodes, Teams: teams, Pending: pending}
	var admitted int
	start := time.Now()
	for b.Loop() {
		admitted += len(Schedule(st, Config{NoPreemption: true, NoBackfill: true}).Placements)
	}
	b.ReportMetric(float64(admitted)/time.Since(start).Seconds(), "admissions/s")
}
