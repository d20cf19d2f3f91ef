package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gpufleet/gpufleet/internal/bound"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/progress"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/report"
	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/trace"
	"github.com/spf13/cobra"
)

// replayFlags are the flags of "gpufleet sim --trace ...".
type replayFlags struct {
	tracePath, format, paiTasks, catalog, profile  string
	policies                                       string
	seed                                           uint64
	jsonOut, htmlOut, csvOut, leasesOut, eventsOut string
	// limit keeps the first jobs; repeat replays them that many times back
	// to back (sim.Repeat).
	limit, repeat          int
	delay                  time.Duration
	quiet                  bool
	noLP, checkViews       bool
	cpuProfile, memProfile string
	lpMPS                  string
	// spotTrace is a folder of spot traces, util a utilization series.
	spotTrace, util string
	// budgets are --budget TEAM=AMOUNT, each team's monthly budget.
	budgets []string
}

// attachReplay makes "gpufleet sim" itself replay a trace under the
// policies side by side when --trace is given.
func attachReplay(cmd *cobra.Command) {
	var f replayFlags
	fl := cmd.Flags()
	fl.StringVar(&f.tracePath, "trace", "", "trace file to replay")
	fl.StringVar(&f.format, "format", "csv", "trace format: helios, philly, pai, csv (generic)")
	fl.StringVar(&f.paiTasks, "pai-tasks", "", "for --format pai: the task table (the --trace file is the job table)")
	fl.StringVar(&f.catalog, "catalog", "", "catalog file; the embedded demo catalog if empty")
	fl.StringVar(&f.profile, "profile", "", "workload profile (YAML); the documented defaults if empty")
	fl.StringVar(&f.policies, "policy", strings.Join(policy.PresetNames, ","), "comma-separated policies run side by side: presets ("+strings.Join(policy.PresetNames, ", ")+") and policy files (.yaml, docs/policy.md)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed (provider delays, reclaims)")
	fl.StringArrayVar(&f.budgets, "budget", nil, "TEAM=AMOUNT: the team's monthly budget in the catalog's currency, as \"gpufleet teams create --monthly-budget\" sets it (repeatable): renting and placing stop at the cap, an alert at 80%")
	fl.StringVar(&f.jsonOut, "json", "", "write the JSON result to this file (- for stdout)")
	fl.StringVar(&f.htmlOut, "html", "", "write the HTML report to this file")
	fl.StringVar(&f.csvOut, "csv", "", "write the time series CSV to this file")
	fl.StringVar(&f.leasesOut, "leases", "", "write every lease each policy rented (offer, mode, start, end, held and billed hours, allocated GPU-hours, idle share, cost) as CSV to this file")
	fl.StringVar(&f.eventsOut, "events", "", "write every event of each policy's replay (time, kind, subject, and the reason the decision gives) as CSV to this file")
	fl.IntVar(&f.limit, "limit", 0, "replay only the first N jobs (0: all)")
	fl.IntVar(&f.repeat, "repeat", 1, "replay the trace N times back to back, each copy one span of its submissions later, to judge decisions (committed terms above all) over a longer horizon than the trace (1 to 100)")
	fl.DurationVar(&f.delay, "provisioning-delay", 2*time.Minute, "simulated provisioning delay of every offer")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress on stderr (shown only when stderr is a terminal)")
	fl.BoolVar(&f.noLP, "no-lp", false, "skip the LP lower bound (the price bound is still computed)")
	fl.BoolVar(&f.checkViews, "check-views", false, "check at every step that the engine's live view of the fleet is what a fresh build gives (ten times as slow or more; for testing)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the replay to this file")
	fl.StringVar(&f.memProfile, "memprofile", "", "write a profile of the replay's allocations to this file when it ends")
	fl.StringVar(&f.spotTrace, "spot-trace", "", "folder of spot availability/preemption traces in the layout of SkyPilot's spot-traces (\"Can't Be Late\", NSDI'24): counts per zone and time step decide the covered spot offers' reclaims and capacity")
	fl.StringVar(&f.util, "util", "", "GPU utilization series, CSV id,time,utilization (0..1 or 0%..100%) per job: busy GPU-hours and the idle ladder's readings come from it")
	fl.StringVar(&f.lpMPS, "lp-mps", "", "also write the LP relaxation in free MPS to this file, for an exact LP solver (clp, highs, glpsol) to check the bound")
	cmd.Example = `  gpufleet sim --trace ../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv --format helios \
      --catalog examples/aws-pricebook/catalog.yaml --json result.json --html report.html
  gpufleet sim openb --policy all --seeds 42-51`
	help := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if f.tracePath == "" {
			return help(cmd, args)
		}
		return runReplay(cmd, f)
	}
}

// maxRepeat bounds --repeat: a hundred copies of a month-long trace is
// eight years, past any term a catalog sells.
const maxRepeat = 100

func loadTrace(f replayFlags) (trace.Trace, error) {
	switch f.format {
	case "helios", "philly":
		return trace.LoadHelios(f.tracePath)
	case "pai":
		if f.paiTasks == "" {
			return trace.Trace{}, usageError{errors.New("--format pai needs --pai-tasks FILE (the task table)")}
		}
		return trace.LoadPAI(f.tracePath, f.paiTasks)
	case "csv", "generic":
		return trace.LoadGeneric(f.tracePath)
	case "openb":
		return trace.Trace{}, usageError{errors.New(`--format openb: openb pods have no durations to replay through the fleet; use "gpufleet sim openb" for the placement experiment`)}
	}
	return trace.Trace{}, usageError{fmt.Errorf("--format: invalid value %q: want helios, philly, pai or csv", f.format)}
}

// toWorkload makes the simulator's workload, skipping (and counting)
// jobs no offer can run.
func toWorkload(tr trace.Trace, p *trace.Profile, offers []core.Offer, limit int) (*sim.Workload, error) {
	tw, err := tr.Workload(p)
	if err != nil {
		return nil, err
	}
	w := sim.NewWorkload(tw, offers, limit)
	if len(w.Jobs) == 0 {
		return nil, fmt.Errorf("trace %s: no job to replay (skipped: %s)", tr.Name, skipText(w.Skipped))
	}
	return w, nil
}

// skipText lists skipped jobs by reason, most first: "4204 cpu-only job
// (no GPUs); 3 no offer can run it (GPU model or memory)", or "none".
func skipText(skipped map[string]int) string {
	if len(skipped) == 0 {
		return "none"
	}
	reasons := slices.Collect(maps.Keys(skipped))
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(cmp.Compare(skipped[b], skipped[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%d %s", skipped[r], r)
	}
	return strings.Join(parts, "; ")
}

// boundsResult is the lower bounds of a replay, computed beside it.
type boundsResult struct {
	b    sim.Bounds
	err  error
	took time.Duration
}

// startBounds computes the lower bounds of w on its own goroutine: they
// do not depend on the replays, so a run takes the longer of the two
// rather than their sum. Without the LP (noLP) the price bound stands
// alone.
func startBounds(w *sim.Workload, offers []core.Offer, tou *core.TimeOfUse, noLP bool, task *progress.Task) <-chan boundsResult {
	out := make(chan boundsResult, 1) // never blocks: the result may go unread on error
	go func() {
		defer task.Done()
		start := time.Now()
		var r boundsResult
		if noLP {
			r.b.Price, r.err = sim.PriceBound(w, offers, tou)
			r.b.Cost = r.b.Price
		} else {
			r.b, r.err = sim.Bound(w, offers, tou, bound.Options{Progress: task.Set})
		}
		r.took = time.Since(start)
		out <- r
	}()
	return out
}

func runReplay(cmd *cobra.Command, f replayFlags) error {
	start := time.Now()
	if f.repeat < 1 || f.repeat > maxRepeat {
		return usageError{&core.FieldError{Field: "--repeat", Value: fmt.Sprint(f.repeat), Allowed: fmt.Sprintf("1..%d", maxRepeat)}}
	}
	if f.repeat > 1 && f.util != "" {
		return usageError{&core.FieldError{Field: "--repeat", Value: fmt.Sprint(f.repeat), Allowed: "1 with --util (the series name the original jobs only)"}}
	}
	// The garbage collector runs at Go's default pace, within a soft
	// limit of 3 GiB (below issue 5's 4 GiB ceiling) so that a long replay
	// collects harder rather than grow past it. Since the engine keeps its
	// view of the fleet between steps (engine/view.go) a step makes little
	// garbage, and trading memory for fewer collections no longer pays:
	// the million-job replay took 43.8 s at 1.0 GB peak RSS at the default
	// pace against 56.2 s at 2.6 GB with the collector at 400% (the
	// setting before), 44.6 s at 150%, 46.6 s at 200% (docs/simulator.md,
	// Speed).
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(3 << 30))
	if f.checkViews {
		engine.CheckViews(true)
		defer engine.CheckViews(false)
	}
	if f.cpuProfile != "" {
		fh, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer fh.Close()
		if err := pprof.StartCPUProfile(fh); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if f.memProfile != "" {
		defer func() {
			fh, err := os.Create(f.memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(fh, 0)
				fh.Close()
			}
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "memprofile: %v\n", err)
			}
		}()
	}
	policies, err := resolvePolicies(f.policies)
	if err != nil {
		return err
	}
	tr, err := loadTrace(f)
	if err != nil {
		return err
	}
	cat, err := loadCatalog(f.catalog)
	if err != nil {
		return err
	}
	prof := trace.DefaultProfile()
	if f.profile != "" {
		if prof, err = trace.LoadProfile(f.profile); err != nil {
			return err
		}
	}
	w, err := toWorkload(tr, prof, cat.Offers, f.limit)
	if err != nil {
		return err
	}
	if w, err = sim.Repeat(w, f.repeat); err != nil {
		return err
	}
	// Only the trace's name is used past here, so the trace as read is
	// dead from now on: a long replay's collections no longer mark a
	// million jobs' strings (keep it that way: no use of tr below).
	traceName := tr.Name
	if f.repeat > 1 {
		traceName = fmt.Sprintf("%s ×%d (--repeat)", traceName, f.repeat)
	}
	if f.lpMPS != "" {
		prog, err := bound.Explicit(bound.Input{Jobs: w.Jobs, Actual: w.Actual, Offers: cat.Offers}, bound.Options{})
		if err != nil {
			return err
		}
		if err := writeTo(cmd, f.lpMPS, prog.WriteMPS); err != nil {
			return err
		}
	}
	teams, err := budgetTeams(f.budgets, w)
	if err != nil {
		return err
	}
	// A spot plan whose catalog gives no reclaim rate is not simulated as
	// never reclaimed: provsim.ConservativeReclaimBP (docs/simulator.md).
	cfg := sim.Config{Workload: w, Offers: cat.Offers, Teams: teams, TimeOfUse: policy.SiteTariff(cat.Offers), Seed: f.seed,
		Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(f.delay)}, DefaultReclaimBP: provsim.ConservativeReclaimBP}}
	if f.spotTrace != "" {
		if cfg.Provider.Availability, err = loadSpotTraces(f.spotTrace, cat.Offers, w, cmd.ErrOrStderr()); err != nil {
			return err
		}
	}
	if f.util != "" {
		if cfg.Util, err = loadUtil(f.util); err != nil {
			return err
		}
	}
	// Progress on a terminal: a line per policy (jobs submitted) and one
	// for the LP bound (iterations of its ascent).
	disp := progress.For(cmd.ErrOrStderr(), f.quiet)
	tasks := make([]*progress.Task, len(policies))
	for i, p := range policies {
		tasks[i] = disp.Task("sim "+p.Name, len(w.Jobs))
	}
	var lpTask *progress.Task
	if !f.noLP {
		lpTask = disp.Task("LP bound", 0)
	}
	boundsc := startBounds(w, cat.Offers, cfg.TimeOfUse, f.noLP, lpTask)
	// Policies are independent runs: side by side on the cores there are.
	results := make([]*sim.Result, len(policies))
	errs := make([]error, len(policies))
	walls := make([]time.Duration, len(policies))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	leases := make([]report.PolicyLeases, len(policies))
	events := make([]report.PolicyEvents, len(policies))
	for i, p := range policies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := cfg
			if f.leasesOut != "" {
				leases[i].Policy = p.Label()
				c.Leases = func(l sim.LeaseRecord) { leases[i].Leases = append(leases[i].Leases, l) }
			}
			if f.eventsOut != "" {
				events[i].Policy = p.Label()
				c.Transcript = func(e core.Event) { events[i].Events = append(events[i].Events, e) }
			}
			if disp != nil {
				c.Progress = tasks[i].Set
			}
			t := time.Now()
			results[i], errs[i] = sim.Run(cmd.Context(), c, p)
			walls[i] = time.Since(t)
			tasks[i].Done()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	br := <-boundsc
	disp.Close()
	if br.err != nil {
		return br.err
	}
	bounds, lpTime := br.b, br.took
	v := report.NewSimView(traceName, cat.Currency, f.seed, prof.Describe(), results, bounds.Cost, w.Skipped)
	v.LowerBound.PriceBound = report.Number(int64(bounds.Price), int64(core.MicrosPerUnit))
	if f.noLP {
		v.LowerBound.Method += " (LP bound skipped: --no-lp)"
	} else {
		v.LowerBound.Method = fmt.Sprintf("LP relaxation (jobs × markets × hourly slots; %d jobs in %d classes, %d slots, %d committed markets; dual ascent, %d iterations), or the price bound where higher", bounds.LP.Jobs, bounds.LP.Classes, bounds.LP.Slots, bounds.LP.CommittedMarkets, bounds.LP.Iterations)
		v.LPWallS = lpTime.Seconds()
	}
	for i := range v.Policies {
		v.Policies[i].WallS = walls[i].Seconds()
		if s := walls[i].Seconds(); s > 0 {
			v.Policies[i].EventsPerS = float64(results[i].Events) / s
		}
	}
	v.WallS = time.Since(start).Seconds()
	if f.jsonOut != "" {
		if err := writeTo(cmd, f.jsonOut, func(out io.Writer) error {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}); err != nil {
			return err
		}
	}
	if f.htmlOut != "" {
		if err := writeTo(cmd, f.htmlOut, func(out io.Writer) error { return report.WriteSimHTML(out, v, results) }); err != nil {
			return err
		}
	}
	if f.csvOut != "" {
		if err := writeTo(cmd, f.csvOut, func(out io.Writer) error { return report.WriteSimCSV(out, results) }); err != nil {
			return err
		}
	}
	if f.leasesOut != "" {
		if err := writeTo(cmd, f.leasesOut, func(out io.Writer) error { return report.WriteLeaseCSV(out, leases) }); err != nil {
			return err
		}
	}
	if f.eventsOut != "" {
		if err := writeTo(cmd, f.eventsOut, func(out io.Writer) error { return report.WriteEventCSV(out, events) }); err != nil {
			return err
		}
	}
	if f.jsonOut == "-" {
		return nil
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tcost %s\t× bound\tidle share\tpaid GPU-h\tallocated GPU-h\twait p95 s\tcore p95 s\tdeadline misses\tpreemptions\tlost GPU-h\t\n", cat.Currency)
	for _, p := range v.Policies {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", cmp.Or(p.Label, p.Policy), report.Fixed(p.Cost, 2), report.Fixed(p.VsBound, 3), report.Percent(p.IdleShare),
			report.Fixed(p.PaidGPUHours, 0), report.Fixed(p.AllocatedGPUHours, 0), p.WaitP95, p.WaitsByTier["core"].P95, p.DeadlineMisses, p.Preemptions, report.Fixed(p.LostGPUHours, 1))
	}
	boundName := "lower bound (LP)"
	if f.noLP {
		boundName = "lower bound (price)"
	}
	fmt.Fprintf(tw, "%s\t%s\t1\t\t\t\t\t\t\t\t\t\n", boundName, report.Fixed(v.LowerBound.Cost, 2))
	fmt.Fprintf(tw, "price bound\t%s\t\t\t\t\t\t\t\t\t\t\n", report.Fixed(v.LowerBound.PriceBound, 2))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%d jobs replayed from %s; skipped: %s\n", len(w.Jobs), traceName, skipText(w.Skipped))
	fmt.Fprintf(cmd.OutOrStdout(), "workload profile: %s (in full in --json and --html)\n", prof.Name)
	if f.noLP {
		fmt.Fprintf(cmd.OutOrStdout(), "LP bound: skipped (--no-lp)\n")
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "LP bound: %d classes, %d slots, %d committed markets, %d iterations (last rise at %d; start %s) in %s (beside the replays)\n", bounds.LP.Classes, bounds.LP.Slots, bounds.LP.CommittedMarkets, bounds.LP.Iterations, bounds.LP.Improved, report.Fixed(json.Number(bounds.LP.Initial.String()), 2), lpTime.Round(time.Millisecond))
	}
	for i, p := range v.Policies {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d steps, %d events in %s (%.0f events/s)\n", p.Policy, p.Steps, p.Events, walls[i].Round(time.Millisecond), p.EventsPerS)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wall clock %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// writeTo writes to path, or stdout for "-".
func writeTo(cmd *cobra.Command, path string, write func(io.Writer) error) error {
	if path == "-" {
		return write(cmd.OutOrStdout())
	}
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(fh); err != nil {
		fh.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return fh.Close()
}

// budgetTeams makes the teams of --budget TEAM=AMOUNT flags: each named
// team with its monthly budget (the simulator's budgets see the ledger's
// month-to-date spend, as the server's do). A team must submit to the
// workload: a misspelt name would budget nobody.
func budgetTeams(flags []string, w *sim.Workload) ([]core.Team, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	known := map[string]bool{}
	for _, j := range w.Jobs {
		known[j.Team] = true
	}
	var out []core.Team
	seen := map[string]bool{}
	for _, fv := range flags {
		team, amount, ok := strings.Cut(fv, "=")
		if !ok || team == "" {
			return nil, &core.FieldError{Field: "budget", Value: fv, Allowed: "TEAM=AMOUNT"}
		}
		m, err := core.ParseMicros(amount)
		if err != nil || m <= 0 {
			return nil, &core.FieldError{Field: "budget", Value: fv, Allowed: "TEAM=AMOUNT, AMOUNT a positive amount in the catalog's currency"}
		}
		if !known[team] {
			return nil, &core.FieldError{Field: "budget", Value: fv, Allowed: "a team that submits to the trace"}
		}
		if seen[team] {
			return nil, &core.FieldError{Field: "budget", Value: fv, Allowed: "one budget per team"}
		}
		seen[team] = true
		out = append(out, core.Team{ID: team, Name: team, Weight: 1, MonthlyBudget: m})
	}
	return out, nil
}
