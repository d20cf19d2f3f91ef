package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/audit/load"
	"github.com/gpufleet/gpufleet/internal/report"
	"github.com/spf13/cobra"
)

// auditFormats are the output formats of report audit.
var auditFormats = []string{"html", "csv", "json"}

// writeAudit renders r in format (html, csv or json).
func writeAudit(w io.Writer, r audit.Report, format string) error {
	switch format {
	case "html":
		return report.WriteAuditHTML(w, r)
	case "csv":
		return report.WriteAuditCSV(w, r)
	case "json":
		return report.WriteAuditJSON(w, r)
	}
	return fmt.Errorf("--format: invalid value %q: want one of %s", format, strings.Join(auditFormats, ", "))
}

func newAuditCmd() *cobra.Command {
	var from, to, team, format, db, catalogPath, out, period, tz, asOf, utilPath string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Audit spend, idle spend and utilization per team, GPU model and job, with right-sizing advice",
		Long: `Read the store directly and audit [from, to) by calendar month (or week):
paid, allocated and busy GPU-hours, cost with its idle part on its own line,
zombies found and released, alerts; and recommendations, each with the saving
it is worth in its period and the numbers behind it: right-size memory,
right-size count, GPU-model downgrade, lease changes (the planner's base for
the observed demand) and moving deferrable work off-peak. docs/audit.md says
what every line means.

--from and --to take a month (2026-11), a date (2026-11-02), both in --tz, or
an RFC 3339 time; --to is exclusive.`,
		Example: `  gpufleet report audit --from 2026-11 --to 2026-12 --format html -o audit-2026-11.html
  gpufleet report audit --from 2026-11-02 --to 2026-11-30 --period week --team vision --format csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format = strings.ToLower(format)
			if !slices.Contains(auditFormats, format) {
				return usageError{fmt.Errorf("--format: invalid value %q: want one of %s", format, strings.Join(auditFormats, ", "))}
			}
			loc, err := audit.ParseLocation(tz)
			if err != nil {
				return usageError{fmt.Errorf("--%w", err)}
			}
			kind, err := audit.ParsePeriodKind(period)
			if err != nil {
				return usageError{fmt.Errorf("--%w", err)}
			}
			if from == "" || to == "" {
				return usageError{fmt.Errorf("--from and --to are required: a month (2026-11), a date (2026-11-02) or an RFC 3339 time")}
			}
			f, err := audit.ParseTime("from", from, loc)
			if err != nil {
				return usageError{fmt.Errorf("--%w", err)}
			}
			t, err := audit.ParseTime("to", to, loc)
			if err != nil {
				return usageError{fmt.Errorf("--%w", err)}
			}
			now := time.Now()
			if asOf != "" {
				if now, err = audit.ParseTime("as-of", asOf, loc); err != nil {
					return usageError{fmt.Errorf("--%w", err)}
				}
			}
			c, err := loadCatalog(catalogPath)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if !strings.Contains(db, "://") {
				// An audit reads: it must not create an empty SQLite file.
				if _, err := os.Stat(db); err != nil {
					return fmt.Errorf("report audit: --db: no store at %s (%w)", db, err)
				}
			}
			st, err := openStore(ctx, db, false, nil)
			if err != nil {
				return fmt.Errorf("report audit: %w", err)
			}
			defer st.Close()
			in, err := load.Input(ctx, st, c.Offers, c.Currency, load.Query{From: f, To: t, Now: now, Location: loc, Period: kind, Team: team})
			if err != nil {
				return fmt.Errorf("report audit: %w", err)
			}
			if utilPath != "" {
				u, err := loadUtil(utilPath)
				if err != nil {
					return fmt.Errorf("report audit: %w", err)
				}
				var n int
				in, n = audit.WithUtil(in, u)
				fmt.Fprintf(cmd.ErrOrStderr(), "--util %s: %d ids, utilization of %d runs taken from it\n", utilPath, len(u.IDs()), n)
			}
			r, err := audit.Audit(in)
			if err != nil {
				return fmt.Errorf("report audit: %w", err)
			}
			var buf bytes.Buffer
			if err := writeAudit(&buf, r, format); err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("report audit: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d periods, %d recommendations, possible saving %s %s\n", out, len(r.Periods), len(r.Recommendations), r.Saving, r.Currency)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "start of the range (inclusive): 2026-11, 2026-11-02 or an RFC 3339 time")
	fl.StringVar(&to, "to", "", "end of the range (exclusive), same forms as --from")
	fl.StringVar(&team, "team", "", "one team's report: its lines, jobs, alerts and recommendations only")
	fl.StringVar(&format, "format", "html", "output format: html, csv or json")
	fl.StringVar(&period, "period", "month", "audit period: month or week (calendar, in --tz)")
	fl.StringVar(&tz, "tz", "UTC", "IANA time zone of the calendar periods and of dates in --from/--to")
	fl.StringVar(&db, "db", "gpufleet.db", "store: a SQLite file path, or a postgres:// URL")
	fl.StringVar(&catalogPath, "catalog", "", "catalog file (.yaml or .csv) the leases are priced by; the embedded demo catalog if empty")
	fl.StringVar(&asOf, "as-of", "", "read the data as of this time (open leases and runs count up to it); now if empty")
	fl.StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	fl.StringVar(&utilPath, "util", "", "GPU utilization series, CSV id,time,utilization (0..1 or 0%..100%) per job or pod: the utilization evidence of the runs it covers, in place of the agents' samples")
	return cmd
}
