package main

import (
	"io"

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
	cmd := &cobra.Command{
		Use:   "gen [--jobs N] [--seed S] [-o FILE]",
		Short: "Generate a synthetic trace (diurnal arrivals, tier and size mixes) in the generic CSV form",
		Long: `Generate a synthetic trace: arrivals follow the hour of the day around a peak, GPU
counts, fractional shares, tiers and lognormal durations follow mixes whose
defaults come from the Helios excerpt (docs/traces.md). Deterministic per seed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.StringVarP(&out, "output", "o", "-", "output file (- for stdout)")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr (shown only when stderr is a terminal)")
	return cmd
}
