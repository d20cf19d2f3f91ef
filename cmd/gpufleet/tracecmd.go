package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"

	"github.com/gpufleet/gpufleet/internal/progress"
	"github.com/gpufleet/gpufleet/internal/trace"
	"github.com/spf13/cobra"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Work with traces: generate synthetic ones", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	cmd.AddCommand(newTraceGenCmd())
	return cmd
}

func newTraceGenCmd() *cobra.Command {
	cfg := trace.DefaultGenConfig()
	var seed uint64
	var out string
	var quiet bool
	var deadlinePct float64
	slack, grace := "1.2-3", 10*time.Minute
	cmd := &cobra.Command{
		Use:   "gen [--jobs N] [--seed S] [--deadlines PCT [--deadline-slack MIN-MAX] [--deadline-grace D]] [-o FILE]",
		Short: "Generate a synthetic trace (diurnal arrivals, tier and size mixes) in the generic CSV form",
		Long: `Generate a synthetic trace: arrivals follow the hour of the day around a peak, GPU
counts, fractional shares, tiers and lognormal durations follow mixes whose
defaults come from the Helios excerpt (docs/traces.md). Deterministic per seed.
--deadlines PCT gives that share of the jobs a deadline: submit + duration × a
factor drawn uniformly from --deadline-slack + --deadline-grace.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := deadlineFlags(&cfg, deadlinePct, slack, grace); err != nil {
				return usageError{err}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			disp := progress.For(cmd.ErrOrStderr(), quiet)
			defer disp.Close()
			gen := disp.Task("generate", cfg.Jobs)
			t := trace.GenerateProgress(cfg, seed, gen.Set)
			gen.Done()
			write := disp.Task("write", len(t.Jobs))
			defer write.Done()
			return writeTo(cmd, out, func(w io.Writer) error { return trace.WriteGenericProgress(w, t, write.Set) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "number of jobs")
	f.Int64Var(&cfg.RatePerHour, "rate", cfg.RatePerHour, "mean arrivals per hour")
	f.IntVar(&cfg.PeakHour, "peak-hour", cfg.PeakHour, "hour of the day with the most arrivals")
	f.IntVar(&cfg.Teams, "teams", cfg.Teams, "number of teams")
	f.Float64Var(&deadlinePct, "deadlines", 0, "percent of the jobs with a deadline (0..100)")
	f.StringVar(&slack, "deadline-slack", slack, "range of the deadline's factor on the duration, MIN-MAX (each 1..1000)")
	f.DurationVar(&grace, "deadline-grace", grace, "time added to every deadline (provisioning, queueing)")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.StringVarP(&out, "output", "o", "-", "output file (- for stdout)")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr (shown only when stderr is a terminal)")
	return cmd
}

// deadlineFlags sets cfg's deadline fields from --deadlines (percent),
// --deadline-slack (MIN-MAX factors) and --deadline-grace.
func deadlineFlags(cfg *trace.GenConfig, pct float64, slack string, grace time.Duration) error {
	if pct < 0 || pct > 100 || math.IsNaN(pct) {
		return &core.FieldError{Field: "--deadlines", Value: fmt.Sprint(pct), Allowed: "a percentage 0..100"}
	}
	if pct == 0 {
		return nil
	}
	lo, hi, ok := strings.Cut(slack, "-")
	if !ok {
		hi = lo
	}
	a, errA := strconv.ParseFloat(strings.TrimSpace(lo), 64)
	b, errB := strconv.ParseFloat(strings.TrimSpace(hi), 64)
	if errA != nil || errB != nil || !(a >= 1) || b < a || b > 1000 {
		return &core.FieldError{Field: "--deadline-slack", Value: slack, Allowed: "MIN-MAX factors with 1 <= MIN <= MAX <= 1000, such as 1.2-3"}
	}
	if grace < 0 || grace > 30*24*time.Hour || grace%time.Second != 0 {
		return &core.FieldError{Field: "--deadline-grace", Value: grace.String(), Allowed: "whole seconds 0s..720h"}
	}
	cfg.DeadlinePermille = int64(math.Round(pct * 10))
	cfg.DeadlineSlackMin, cfg.DeadlineSlackMax = int64(math.Round(a*1000)), int64(math.Round(b*1000))
	cfg.DeadlineGrace = int64(grace / time.Second)
	return nil
}
