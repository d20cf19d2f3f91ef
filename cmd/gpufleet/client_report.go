package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newUsageCmd() *cobra.Command {
	var cf clientFlags
	var from, to, team string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Cost and utilization per team over a range, from the server (GET /api/v1/reports/usage)",
		Long: `Cost and utilization per team over [--from, --to) (default: this month so far):
the team's share of the charges incurred in the range, allocated, sampled and busy
GPU-hours. An admin also sees the bill, the paid GPU-hours and the idle line; the
lines and the idle line sum to the bill to the micro-unit. The dashboard and the
API show the very same numbers (billing.UsageReport).`,
		Example: `  gpufleet report usage --from 2026-03-01T00:00:00Z --to 2026-04-01T00:00:00Z
  gpufleet report usage --team ml --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var f, t time.Time
			for _, x := range []struct {
				name, v string
				dst     *time.Time
			}{{"--from", from, &f}, {"--to", to, &t}} {
				if x.v == "" {
					continue
				}
				v, err := time.Parse(time.RFC3339, x.v)
				if err != nil {
					return usageError{fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-03-01T00:00:00Z", x.name, x.v)}
				}
				*x.dst = v
			}
			r, err := c.UsageReport(cmd.Context(), f, t, team)
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(cmd, r)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "usage %s to %s (%s)\n", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.Currency)
			rows := [][]string{}
			for _, l := range r.Teams {
				rows = append(rows, []string{l.Team, string(l.Cost), string(l.AllocatedGPUHours), string(l.SampledGPUHours), string(l.BusyGPUHours)})
			}
			if r.Idle != nil {
				rows = append(rows, []string{r.Idle.Team, string(r.Idle.Cost), string(r.Idle.AllocatedGPUHours), "-", "-"})
			}
			if r.Bill != "" {
				rows = append(rows, []string{"total", string(r.Bill), string(r.PaidGPUHours) + " paid", "", ""})
			}
			return table(w, []string{"TEAM", "COST", "GPU-HOURS", "SAMPLED", "BUSY"}, rows)
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&from, "from", "", "start, RFC 3339 (default: the first of this month)")
	cmd.Flags().StringVar(&to, "to", "", "end, RFC 3339, exclusive (default: now)")
	cmd.Flags().StringVar(&team, "team", "", "only this team's line")
	return cmd
}
