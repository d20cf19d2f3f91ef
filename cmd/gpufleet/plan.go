package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/progress"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// newPlanCmd returns "gpufleet plan", offline planning. Each planner of
// internal/plan gets a subcommand here: "term" (lease-term choice), "job"
// (GPU model and count from benchmarks) and "portfolio" (committed base,
// on-demand burst, spot and shifting from a demand series).
func newPlanCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan offline: which leases to rent for known work",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newPlanTermCmd(), newPlanJobCmd(), newPlanPortfolioCmd())
	return cmd
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.CommandPath(), args[0])}
	}
	return nil
}

// termFlags are the flags of "gpufleet plan term".
type termFlags struct {
	days, hours int64
	prices      [4]string // hourly, daily, weekly, monthly
	count       int
	currency    string
	json        bool
}

// termPeriods are the periods "plan term" takes prices for, with their
// flags. The hourly price is on-demand, billed per started hour; the
// others are fixed leases charged in full.
var termPeriods = [4]struct {
	flag   string
	period core.Period
}{{"hourly", core.Hour}, {"daily", core.Day}, {"weekly", core.Week}, {"monthly", core.Month}}

func newPlanTermCmd() *cobra.Command {
	var f termFlags
	cmd := &cobra.Command{
		Use:   "term --days D [--hours H] [--hourly P] [--daily P] [--weekly P] [--monthly P]",
		Short: "Choose the cheapest mix of hourly, daily, weekly and monthly leases for a project",
		Long: `Choose the cheapest mix of consecutive leases that covers a project of
known length: for example 1 week + 3 days + 5 hours. Prices are per period
and per machine, as exact decimals; --count multiplies everything. A month
is 730 hours. The hourly price is on demand, billed per started hour; the
daily, weekly and monthly prices are committed leases charged in full.
Every single-period plan is shown next to the choice.`,
		Example: `  gpufleet plan term --days 14 --weekly 450 --monthly 1800
  gpufleet plan term --days 10 --hours 5 --hourly 5 --daily 80 --weekly 450 --count 8 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPlanTerm(cmd, f) },
	}
	fl := cmd.Flags()
	fl.Int64Var(&f.days, "days", 0, "project length: days (24 h)")
	fl.Int64Var(&f.hours, "hours", 0, "project length: hours, added to --days")
	for i, p := range termPeriods {
		fl.StringVar(&f.prices[i], p.flag, "", fmt.Sprintf("price of one %s per machine", p.period))
	}
	fl.IntVar(&f.count, "count", 1, "number of machines (or GPUs, with prices per GPU)")
	fl.StringVar(&f.currency, "currency", "USD", "currency of the prices (ISO 4217)")
	fl.BoolVar(&f.json, "json", false, "print the choice as JSON")
	return cmd
}

// termRequest turns the flags into a request; every problem is a usage
// error naming its flag.
func (f termFlags) termRequest() (plan.TermRequest, core.Currency, error) {
	bad := func(flag, value, allowed string) error {
		return usageError{&core.FieldError{Field: "--" + flag, Value: value, Allowed: allowed}}
	}
	maxHours := plan.MaxLength / 3600
	if f.days < 0 || f.days > maxHours/24 {
		return plan.TermRequest{}, "", bad("days", fmt.Sprint(f.days), fmt.Sprintf("whole days 0..%d", maxHours/24))
	}
	if f.hours < 0 || f.hours > maxHours {
		return plan.TermRequest{}, "", bad("hours", fmt.Sprint(f.hours), fmt.Sprintf("whole hours 0..%d", maxHours))
	}
	hours := f.days*24 + f.hours
	if hours == 0 || hours > maxHours {
		return plan.TermRequest{}, "", bad("days", fmt.Sprintf("%d days %d hours", f.days, f.hours),
			fmt.Sprintf("a length of 1..%d hours (10 years) in --days and --hours", maxHours))
	}
	if f.count < 1 {
		return plan.TermRequest{}, "", bad("count", fmt.Sprint(f.count), "a number of machines >= 1")
	}
	cur, err := core.ParseCurrency(f.currency)
	if err != nil {
		return plan.TermRequest{}, "", bad("currency", f.currency, "an ISO 4217 code such as USD, EUR, CNY")
	}
	r := plan.TermRequest{Length: hours * 3600, Count: f.count}
	for i, s := range f.prices {
		if s == "" {
			continue
		}
		tp := termPeriods[i]
		m, err := core.ParseMicros(s)
		if err != nil {
			allowed := "a decimal price such as 450 or 3.25"
			var fe *core.FieldError
			if errors.As(err, &fe) {
				allowed = fe.Allowed
			}
			return plan.TermRequest{}, "", bad(tp.flag, s, allowed)
		}
		if m < 0 {
			return plan.TermRequest{}, "", bad(tp.flag, s, "a price >= 0")
		}
		if tp.period == core.Hour {
			r.Prices = append(r.Prices, plan.OnDemand(core.Hour, m, core.Hour.Seconds(), 0))
		} else {
			r.Prices = append(r.Prices, plan.Fixed(tp.period, m))
		}
	}
	if len(r.Prices) == 0 {
		return plan.TermRequest{}, "", usageError{&core.FieldError{Field: "prices", Value: "",
			Allowed: "at least one of --hourly, --daily, --weekly, --monthly"}}
	}
	return r, cur, nil
}

func runPlanTerm(cmd *cobra.Command, f termFlags) error {
	r, cur, err := f.termRequest()
	if err != nil {
		return err
	}
	c, err := plan.ChooseTerm(r)
	if err != nil {
		return fmt.Errorf("plan term: %w", err)
	}
	if f.json {
		return writeJSON(cmd, termOutput(c, cur))
	}
	return printTerm(cmd, c, cur)
}

// termJSON is the JSON form of a term choice. Amounts are numbers in
// currency units, written exactly from micro-units; times are hours per
// machine.
type termJSON struct {
	Total        json.Number   `json:"total"`
	Currency     core.Currency `json:"currency"`
	Count        int           `json:"count"`
	Plan         string        `json:"plan"`
	Periods      []periodJSON  `json:"periods"`
	NeededHours  json.Number   `json:"needed_hours"`
	PaidHours    json.Number   `json:"paid_hours"`
	IdleHours    json.Number   `json:"idle_hours"`
	Alternatives []altJSON     `json:"alternatives"`
	Reason       string        `json:"reason"`
}

type periodJSON struct {
	Period string `json:"period"`
	Count  int64  `json:"count"`
	// PartialHours is billed time beyond Count whole periods (on-demand
	// billed finer than its period only).
	PartialHours json.Number `json:"partial_hours,omitempty"`
	Cost         json.Number `json:"cost"`
}

type altJSON struct {
	Plan      string       `json:"plan"`
	Total     json.Number  `json:"total"`
	Chosen    bool         `json:"chosen"`
	Periods   []periodJSON `json:"periods"`
	Leases    int64        `json:"leases"`
	PaidHours json.Number  `json:"paid_hours"`
	IdleHours json.Number  `json:"idle_hours"`
}

func termOutput(c plan.TermChoice, cur core.Currency) termJSON {
	out := termJSON{
		Total:       amount(c.Total),
		Currency:    cur,
		Count:       c.Count,
		Plan:        c.Plan,
		Periods:     periodsJSON(c.Periods),
		NeededHours: hoursNumber(c.NeededSeconds),
		PaidHours:   hoursNumber(c.PaidSeconds),
		IdleHours:   hoursNumber(c.IdleSeconds()),
		Reason:      c.Reason,
	}
	for _, a := range c.Alternatives {
		out.Alternatives = append(out.Alternatives, altJSON{
			Plan:      a.Plan,
			Total:     amount(a.Total),
			Chosen:    a.Chosen,
			Periods:   periodsJSON(a.Periods),
			Leases:    a.Leases,
			PaidHours: hoursNumber(a.PaidSeconds),
			IdleHours: hoursNumber(a.PaidSeconds - c.NeededSeconds),
		})
	}
	return out
}

func periodsJSON(pcs []plan.PeriodCount) []periodJSON {
	out := make([]periodJSON, len(pcs))
	for i, pc := range pcs {
		out[i] = periodJSON{Period: pc.Period, Count: pc.Count, Cost: amount(pc.Cost)}
		if pc.PartialSeconds != 0 {
			out[i].PartialHours = hoursNumber(pc.PartialSeconds)
		}
	}
	return out
}

// amount writes micro-units as an exact JSON number: 900.00, 0.333333.
func amount(m core.Micros) json.Number { return readmodel.Amount(m) }

// hoursNumber writes seconds as a JSON number of hours: whole hours
// exactly, otherwise to six decimals, half to even.
func hoursNumber(sec int64) json.Number {
	if sec%3600 == 0 {
		return json.Number(strconv.FormatInt(sec/3600, 10))
	}
	s := core.Micros(core.MulDivHalfEven(sec, int64(core.MicrosPerUnit), 3600)).String()
	return json.Number(strings.TrimRight(s, "0"))
}

// printTerm writes the choice as a short table with its reason.
func printTerm(cmd *cobra.Command, c plan.TermChoice, cur core.Currency) error {
	w := cmd.OutOrStdout()
	machines := "1 machine"
	if c.Count != 1 {
		machines = fmt.Sprintf("%d machines", c.Count)
	}
	fmt.Fprintf(w, "Project: %s on %s; totals in %s, times per machine.\n\n", plan.FormatSpan(c.NeededSeconds), machines, cur)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tPLAN\tTOTAL\tLEASES\tPAID\tIDLE")
	for _, a := range c.Alternatives {
		mark := ""
		if a.Chosen {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", mark, a.Plan, a.Total, a.Describe(),
			plan.FormatSpan(a.PaidSeconds), plan.FormatSpan(a.PaidSeconds-c.NeededSeconds))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan term: write table: %w", err)
	}
	_, err := fmt.Fprintf(w, "\nChosen: %s for %s %s.\nWhy: %s.\n", c.Describe(), c.Total, cur, c.Reason)
	if err != nil {
		return fmt.Errorf("plan term: write: %w", err)
	}
	return nil
}

// jobFlags are the flags of "gpufleet plan job".
type jobFlags struct {
	benches                   []string
	samples                   string
	epochs                    int64
	deadline                  string
	efficiency, serial        float64
	catalog                   string
	maxGPUs                   int
	json                      bool
	efficiencySet, serialSeen bool
}

func newPlanJobCmd() *cobra.Command {
	var f jobFlags
	cmd := &cobra.Command{
		Use:   "job --bench MODEL:GPUS:SAMPLES_PER_S... --samples N [--epochs E] --deadline D",
		Short: "Size a job from a short benchmark: GPU model, count, duration and cost",
		Long: `Size a job from measured throughput. Each --bench is one measurement:
MODEL:GPUS:SAMPLES_PER_S, the throughput of GPUS GPUs of MODEL together
on a small sample ("A100:1:100"; the model matches the catalog's GPU
models ignoring case, or by a unique part of the name). The work is
--samples × --epochs samples. For every count 1..--max-gpus of every
benched model the throughput is the nearest measurement below (or the
smallest above) scaled by --efficiency per doubling of GPUs (0.9: twice
the GPUs do 1.8 times the work) or by Amdahl's law with --serial-fraction;
the duration is the work over the throughput; the cost is the cheapest
lease mix (as "plan term" chooses it) on the model's cheapest offer,
whole machines. The recommendation is the cheapest option that meets
--deadline; the idle share counts GPUs rented but not used and lease
time past the job's end.`,
		Example: `  gpufleet plan job --catalog internal/plan/testdata/a100-idc.yaml --bench A100:1:100 \
      --samples 7000000 --epochs 100 --deadline 14d --efficiency 0.9`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.efficiencySet = cmd.Flags().Changed("efficiency")
			f.serialSeen = cmd.Flags().Changed("serial-fraction")
			return runPlanJob(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.benches, "bench", nil, "a measurement MODEL:GPUS:SAMPLES_PER_S (repeatable)")
	fl.StringVar(&f.samples, "samples", "", "samples in one epoch of the full job")
	fl.Int64Var(&f.epochs, "epochs", 1, "epochs of the full job")
	fl.StringVar(&f.deadline, "deadline", "", "time the job may take: 14d, 2 weeks, 336h")
	fl.Float64Var(&f.efficiency, "efficiency", 1, "scaling efficiency kept per doubling of GPUs, in (0, 1]")
	fl.Float64Var(&f.serial, "serial-fraction", 0, "Amdahl's serial fraction of the work, in [0, 1) (instead of --efficiency)")
	fl.StringVar(&f.catalog, "catalog", "", "price catalog (.yaml or .csv; default: the embedded demo catalog)")
	fl.IntVar(&f.maxGPUs, "max-gpus", 64, "most GPUs per model to consider")
	fl.BoolVar(&f.json, "json", false, "print the plan as JSON")
	return cmd
}

// parseBench reads MODEL:GPUS:SAMPLES_PER_S; the model may hold colons.
func parseBench(s string) (plan.Bench, error) {
	bad := usageError{&core.FieldError{Field: "--bench", Value: s, Allowed: "MODEL:GPUS:SAMPLES_PER_S such as A100:1:1200 (GPUs a whole number >= 1, throughput > 0)"}}
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return plan.Bench{}, bad
	}
	j := strings.LastIndex(s[:i], ":")
	if j <= 0 {
		return plan.Bench{}, bad
	}
	n, err := strconv.Atoi(strings.TrimSpace(s[j+1 : i]))
	if err != nil || n < 1 || n > 4096 {
		return plan.Bench{}, bad
	}
	thr, err := strconv.ParseFloat(strings.TrimSpace(s[i+1:]), 64)
	if err != nil || !(thr > 0) || math.IsInf(thr, 0) {
		return plan.Bench{}, bad
	}
	return plan.Bench{GPUModel: strings.TrimSpace(s[:j]), GPUs: n, SamplesPerSecond: thr}, nil
}

func (f jobFlags) request() (plan.JobRequest, error) {
	bad := func(flag, value, allowed string) error {
		return usageError{&core.FieldError{Field: "--" + flag, Value: value, Allowed: allowed}}
	}
	var r plan.JobRequest
	if len(f.benches) == 0 {
		return r, bad("bench", "", "at least one --bench MODEL:GPUS:SAMPLES_PER_S")
	}
	for _, s := range f.benches {
		b, err := parseBench(s)
		if err != nil {
			return r, err
		}
		r.Benches = append(r.Benches, b)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(f.samples), 0, 64)
	if err != nil || n < 1 {
		return r, bad("samples", f.samples, "a whole number of samples >= 1 (1_000_000 is allowed)")
	}
	r.Samples = n
	if f.epochs < 1 || f.epochs > math.MaxInt64/n {
		return r, bad("epochs", fmt.Sprint(f.epochs), "a whole number >= 1 whose product with --samples fits in 63 bits")
	}
	r.Epochs = f.epochs
	if f.deadline == "" {
		return r, bad("deadline", "", "the time the job may take, such as 14d, 2 weeks or 336h")
	}
	d, err := core.ParseSpan(f.deadline)
	if err != nil || d > plan.MaxLength {
		return r, bad("deadline", f.deadline, "a time such as 14d, 2 weeks or 336h, at most 10 years")
	}
	r.DeadlineSeconds = d
	if f.efficiencySet && f.serialSeen {
		return r, bad("serial-fraction", fmt.Sprint(f.serial), "either --efficiency or --serial-fraction, not both")
	}
	if !(f.efficiency > 0 && f.efficiency <= 1) {
		return r, bad("efficiency", fmt.Sprint(f.efficiency), "an efficiency per doubling in (0, 1]")
	}
	if !(f.serial >= 0 && f.serial < 1) {
		return r, bad("serial-fraction", fmt.Sprint(f.serial), "a serial fraction in [0, 1)")
	}
	if f.serialSeen {
		r.Scaling.SerialFraction = f.serial
	} else {
		r.Scaling.PerDoubling = f.efficiency
	}
	if f.maxGPUs < 1 || f.maxGPUs > 4096 {
		return r, bad("max-gpus", fmt.Sprint(f.maxGPUs), "1..4096")
	}
	r.MaxGPUs = f.maxGPUs
	return r, nil
}

func runPlanJob(cmd *cobra.Command, f jobFlags) error {
	r, err := f.request()
	if err != nil {
		return err
	}
	cat, err := loadCatalog(f.catalog)
	if err != nil {
		return err
	}
	r.Offers = cat.Offers
	p, err := plan.PlanJob(r)
	if err != nil {
		if errors.Is(err, plan.ErrUnknownClass) {
			return usageError{err}
		}
		return err
	}
	if f.json {
		if err := writeJSON(cmd, jobOutput(p, r, cat.Currency)); err != nil {
			return err
		}
	} else if err := printJob(cmd, p, r, cat.Currency); err != nil {
		return err
	}
	if p.Recommended < 0 {
		return fmt.Errorf("plan job: %s", p.Reason)
	}
	return nil
}

// jobJSON is the JSON form of a job plan; amounts are exact decimals,
// times hours, shares fractions of 1.
type jobJSON struct {
	Currency      core.Currency `json:"currency"`
	WorkSamples   int64         `json:"work_samples"`
	DeadlineHours json.Number   `json:"deadline_hours"`
	Recommended   *jobOptJSON   `json:"recommended"`
	Options       []jobOptJSON  `json:"options"`
	Reason        string        `json:"reason"`
}

type jobOptJSON struct {
	GPUModel       string      `json:"gpu_model"`
	GPUs           int         `json:"gpus"`
	Offer          string      `json:"offer"`
	Machines       int         `json:"machines"`
	GPUsRented     int         `json:"gpus_rented"`
	SamplesPerS    float64     `json:"samples_per_s"`
	Measured       bool        `json:"measured"`
	DurationHours  json.Number `json:"duration_hours"`
	MeetsDeadline  bool        `json:"meets_deadline"`
	Cost           json.Number `json:"cost"`
	Term           string      `json:"term"`
	PaidGPUHours   json.Number `json:"paid_gpu_hours"`
	BusyGPUHours   json.Number `json:"busy_gpu_hours"`
	IdleShare      json.Number `json:"idle_share"`
	Efficiency     json.Number `json:"efficiency"`
	IsRecommended  bool        `json:"is_recommended"`
	TermPerMachine string      `json:"term_reason"`
}

func jobOutput(p plan.JobPlan, r plan.JobRequest, cur core.Currency) jobJSON {
	out := jobJSON{Currency: cur, WorkSamples: p.WorkSamples, DeadlineHours: hoursNumber(r.DeadlineSeconds), Reason: p.Reason}
	for i, o := range p.Options {
		j := jobOptJSON{
			GPUModel: o.GPUModel, GPUs: o.GPUs, Offer: o.OfferID, Machines: o.Machines, GPUsRented: o.GPUsRented,
			SamplesPerS: o.SamplesPerSecond, Measured: o.Measured, DurationHours: hoursNumber(o.DurationSeconds),
			MeetsDeadline: o.MeetsDeadline, Cost: amount(o.Cost), Term: o.Term.Describe(),
			PaidGPUHours: hoursNumber(o.PaidGPUSeconds), BusyGPUHours: hoursNumber(o.BusyGPUSeconds),
			IdleShare: shareNumber(o.IdleShareBP), Efficiency: shareNumber(o.EfficiencyBP),
			IsRecommended: i == p.Recommended, TermPerMachine: o.Term.Reason,
		}
		out.Options = append(out.Options, j)
		if i == p.Recommended {
			jj := j
			out.Recommended = &jj
		}
	}
	return out
}

// shareNumber writes basis points as an exact fraction of 1: 6500 → 0.65.
func shareNumber(bp int64) json.Number {
	s := core.Micros(bp * 100).String()
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return json.Number(s)
}

// percent writes basis points as a percentage: 6500 → "65%".
func percent(bp int64) string {
	s := core.Micros(bp * 10_000).String()
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}

func printJob(cmd *cobra.Command, p plan.JobPlan, r plan.JobRequest, cur core.Currency) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Job: %d samples, deadline %s; costs in %s.\n\n", p.WorkSamples, plan.FormatSpan(r.DeadlineSeconds), cur)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tMODEL\tGPUS\tSAMPLES/S\tDURATION\tDEADLINE\tCOST\tLEASES PER MACHINE\tMACHINES\tIDLE")
	for i, o := range p.Options {
		mark := ""
		if i == p.Recommended {
			mark = "*"
		}
		meets := "missed"
		if o.MeetsDeadline {
			meets = "met"
		}
		thr := strconv.FormatFloat(o.SamplesPerSecond, 'f', 1, 64)
		if o.Measured {
			thr += " (measured)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d × %s\t%s\n", mark, o.GPUModel, o.GPUs, thr, plan.FormatSpan(o.DurationSeconds),
			meets, o.Cost, o.Term.Describe(), o.Machines, o.OfferID, percent(o.IdleShareBP))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan job: write table: %w", err)
	}
	if _, err := fmt.Fprintf(w, "\nWhy: %s.\n", p.Reason); err != nil {
		return fmt.Errorf("plan job: write: %w", err)
	}
	return nil
}

// portfolioFlags are the flags of "gpufleet plan portfolio".
type portfolioFlags struct {
	demand, trace, format, catalog string
	paiTasks, profile, gpuModel    string
	start                          string
	shiftWindow                    int
	checkpoint, restart            string
	solver                         string
	json, hourly, noSensitivity    bool
	burstLeases, quiet             bool
	policyOut                      string
}

// traceFormats are the trace formats --format names.
var traceFormats = []string{"helios", "philly", "openb", "pai", "csv"}

func newPlanPortfolioCmd() *cobra.Command {
	var f portfolioFlags
	cmd := &cobra.Command{
		Use:   "portfolio (--demand FILE | --trace FILE --format F) [--catalog FILE] [--json]",
		Short: "Size the committed base, on-demand burst, spot share and shifting for a demand series",
		Long: `Plan the cheapest portfolio for an hourly demand series per GPU class:
a committed base per class held for the whole series on its cheapest
term mix, on-demand GPUs for the hours above it, spot GPUs for
interruptible work where spot (plus the expected reclaim overhead) is
cheaper, and deferrable work moved within its --shift-window to hours
with idle reserved GPUs or off-peak prices. Costs are compared with
all on demand, all monthly (peak GPUs on monthly terms) and a peak-sized
fleet on the cheapest terms; the plan is re-run with demand 20% higher
and lower. The demand CSV has the columns hour or timestamp, gpu_model,
gpus and optionally interruptible and deferrable shares (docs/planner.md).`,
		Example: `  gpufleet plan portfolio --demand internal/plan/testdata/v100-peak.csv --catalog internal/plan/testdata/v100-cny.yaml
  gpufleet plan portfolio --demand internal/plan/testdata/a100-week.csv --json
  gpufleet plan portfolio --trace ../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv --format helios --gpu-model "NVIDIA A100"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPlanPortfolio(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.demand, "demand", "", "hourly demand CSV: hour|timestamp, gpu_model, gpus[, interruptible, deferrable]")
	fl.StringVar(&f.trace, "trace", "", "a cluster trace to derive demand from (with --format)")
	fl.StringVar(&f.format, "format", "", "trace format: "+strings.Join(traceFormats, ", "))
	fl.StringVar(&f.paiTasks, "pai-tasks", "", "with --format pai: the task table (--trace is the job table)")
	fl.StringVar(&f.profile, "profile", "", "with --trace: the workload profile (YAML; default: the documented defaults)")
	fl.StringVar(&f.gpuModel, "gpu-model", "", "with --trace: the GPU class of jobs that name none, as the catalog spells it or a unique part of it (V100)")
	fl.StringVar(&f.catalog, "catalog", "", "price catalog (.yaml or .csv; default: the embedded demo catalog)")
	fl.StringVar(&f.start, "start", "2026-01-01T00:00:00Z", "when hour 0 starts, for a CSV that numbers its hours (RFC 3339)")
	fl.IntVar(&f.shiftWindow, "shift-window", 24, "hours deferrable work may move within (blocks from hour 0; 1: no shifting)")
	fl.StringVar(&f.checkpoint, "checkpoint", "1h", "checkpoint interval of interruptible work, for the spot reclaim overhead")
	fl.StringVar(&f.restart, "restart", "10m", "time to resume after a spot reclaim")
	fl.StringVar(&f.solver, "solver", "auto", "auto, ldc, decomposed or lp")
	fl.BoolVar(&f.json, "json", false, "print the plan as JSON")
	fl.BoolVar(&f.hourly, "hourly", false, "with --json: include each class's hour-by-hour plan")
	fl.BoolVar(&f.noSensitivity, "no-sensitivity", false, "skip the ±20% demand scenarios")
	fl.BoolVar(&f.burstLeases, "burst-leases", true, "cover bursts with short committed terms (a week, a day) where cheaper than on demand")
	fl.StringVar(&f.policyOut, "policy-out", "", "also write the planned committed base as a policy file (gpufleet's default policy with reserved.gpus set) that serve --policy and sim --policy take as it is")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress on stderr (shown only when stderr is a terminal)")
	return cmd
}

func runPlanPortfolio(cmd *cobra.Command, f portfolioFlags) error {
	bad := func(flag, value, allowed string) error {
		return usageError{&core.FieldError{Field: "--" + flag, Value: value, Allowed: allowed}}
	}
	switch {
	case f.demand == "" && f.trace == "":
		return bad("demand", "", "a demand CSV (--demand FILE) or a trace (--trace FILE --format F)")
	case f.demand != "" && f.trace != "":
		return bad("trace", f.trace, "either --demand or --trace, not both")
	case f.trace != "":
		if !slices.Contains(traceFormats, f.format) {
			return bad("format", f.format, "one of "+strings.Join(traceFormats, ", ")+" with --trace")
		}
	case f.format != "":
		return bad("format", f.format, "no --format with --demand (it is for --trace)")
	}
	start, err := time.Parse(time.RFC3339, f.start)
	if err != nil {
		return bad("start", f.start, "an RFC 3339 time such as 2026-01-01T00:00:00Z")
	}
	ckpt, err := parseSpanFlag("checkpoint", f.checkpoint)
	if err != nil {
		return err
	}
	restart, err := parseSpanFlag("restart", f.restart)
	if err != nil {
		return err
	}
	if f.shiftWindow < 1 || f.shiftWindow > plan.MaxHours {
		return bad("shift-window", fmt.Sprint(f.shiftWindow), fmt.Sprintf("hours 1..%d (1: no shifting)", plan.MaxHours))
	}
	solver, err := plan.ParseSolver(f.solver)
	if err != nil {
		return usageError{&core.FieldError{Field: "--solver", Value: f.solver, Allowed: "one of auto, ldc, decomposed, lp"}}
	}
	cat, err := loadCatalog(f.catalog)
	if err != nil {
		return err
	}
	classes, err := plan.Classes(cat.Offers)
	if err != nil {
		return fmt.Errorf("plan portfolio: catalog: %w", err)
	}
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = c.GPUModel
	}
	var s plan.Series
	if f.trace != "" {
		if f.gpuModel != "" {
			// As a demand CSV's gpu_model: the catalog's spelling, or a
			// unique part of it ("V100").
			if f.gpuModel, err = plan.FindClass(names, f.gpuModel); err != nil {
				return usageError{fmt.Errorf("--gpu-model: %w", err)}
			}
		}
		if s, err = traceDemand(f); err != nil {
			return fmt.Errorf("plan portfolio: %w", err)
		}
	} else {
		data, err := os.ReadFile(f.demand)
		if err != nil {
			return fmt.Errorf("plan portfolio: read demand: %w", err)
		}
		if s, err = plan.ParseDemandCSV(f.demand, bytes.NewReader(data), plan.DemandCSVOptions{Start: start, Classes: names}); err != nil {
			return fmt.Errorf("plan portfolio: %w", err)
		}
	}
	disp := progress.For(cmd.ErrOrStderr(), f.quiet)
	solves := disp.Task("solve classes", 0)
	p, err := plan.PlanPortfolio(plan.PortfolioRequest{
		Demand: s, Prices: classes, ShiftWindow: f.shiftWindow, Solver: solver, NoSensitivity: f.noSensitivity, BurstLeases: f.burstLeases,
		Spot: plan.SpotModel{CheckpointSeconds: ckpt, RestartSeconds: restart}, Progress: solves.Set,
	})
	solves.Done()
	disp.Close()
	if err != nil {
		return err
	}
	if f.policyOut != "" {
		if err := writePolicyOut(cmd, f.policyOut, p, cat.Offers); err != nil {
			return err
		}
	}
	if f.json {
		return writeJSON(cmd, portfolioOutput(p, cat.Currency, f.hourly))
	}
	return printPortfolio(cmd, p, cat.Currency)
}

// traceDemand reads a trace and turns its jobs into hourly demand per GPU
// class; jobs that name no GPU model count as --gpu-model.
func traceDemand(f portfolioFlags) (plan.Series, error) {
	if f.format == "openb" {
		return plan.Series{}, usageError{errors.New("--format openb: openb pods have no run times to turn into hourly demand")}
	}
	tr, err := loadTrace(replayFlags{tracePath: f.trace, format: f.format, paiTasks: f.paiTasks})
	if err != nil {
		return plan.Series{}, err
	}
	prof := trace.DefaultProfile()
	if f.profile != "" {
		if prof, err = trace.LoadProfile(f.profile); err != nil {
			return plan.Series{}, err
		}
	}
	w, err := tr.Workload(prof)
	if err != nil {
		return plan.Series{}, err
	}
	return plan.DemandFromJobs(w.Jobs, f.gpuModel)
}

// parseSpanFlag reads a length of time that may be zero.
func parseSpanFlag(flag, v string) (int64, error) {
	if strings.TrimSpace(v) == "0" {
		return 0, nil
	}
	n, err := core.ParseSpan(v)
	if err != nil {
		return 0, usageError{&core.FieldError{Field: "--" + flag, Value: v, Allowed: "a time such as 30m, 1h or 0"}}
	}
	return n, nil
}

// portfolioJSON is the JSON form of a portfolio. Amounts are exact
// decimals of the catalog's currency, shares fractions of 1, times hours;
// a baseline the catalog cannot price is null.
type portfolioJSON struct {
	Currency         core.Currency  `json:"currency"`
	Start            time.Time      `json:"start"`
	Hours            int            `json:"hours"`
	Method           string         `json:"method"`
	Reserved         []reservedJSON `json:"reserved"`
	BurstLeases      []burstJSON    `json:"burst_leases"`
	OnDemandPeak     int64          `json:"on_demand_peak"`
	SpotShare        json.Number    `json:"spot_share"`
	ExpectedCost     json.Number    `json:"expected_cost"`
	ReservedCost     json.Number    `json:"reserved_cost"`
	OnDemandCost     json.Number    `json:"on_demand_cost"`
	BurstLeaseCost   json.Number    `json:"burst_lease_cost"`
	SpotCost         json.Number    `json:"spot_cost"`
	SpotOverhead     json.Number    `json:"spot_reclaim_overhead"`
	IdleShare        json.Number    `json:"idle_share"`
	DemandGPUHours   int64          `json:"demand_gpu_hours"`
	PaidGPUHours     json.Number    `json:"paid_gpu_hours"`
	OnDemandGPUHours int64          `json:"on_demand_gpu_hours"`
	SpotGPUHours     int64          `json:"spot_gpu_hours"`
	ShiftedGPUHours  int64          `json:"shifted_gpu_hours"`
	Baselines        baselinesJSON  `json:"baselines"`
	Savings          baselinesJSON  `json:"savings"`
	Classes          []classJSON    `json:"classes"`
	Sensitivity      []scenarioJSON `json:"sensitivity"`
}

type reservedJSON struct {
	GPUModel string      `json:"gpu_model"`
	Count    int64       `json:"count"`
	Term     string      `json:"term"`
	PerGPU   json.Number `json:"per_gpu"`
	Cost     json.Number `json:"cost"`
}

type baselinesJSON struct {
	AllOnDemand *json.Number `json:"all_on_demand"`
	AllMonthly  *json.Number `json:"all_monthly"`
	PeakSized   *json.Number `json:"peak_sized"`
}

type classJSON struct {
	GPUModel         string        `json:"gpu_model"`
	Reserved         int64         `json:"reserved"`
	Term             string        `json:"term"`
	BreakEvenHours   int64         `json:"break_even_hours"`
	Peak             int64         `json:"peak"`
	OnDemandPeak     int64         `json:"on_demand_peak"`
	DemandGPUHours   int64         `json:"demand_gpu_hours"`
	OnDemandGPUHours int64         `json:"on_demand_gpu_hours"`
	SpotGPUHours     int64         `json:"spot_gpu_hours"`
	ShiftedGPUHours  int64         `json:"shifted_gpu_hours"`
	Cost             json.Number   `json:"cost"`
	ReservedCost     json.Number   `json:"reserved_cost"`
	OnDemandCost     json.Number   `json:"on_demand_cost"`
	BurstLeaseCost   json.Number   `json:"burst_lease_cost"`
	BurstLeases      []burstJSON   `json:"burst_leases"`
	LeasedGPUHours   int64         `json:"leased_gpu_hours"`
	SpotCost         json.Number   `json:"spot_cost"`
	SpotOverhead     json.Number   `json:"spot_reclaim_overhead"`
	IdleShare        json.Number   `json:"idle_share"`
	Baselines        baselinesJSON `json:"baselines"`
	Savings          baselinesJSON `json:"savings"`
	Reason           string        `json:"reason"`
	Hourly           []hourJSON    `json:"hourly,omitempty"`
}

// burstJSON is a burst lease: count GPUs on term from start_hour.
type burstJSON struct {
	GPUModel  string      `json:"gpu_model"`
	Count     int64       `json:"count"`
	Term      string      `json:"term"`
	StartHour int         `json:"start_hour"`
	Hours     int64       `json:"hours"`
	PaidHours int64       `json:"paid_hours"`
	PerGPU    json.Number `json:"per_gpu"`
	Cost      json.Number `json:"cost"`
}

type hourJSON struct {
	Hour     int   `json:"hour"`
	Reserved int64 `json:"reserved"`
	OnDemand int64 `json:"on_demand"`
	Spot     int64 `json:"spot"`
	Deferred int64 `json:"deferred"`
	Leased   int64 `json:"leased"`
}

type scenarioJSON struct {
	DemandChange  string         `json:"demand_change"`
	Reserved      []reservedJSON `json:"reserved"`
	ExpectedCost  json.Number    `json:"expected_cost"`
	OnDemandPeak  int64          `json:"on_demand_peak"`
	SpotShare     json.Number    `json:"spot_share"`
	FixedBaseCost json.Number    `json:"fixed_base_cost"`
}

func reservedOutput(rs []plan.Reservation) []reservedJSON {
	out := []reservedJSON{}
	for _, r := range rs {
		out = append(out, reservedJSON{GPUModel: r.GPUModel, Count: r.Count, Term: r.Term, PerGPU: amount(r.PerGPU), Cost: amount(r.Cost)})
	}
	return out
}

func baselinesOutput(b plan.Baselines) (cost, saving baselinesJSON) {
	pick := func(x plan.Baseline) (*json.Number, *json.Number) {
		if !x.OK {
			return nil, nil
		}
		c, s := amount(x.Cost), shareNumber(x.SavingBP)
		return &c, &s
	}
	cost.AllOnDemand, saving.AllOnDemand = pick(b.AllOnDemand)
	cost.AllMonthly, saving.AllMonthly = pick(b.AllMonthly)
	cost.PeakSized, saving.PeakSized = pick(b.PeakSized)
	return cost, saving
}

func portfolioOutput(p plan.Portfolio, cur core.Currency, hourly bool) portfolioJSON {
	out := portfolioJSON{
		Currency: cur, Start: p.Start.UTC(), Hours: p.Hours, Method: string(p.Method),
		Reserved: reservedOutput(p.Reserved), OnDemandPeak: p.OnDemandPeak, SpotShare: shareNumber(p.SpotShareBP),
		ExpectedCost: amount(p.Cost), ReservedCost: amount(p.ReservedCost), OnDemandCost: amount(p.OnDemandCost),
		BurstLeaseCost: amount(p.BurstLeaseCost), BurstLeases: []burstJSON{},
		SpotCost: amount(p.SpotCost), SpotOverhead: amount(p.SpotOverhead), IdleShare: shareNumber(p.IdleShareBP),
		DemandGPUHours: p.DemandGPUHours, PaidGPUHours: hoursNumber(p.PaidGPUSeconds),
		OnDemandGPUHours: p.OnDemandGPUHours, SpotGPUHours: p.SpotGPUHours, ShiftedGPUHours: p.ShiftedGPUHours,
		Sensitivity: []scenarioJSON{},
	}
	out.Baselines, out.Savings = baselinesOutput(p.Baselines)
	for _, c := range p.Classes {
		cj := classJSON{
			GPUModel: c.GPUModel, Reserved: c.Reserved, BreakEvenHours: c.BreakEvenHours, Peak: c.Peak,
			OnDemandPeak: c.OnDemandPeak, DemandGPUHours: c.DemandGPUHours, OnDemandGPUHours: c.OnDemandGPUHours,
			SpotGPUHours: c.SpotGPUHours, ShiftedGPUHours: c.ShiftedGPUHours, Cost: amount(c.Cost),
			ReservedCost: amount(c.ReservedCost), OnDemandCost: amount(c.OnDemandCost), SpotCost: amount(c.SpotCost),
			BurstLeaseCost: amount(c.BurstLeaseCost), BurstLeases: []burstJSON{}, LeasedGPUHours: c.LeasedGPUHours,
			SpotOverhead: amount(c.SpotOverhead), IdleShare: shareNumber(c.IdleShareBP), Reason: c.Reason,
		}
		if c.HasBase {
			cj.Term = c.Base.Describe()
		}
		cj.Baselines, cj.Savings = baselinesOutput(c.Baselines)
		for _, l := range c.BurstLeases {
			b := burstJSON{GPUModel: c.GPUModel, Count: l.Count, Term: l.Term, StartHour: l.StartHour, Hours: l.Hours,
				PaidHours: l.PaidHours, PerGPU: amount(l.PerGPU), Cost: amount(l.Cost)}
			cj.BurstLeases = append(cj.BurstLeases, b)
			out.BurstLeases = append(out.BurstLeases, b)
		}
		if hourly {
			for h, hp := range c.Hours {
				cj.Hourly = append(cj.Hourly, hourJSON{Hour: h, Reserved: hp.Reserved, OnDemand: hp.OnDemand, Spot: hp.Spot, Deferred: hp.Deferred, Leased: hp.Leased})
			}
		}
		out.Classes = append(out.Classes, cj)
	}
	for _, s := range p.Sensitivity {
		out.Sensitivity = append(out.Sensitivity, scenarioJSON{
			DemandChange: signedPercent(s.ChangeBP), Reserved: reservedOutput(s.Reserved), ExpectedCost: amount(s.Cost),
			OnDemandPeak: s.OnDemandPeak, SpotShare: shareNumber(s.SpotShareBP), FixedBaseCost: amount(s.FixedBaseCost),
		})
	}
	return out
}

func signedPercent(bp int64) string {
	if bp > 0 {
		return "+" + percent(bp)
	}
	return "-" + percent(-bp)
}

func printPortfolio(cmd *cobra.Command, p plan.Portfolio, cur core.Currency) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Demand: %d hours from %s, %d GPU-hours; costs in %s; method %s.\n\n", p.Hours, p.Start.UTC().Format(time.RFC3339), p.DemandGPUHours, cur, p.Method)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tRESERVED\tTERM PER GPU\tON-DEMAND PEAK\tON-DEMAND GPU-H\tLEASED GPU-H\tSPOT GPU-H\tSHIFTED GPU-H\tCOST\tIDLE")
	for _, c := range p.Classes {
		term := "-"
		if c.Reserved > 0 {
			term = fmt.Sprintf("%s (%s)", c.Base.Describe(), c.Base.Total)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", c.GPUModel, c.Reserved, term, c.OnDemandPeak, c.OnDemandGPUHours,
			c.LeasedGPUHours, c.SpotGPUHours, c.ShiftedGPUHours, c.Cost, percent(c.IdleShareBP))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("plan portfolio: write table: %w", err)
	}
	fmt.Fprintf(w, "\nExpected cost %s %s (reserved %s, on demand %s, burst leases %s, spot %s), on-demand peak %d GPUs, spot share %s, idle %s.\n",
		p.Cost, cur, p.ReservedCost, p.OnDemandCost, p.BurstLeaseCost, p.SpotCost, p.OnDemandPeak, percent(p.SpotShareBP), percent(p.IdleShareBP))
	for _, b := range []struct {
		name string
		b    plan.Baseline
	}{{"all on demand", p.Baselines.AllOnDemand}, {"all monthly (peak GPUs)", p.Baselines.AllMonthly}, {"peak-sized fleet", p.Baselines.PeakSized}} {
		if !b.b.OK {
			fmt.Fprintf(w, "  against %s: no price for it in the catalog\n", b.name)
			continue
		}
		fmt.Fprintf(w, "  against %s: %s, saving %s\n", b.name, b.b.Cost, percent(b.b.SavingBP))
	}
	for _, s := range p.Sensitivity {
		var res []string
		for _, r := range s.Reserved {
			res = append(res, fmt.Sprintf("%d × %s", r.Count, r.GPUModel))
		}
		if len(res) == 0 {
			res = []string{"nothing"}
		}
		fmt.Fprintf(w, "Demand %s: reserve %s, cost %s, on-demand peak %d; keeping this plan's base it costs %s.\n",
			signedPercent(s.ChangeBP), strings.Join(res, ", "), s.Cost, s.OnDemandPeak, s.FixedBaseCost)
	}
	for _, c := range p.Classes {
		fmt.Fprintf(w, "\n%s: %s.\n", c.GPUModel, c.Reason)
	}
	return nil
}
