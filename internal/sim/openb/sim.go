package openb

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched/placement"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// DefaultInflation is the artifact's workload tuning ratio: pods arrive
// until their GPU request is 130% of the cluster's GPU capacity.
const DefaultInflation = 1.3

// Policies are the names NewPolicy accepts, in the order the paper lists
// the baselines, gpufleet's last.
var Policies = []string{"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "gpufleet"}

// ErrUnknownPolicy is wrapped by NewPolicy's error for a name not in
// Policies.
var ErrUnknownPolicy = errors.New("openb: unknown policy")

// NewPolicy returns the placement policy called name, measuring
// fragmentation (where it does) against w and breaking ties with rng.
func NewPolicy(name string, w placement.Workload, rng placement.Rand) (placement.Policy, error) {
	switch name {
	case "random":
		return placement.NewRandom(rng), nil
	case "dotprod":
		return placement.NewDotProd(rng), nil
	case "gpuclustering":
		return placement.NewGpuClustering(rng), nil
	case "gpupacking":
		return placement.NewGpuPacking(rng), nil
	case "bestfit":
		return placement.NewBestFit(rng), nil
	case "fgd":
		return placement.NewFGD(w, rng), nil
	case "gpufleet":
		return placement.NewGpufleet(w, rng), nil
	}
	return nil, fmt.Errorf("%q: want one of %s: %w", name, strings.Join(Policies, ", "), ErrUnknownPolicy)
}

// Scenario is a cluster and a trace, ready to replay under any policy and
// seed. It is read-only once made, so runs may share it concurrently.
type Scenario struct {
	nodes    []core.Node
	capacity int64
	// pods are the trace's requests sorted by pod name, as the artifact
	// sorts them before shuffling.
	pods     []core.Request
	names    []string
	total    int64
	workload placement.Workload
}

// NewScenario prepares nodes and pods for replay. The target workload
// FGD measures fragmentation against is the trace's typical pod types
// covering popularity percent of the pods (0: the artifact's 95).
func NewScenario(nodes []trace.OpenbNode, pods []trace.OpenbPod, popularity int) (*Scenario, error) {
	if len(nodes) == 0 {
		return nil, errors.New("openb: no nodes")
	}
	if len(pods) == 0 {
		return nil, errors.New("openb: no pods")
	}
	s := &Scenario{}
	nodes = slices.Clone(nodes)
	slices.SortStableFunc(nodes, func(a, b trace.OpenbNode) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		cn := core.Node{
			LeaseID: n.Name, GPUModel: n.Model,
			CPUMilli: n.CPUMilli, FreeCPUMilli: n.CPUMilli,
			MemMiB: n.MemMiB, FreeMemMiB: n.MemMiB,
			GPUs: make([]core.GPU, n.GPUs),
		}
		for g := range cn.GPUs {
			cn.GPUs[g] = core.GPU{Index: g, FreeMilli: core.WholeGPU}
		}
		s.nodes = append(s.nodes, cn)
		s.capacity += int64(n.GPUs) * int64(core.WholeGPU)
	}
	if s.capacity == 0 {
		return nil, errors.New("openb: the nodes have no GPUs")
	}
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b trace.OpenbPod) int { return strings.Compare(a.Name, b.Name) })
	for i := range sorted {
		r := Request(&sorted[i])
		s.pods = append(s.pods, r)
		s.names = append(s.names, sorted[i].Name)
		s.total += milli(&r)
	}
	s.workload = placement.TypicalWorkload(s.pods, popularity)
	return s, nil
}

// Request is the request an openb pod makes, as the artifact reads it: a
// pod with no GPU or no share asks for none (and then for no GPU model).
func Request(p *trace.OpenbPod) core.Request {
	r := core.Request{CPUMilli: p.CPUMilli, MemMiB: p.MemMiB}
	if p.NumGPU > 0 && p.GPUMilli > 0 {
		r.GPUs = p.NumGPU
		r.MilliPerGPU = core.Milli(min(p.GPUMilli, int64(core.WholeGPU)))
		r.Models = p.GPUSpec
	}
	return r
}

func milli(r *core.Request) int64 { return int64(r.GPUs) * int64(r.MilliPerGPU) }

// Workload is the target workload the scenario's FGD-class policies use.
func (s *Scenario) Workload() placement.Workload { return s.workload }

// CapacityMilli is the cluster's GPU capacity in milli-GPUs.
func (s *Scenario) CapacityMilli() int64 { return s.capacity }

// Arrivals is the order pods arrive in for seed and inflation, as indexes
// into the trace sorted by pod name (an index appears again for each copy
// of the pod the tuning adds), and the random source the run continues
// with. It follows the artifact: seed the source, draw once (the
// artifact's debug print), shuffle; then, while the total GPU request is
// above inflation × capacity remove a random pod, or while it is below
// append a random pod of the trace until the next one's per-GPU share
// would pass it. Inflation <= 0, or a trace that asks for no GPU, keeps
// the shuffled trace as it is.
func (s *Scenario) Arrivals(seed int64, inflation float64) ([]int, *rand.Rand) {
	rng := rand.New(rand.NewSource(seed))
	rng.Int()
	order := make([]int, len(s.pods))
	for i := range order {
		order[i] = i
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	if inflation <= 0 || s.total == 0 {
		// Without a GPU request there is nothing to tune against (the
		// artifact refuses such a trace).
		return order, rng
	}
	target := inflation * float64(s.capacity)
	total := s.total
	switch {
	case float64(total) > target:
		for float64(total) > target && len(order) > 0 {
			i := rng.Intn(len(order))
			total -= milli(&s.pods[order[i]])
			order = slices.Delete(order, i, i+1)
		}
	case float64(total) < target:
		for {
			i := rng.Intn(len(s.pods))
			r := &s.pods[i]
			// The artifact compares with the per-GPU share, not the
			// pod's total: a multi-GPU pod can overshoot the target.
			if float64(total+int64(r.MilliPerGPU)) > target {
				break
			}
			total += milli(r)
			order = append(order, i)
		}
	}
	return order, rng
}

// Result is the outcome of one replay.
type Result struct {
	// Policy, Seed and Inflation are what was run.
	Policy    string  `json:"policy"`
	Seed      int64   `json:"seed"`
	Inflation float64 `json:"inflation"`
	// CapacityGPUs is the cluster's GPU capacity.
	CapacityGPUs float64 `json:"capacity_gpus"`
	// ArrivedGPUs is the GPU request of all pods that arrived.
	ArrivedGPUs float64 `json:"arrived_gpus"`
	// AllocatedGPUs is the GPU share allocated when all have arrived.
	AllocatedGPUs float64 `json:"allocated_gpus"`
	// AllocationRatio is AllocatedGPUs / CapacityGPUs, 0..1: the paper's
	// GPU allocation ratio.
	AllocationRatio float64 `json:"allocation_ratio"`
	// UnallocatedGPUs is CapacityGPUs − AllocatedGPUs.
	UnallocatedGPUs float64 `json:"unallocated_gpus"`
	// FragGPUs is the cluster's fragmentation at the end: the free GPU
	// share the target workload could not use, in GPUs.
	FragGPUs float64 `json:"frag_gpus"`
	// Pods arrived; Placed found a node, Failed did not.
	Pods   int `json:"pods"`
	Placed int `json:"placed"`
	Failed int `json:"failed"`
	// FailedGPUs is the GPU request of the pods that failed.
	FailedGPUs float64 `json:"failed_gpus"`
	// Curve is the state after each 1% of capacity has arrived.
	Curve []Point `json:"curve,omitempty"`
}

// Point is the cluster after ArrivedPct percent of its GPU capacity has
// arrived (the artifact's buckets: arrivals whose arrived share rounds,
// half to even, to ArrivedPct).
type Point struct {
	ArrivedPct int `json:"arrived_pct"`
	// AllocationRatio is the mean allocation ratio over the bucket's
	// arrivals, as the artifact averages it.
	AllocationRatio float64 `json:"allocation_ratio"`
	// FragGPUs is the cluster's fragmentation after the bucket's last
	// arrival.
	FragGPUs float64 `json:"frag_gpus"`
}

// Option changes how Run replays.
type Option func(*runConfig)

type runConfig struct {
	randomTies bool
}

// RandomTies breaks ties between equally scored nodes uniformly at random,
// as stock Kubernetes does, instead of giving them to the first node of
// the seeded node order as the artifact's scheduler does.
func RandomTies() Option { return func(c *runConfig) { c.randomTies = true } }

// Run replays the scenario under the named policy with seed and
// inflation (see Arrivals).
//
// The artifact names each node with a random prefix (rand.Perm after the
// tuning) and its scheduler — a fork of Kubernetes 1.20 — gives a tie to
// the first node in name order; so the nodes take a seeded random order
// here and ties go to the first, unless the RandomTies option is given.
func (s *Scenario) Run(policy string, seed int64, inflation float64, opts ...Option) (Result, error) {
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	order, rng := s.Arrivals(seed, inflation)
	perm := rng.Perm(len(s.nodes))
	var tie placement.Rand
	if policy == "random" || cfg.randomTies {
		tie = rng
	}
	p, err := NewPolicy(policy, s.workload, tie)
	if err != nil {
		return Result{}, err
	}
	nodes := make([]core.Node, len(s.nodes))
	gpus := make([]core.GPU, 0, s.capacity/int64(core.WholeGPU))
	for i, n := range s.nodes {
		j := perm[i]
		nodes[j] = n
		start := len(gpus)
		gpus = append(gpus, n.GPUs...)
		nodes[j].GPUs = gpus[start:len(gpus):len(gpus)]
	}
	tracker, _ := p.(placement.Tracker)
	res := Result{Policy: policy, Seed: seed, Inflation: inflation, CapacityGPUs: gpusOf(s.capacity), Pods: len(order)}
	var arrived, allocated, failed int64
	var curve curveBuilder
	meter := placement.NewFragMeter(s.workload)
	frag := func() float64 { return clusterFrag(meter, nodes) }
	for _, idx := range order {
		r := &s.pods[idx]
		m := milli(r)
		arrived += m
		if f, ok := p.Place(nodes, r); ok {
			if err := placement.Apply(&nodes[f.Node], f, r); err != nil {
				return Result{}, fmt.Errorf("policy %s placed pod %s on node %s: %w", policy, s.names[idx], nodes[f.Node].LeaseID, err)
			}
			if tracker != nil {
				tracker.Placed(nodes, r, f)
			}
			allocated += m
			res.Placed++
		} else {
			failed += m
			res.Failed++
		}
		curve.add(arrived, allocated, s.capacity, frag)
	}
	res.Curve = curve.finish(frag)
	res.ArrivedGPUs = gpusOf(arrived)
	res.AllocatedGPUs = gpusOf(allocated)
	res.FailedGPUs = gpusOf(failed)
	res.AllocationRatio = float64(allocated) / float64(s.capacity)
	res.UnallocatedGPUs = gpusOf(s.capacity - allocated)
	res.FragGPUs = frag()
	return res, nil
}

func gpusOf(milli int64) float64 { return float64(milli) / float64(core.WholeGPU) }

// clusterFrag is the cluster's fragmentation in GPUs.
func clusterFrag(m *placement.FragMeter, nodes []core.Node) float64 {
	var f float64
	for i := range nodes {
		f += m.Frag(&nodes[i])
	}
	return f / float64(core.WholeGPU)
}

// curveBuilder averages the allocation ratio per arrival bucket.
type curveBuilder struct {
	points []Point
	bucket int
	sum    float64
	count  int
}

// add records one arrival.
func (c *curveBuilder) add(arrived, allocated, capacity int64, frag func() float64) {
	b := roundHalfEven(arrived*100, capacity)
	if c.count > 0 && b != c.bucket {
		c.flush(frag)
	}
	c.bucket = b
	c.sum += float64(allocated) / float64(capacity)
	c.count++
}

func (c *curveBuilder) flush(frag func() float64) {
	c.points = append(c.points, Point{ArrivedPct: c.bucket, AllocationRatio: c.sum / float64(c.count), FragGPUs: frag()})
	c.sum, c.count = 0, 0
}

func (c *curveBuilder) finish(frag func() float64) []Point {
	if c.count > 0 {
		c.flush(frag)
	}
	return c.points
}

// roundHalfEven is num/den rounded to the nearest integer, halves to
// even (Python's round, which the artifact's analysis uses); num, den > 0.
func roundHalfEven(num, den int64) int {
	q, r := num/den, num%den
	switch {
	case 2*r > den, 2*r == den && q%2 == 1:
		q++
	}
	return int(q)
}

// At is the allocation ratio the artifact reports at pct percent of
// capacity arrived: the bucket's mean, or else the mean of the buckets
// next to it; ok is false when there are none.
func (r *Result) At(pct int) (ratio float64, ok bool) {
	var sum float64
	var n int
	for _, p := range r.Curve {
		if p.ArrivedPct == pct {
			return p.AllocationRatio, true
		}
		if p.ArrivedPct >= pct-1 && p.ArrivedPct <= pct+1 {
			sum += p.AllocationRatio
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
