package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sim/openb"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// newSimCmd returns "gpufleet sim", the simulator. Each kind of
// experiment gets a subcommand: "openb" (GPU-sharing placement on the
// Alibaba openb trace, as in the FGD paper); trace replay with the fleet
// and billing will join it.
func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate: replay traces through the scheduler's policies",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newSimOpenbCmd())
	return cmd
}

// The default inputs: the shared copy of the openb trace, from the
// repository root. The artifact schedules on the GPU nodes only.
const (
	openbDataDir      = "../shared/data/alibaba-openb-gpu-sharing"
	defaultOpenbNodes = openbDataDir + "/openb_node_list_gpu_node.csv"
	defaultOpenbPods  = openbDataDir + "/openb_pod_list_default.csv"
	// maxSeeds bounds --seeds.
	maxSeeds = 1000
)

// openbFlags are the flags of "gpufleet sim openb".
type openbFlags struct {
	nodes, pods string
	policy      string
	seed        int64
	seeds       string
	inflation   float64
	popularity  int
	workers     int
	ties        string
	curve       bool
	json        bool
}

func newSimOpenbCmd() *cobra.Command {
	var f openbFlags
	cmd := &cobra.Command{
		Use:   "openb [--policy NAME|all] [--seeds 42-51] [--inflation 1.3] [--nodes FILE] [--pods FILE]",
		Short: "Replay the openb GPU-sharing trace and measure GPU allocation (the FGD paper's experiment)",
		Long: `Replay the Alibaba openb GPU-sharing trace the way the FGD artifact
(hkust-adsl/kubernetes-scheduler-simulator) does: the pods, shuffled with
the seed, are pruned or topped up with random copies until they ask for
--inflation × the cluster's GPU capacity, and arrive in that order, never
leaving; a pod that fits nowhere stays unallocated. Reported per policy
and seed, and as the mean over seeds: the GPU allocation ratio when all
have arrived, the GPUs left unallocated, the fragmentation (free GPU share
the trace's typical pods could not use), pods placed and failed.

Policies: ` + strings.Join(openb.Policies, ", ") + `, or all.`,
		Example: `  gpufleet sim openb --policy all --seeds 42-51
  gpufleet sim openb --policy fgd,gpufleet --seeds 42-46 --pods ../shared/data/alibaba-openb-gpu-sharing/openb_pod_list_gpushare40.csv
  gpufleet sim openb --policy gpufleet --seed 7 --json --curve`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSimOpenb(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", defaultOpenbNodes, "openb node list (CSV: sn,cpu_milli,memory_mib,gpu,model)")
	fl.StringVar(&f.pods, "pods", defaultOpenbPods, "openb pod list (CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli,…)")
	fl.StringVar(&f.policy, "policy", "gpufleet", "placement policy, a comma-separated list, or all: "+strings.Join(openb.Policies, ", "))
	fl.Int64Var(&f.seed, "seed", 42, "random seed of the shuffle, the tuning and the node order")
	fl.StringVar(&f.seeds, "seeds", "", "several seeds: a range such as 42-51, or a list such as 1,5,7-9 (overrides --seed)")
	fl.Float64Var(&f.inflation, "inflation", openb.DefaultInflation, "total GPU request of the arrivals as a multiple of the cluster's GPU capacity (0: the trace as it is)")
	fl.IntVar(&f.popularity, "popularity", 95, "percent of the pods the typical pod types (FGD's target workload) must cover")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "replays run at once")
	fl.StringVar(&f.ties, "ties", "first", "ties between equally scored nodes: first (of the seeded node order, as the artifact's scheduler) or random (as stock Kubernetes)")
	fl.BoolVar(&f.curve, "curve", false, "with --json: include the allocation and fragmentation after each 1% of capacity arrived")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON")
	return cmd
}

// openbReport is the JSON output of "sim openb".
type openbReport struct {
	Nodes        string         `json:"nodes"`
	Pods         string         `json:"pods"`
	NodeCount    int            `json:"node_count"`
	PodCount     int            `json:"pod_count"`
	CapacityGPUs float64        `json:"capacity_gpus"`
	Inflation    float64        `json:"inflation"`
	Ties         string         `json:"ties"`
	Seeds        []int64        `json:"seeds"`
	Policies     []policyReport `json:"policies"`
}

// policyReport is one policy's runs and their means.
type policyReport struct {
	Policy string `json:"policy"`
	// The means over the seeds.
	AllocationRatio float64 `json:"allocation_ratio"`
	UnallocatedGPUs float64 `json:"unallocated_gpus"`
	FragGPUs        float64 `json:"frag_gpus"`
	Placed          float64 `json:"placed"`
	Failed          float64 `json:"failed"`
	// StddevAllocationRatio is the sample standard deviation over seeds
	// (0 for one seed).
	StddevAllocationRatio float64        `json:"stddev_allocation_ratio"`
	Runs                  []openb.Result `json:"runs"`
}

// request turns the flags into the policies and seeds to run; every
// problem is a usage error naming its flag.
func (f openbFlags) request() (policies []string, seeds []int64, err error) {
	bad := func(flag, value, allowed string) error {
		return usageError{&core.FieldError{Field: "--" + flag, Value: value, Allowed: allowed}}
	}
	for _, p := range strings.Split(f.policy, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		switch {
		case p == "all":
			policies = append(policies, openb.Policies...)
		case slices.Contains(openb.Policies, p):
			policies = append(policies, p)
		default:
			return nil, nil, bad("policy", p, "one of "+strings.Join(openb.Policies, ", ")+", or all")
		}
	}
	policies = dedupe(policies)
	seeds = []int64{f.seed}
	if f.seeds != "" {
		if seeds, err = parseSeeds(f.seeds); err != nil {
			return nil, nil, bad("seeds", f.seeds, err.Error())
		}
	}
	if math.IsNaN(f.inflation) || f.inflation < 0 || f.inflation > 10 {
		return nil, nil, bad("inflation", strconv.FormatFloat(f.inflation, 'g', -1, 64), "a ratio 0..10 (0: no tuning)")
	}
	if f.popularity < 1 || f.popularity > 100 {
		return nil, nil, bad("popularity", strconv.Itoa(f.popularity), "a percentage 1..100")
	}
	if f.ties != "first" && f.ties != "random" {
		return nil, nil, bad("ties", f.ties, "first or random")
	}
	if f.workers < 1 {
		return nil, nil, bad("workers", strconv.Itoa(f.workers), "at least 1")
	}
	return policies, seeds, nil
}

func dedupe[T comparable](s []T) []T {
	var out []T
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// parseSeeds reads "42-51" or "1,5,7-9": at most maxSeeds distinct
// seeds >= 0, in the order given.
func parseSeeds(s string) ([]int64, error) {
	want := fmt.Errorf("seeds >= 0 such as 42-51 or 1,5,7-9, at most %d", maxSeeds)
	var seeds []int64
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		if err != nil || a < 0 {
			return nil, want
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, want
			}
		}
		if b-a >= maxSeeds {
			return nil, want
		}
		for v := a; v <= b; v++ {
			if !slices.Contains(seeds, v) {
				seeds = append(seeds, v)
			}
		}
		if len(seeds) > maxSeeds {
			return nil, want
		}
	}
	return seeds, nil
}

func runSimOpenb(cmd *cobra.Command, f openbFlags) error {
	policies, seeds, err := f.request()
	if err != nil {
		return err
	}
	nodes, err := trace.LoadOpenbNodes(f.nodes)
	if err != nil {
		return fmt.Errorf("sim openb: %w", err)
	}
	pods, err := trace.LoadOpenbPods(f.pods)
	if err != nil {
		return fmt.Errorf("sim openb: %w", err)
	}
	sc, err := openb.NewScenario(nodes, pods, f.popularity)
	if err != nil {
		return fmt.Errorf("sim openb: %w", err)
	}
	var opts []openb.Option
	if f.ties == "random" {
		opts = append(opts, openb.RandomTies())
	}
	results, err := runOpenb(cmd.Context(), sc, policies, seeds, f.inflation, f.workers, opts...)
	if err != nil {
		return fmt.Errorf("sim openb: %w", err)
	}
	rep := openbReport{
		Nodes: f.nodes, Pods: f.pods, NodeCount: len(nodes), PodCount: len(pods),
		CapacityGPUs: float64(sc.CapacityMilli()) / float64(core.WholeGPU),
		Inflation:    f.inflation, Ties: f.ties, Seeds: seeds,
	}
	for i, p := range policies {
		pr := summarize(p, results[i])
		if !f.curve {
			for j := range pr.Runs {
				pr.Runs[j].Curve = nil
			}
		}
		rep.Policies = append(rep.Policies, pr)
	}
	if f.json {
		return writeJSON(cmd, rep)
	}
	return writeOpenbTable(cmd, rep)
}

// runOpenb replays every (policy, seed) on workers goroutines; results are
// by policy, then seed, in the order given.
func runOpenb(ctx context.Context, sc *openb.Scenario, policies []string, seeds []int64, inflation float64, workers int, opts ...openb.Option) ([][]openb.Result, error) {
	results := make([][]openb.Result, len(policies))
	for i := range results {
		results[i] = make([]openb.Result, len(seeds))
	}
	type job struct{ p, s int }
	jobs := make(chan job)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := 0; w < min(workers, len(policies)*len(seeds)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, err := sc.Run(policies[j.p], seeds[j.s], inflation, opts...)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				results[j.p][j.s] = r
				mu.Unlock()
			}
		}()
	}
feed:
	for p := range policies {
		for s := range seeds {
			select {
			case jobs <- job{p, s}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return results, ctx.Err()
}

// summarize is a policy's means over its runs.
func summarize(policy string, runs []openb.Result) policyReport {
	pr := policyReport{Policy: policy, Runs: runs}
	n := float64(len(runs))
	for _, r := range runs {
		pr.AllocationRatio += r.AllocationRatio / n
		pr.UnallocatedGPUs += r.UnallocatedGPUs / n
		pr.FragGPUs += r.FragGPUs / n
		pr.Placed += float64(r.Placed) / n
		pr.Failed += float64(r.Failed) / n
	}
	if len(runs) > 1 {
		var ss float64
		for _, r := range runs {
			ss += (r.AllocationRatio - pr.AllocationRatio) * (r.AllocationRatio - pr.AllocationRatio)
		}
		pr.StddevAllocationRatio = math.Sqrt(ss / (n - 1))
	}
	return pr
}

func writeOpenbTable(cmd *cobra.Command, rep openbReport) error {
	out := cmd.OutOrStdout()
	ties := ""
	if rep.Ties == "random" {
		ties = "; random ties"
	}
	fmt.Fprintf(out, "openb: %d nodes, %.0f GPUs (%s); %d pods (%s); arrivals to %.0f%% of capacity; %s%s\n\n",
		rep.NodeCount, rep.CapacityGPUs, filepath.Base(rep.Nodes), rep.PodCount, filepath.Base(rep.Pods), 100*rep.Inflation, seedList(rep.Seeds), ties)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tallocation\tunallocated GPUs\tfrag GPUs\tplaced\tfailed\tper seed\t")
	for _, p := range rep.Policies {
		per := make([]string, len(p.Runs))
		for i, r := range p.Runs {
			per[i] = fmt.Sprintf("%.2f", 100*r.AllocationRatio)
		}
		fmt.Fprintf(tw, "%s\t%.2f%%\t%.1f\t%.1f\t%.0f\t%.0f\t%s\t\n", p.Policy, 100*p.AllocationRatio, p.UnallocatedGPUs, p.FragGPUs, p.Placed, p.Failed, strings.Join(per, " "))
	}
	return tw.Flush()
}

// seedList names the seeds compactly: "seed 42" or "seeds 42-51".
func seedList(seeds []int64) string {
	if len(seeds) == 1 {
		return "seed " + strconv.FormatInt(seeds[0], 10)
	}
	consecutive := true
	for i := 1; i < len(seeds); i++ {
		consecutive = consecutive && seeds[i] == seeds[i-1]+1
	}
	if consecutive {
		return fmt.Sprintf("seeds %d-%d", seeds[0], seeds[len(seeds)-1])
	}
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = strconv.FormatInt(v, 10)
	}
	return "seeds " + strings.Join(s, ",")
}
