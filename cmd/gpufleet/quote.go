package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/spf13/cobra"
)

// loadCatalog loads path, or the embedded demo catalog when path is empty.
func loadCatalog(path string) (*pricing.Catalog, error) {
	if path == "" {
		return pricing.Demo(), nil
	}
	return pricing.Load(path)
}

func newQuoteCmd() *cobra.Command {
	var (
		catalogPath, offer, mode, start, end string
		count                                int
		asJSON                               bool
	)
	cmd := &cobra.Command{
		Use:   "quote",
		Short: "Price a lease of an offer in a billing mode over [start, end)",
		Long: `Price count machines of one offer, rented in one billing mode from start to end,
exactly under the plan's rules: granularity, minimum charge, committed term,
early termination, spot price series, time-of-use windows and vouchers.`,
		Example: `  gpufleet quote --offer idc-chengdu/cd1/v100x8 --mode weekly --start 2026-03-02T00:00:00Z --end 2026-03-16T00:00:00Z`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadCatalog(catalogPath)
			if err != nil {
				return err
			}
			req := api.QuoteRequest{Offer: offer, Mode: mode, Count: count}
			if req.Start, err = parseTimeFlag("start", start); err != nil {
				return err
			}
			if req.End, err = parseTimeFlag("end", end); err != nil {
				return err
			}
			q, err := api.Quote(c, req)
			if err != nil {
				return fmt.Errorf("quote: %w", err)
			}
			v := api.NewQuoteView(q)
			if asJSON {
				return writeJSON(cmd, v)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s, %s, %d machine(s), %s → %s\n", v.Offer, v.Mode, v.Count, v.Start.Format(time.RFC3339), v.End.Format(time.RFC3339))
			fmt.Fprintf(out, "  used %s, billed %s (paid until %s)\n", human(v.UsedSeconds), human(v.BilledSeconds), v.PaidUntil.Format(time.RFC3339))
			fmt.Fprintf(out, "  per machine %s %s (usage %s, fee %s)\n", v.PerMachine, v.Currency, v.Usage, v.Fee)
			fmt.Fprintf(out, "  total       %s %s\n", v.Total, v.Currency)
			ids := make([]string, 0, len(v.Credits))
			for id := range v.Credits {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				fmt.Fprintf(out, "  voucher %s: -%s %s\n", id, v.Credits[id], v.Currency)
			}
			fmt.Fprintf(out, "  net         %s %s\n", v.Net, v.Currency)
			if v.ExpectedReclaims != "" {
				fmt.Fprintf(out, "  expected spot reclaims per machine: %s\n", v.ExpectedReclaims)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&catalogPath, "catalog", "", "catalog file (.yaml or .csv); the embedded demo catalog if empty")
	f.StringVar(&offer, "offer", "", "offer id, as `gpufleet catalog list` shows")
	f.StringVar(&mode, "mode", "on-demand", "billing mode: on-demand, spot, daily, weekly, monthly")
	f.StringVar(&start, "start", "", "lease start, RFC 3339")
	f.StringVar(&end, "end", "", "lease end, RFC 3339")
	f.IntVar(&count, "count", 1, "number of machines")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("offer")
	_ = cmd.MarkFlagRequired("start")
	_ = cmd.MarkFlagRequired("end")
	return cmd
}

func parseTimeFlag(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--%s: invalid value %q: want an RFC 3339 time such as 2026-03-02T10:00:00Z", name, v)}
	}
	return t, nil
}

// human renders seconds as "14d", "3h20m", "45s".
func human(sec int64) string {
	d := time.Duration(sec) * time.Second
	switch {
	case sec >= 86400 && sec%3600 == 0:
		days, hours := sec/86400, (sec%86400)/3600
		if hours == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, hours)
	default:
		return d.String()
	}
}
