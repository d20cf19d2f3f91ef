package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

func newCatalogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Import, convert and list price catalogs",
		Long: `A catalog lists what providers rent (offers: machine, GPUs, region) and how
each is paid for (plans: on-demand, spot, daily, weekly, monthly terms, with
granularity, minimum charge, time-of-use windows, reclaim models) plus
vouchers. The canonical form is YAML; docs/catalog.md is its reference.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCatalogImportCmd(), newCatalogListCmd())
	return cmd
}

// usageArgs makes an argument-count error a usage error (exit status 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// catalogFormats are the input formats of "catalog import".
var catalogFormats = []string{"aws-csv", "csv", "yaml"}

func newCatalogImportCmd() *cobra.Command {
	var from, out string
	cmd := &cobra.Command{
		Use:   "import [--from aws-csv|csv|yaml] FILE [-o catalog.yaml]",
		Short: "Read a price list and write it as a canonical catalog",
		Long: `Read FILE as the AWS GPU price list (--from aws-csv), a canonical CSV
catalog (csv) or a canonical YAML catalog (yaml), validate it, and write
it as canonical YAML to -o (stdout without -o; a .csv output file gets the
canonical CSV form). Without --from the format follows FILE's extension
(.yaml, .yml, .csv). A summary goes to stderr.`,
		Example: `  gpufleet catalog import --from aws-csv aws_gpu_prices_linux.csv -o catalog.yaml
  gpufleet catalog import examples/catalog.yaml -o catalog.csv`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := args[0]
			format := from
			if format == "" {
				switch strings.ToLower(filepath.Ext(in)) {
				case ".yaml", ".yml":
					format = "yaml"
				case ".csv":
					format = "csv"
				default:
					return usageError{fmt.Errorf("catalog import: cannot tell the format of %q from its extension: give --from %s", in, strings.Join(catalogFormats, "|"))}
				}
			}
			write, err := catalogWriter(out)
			if err != nil {
				return err
			}
			c, err := readCatalog(format, in)
			if err != nil {
				return fmt.Errorf("catalog import: %w", err)
			}
			var buf bytes.Buffer
			if err := write(&buf, c); err != nil {
				return fmt.Errorf("catalog import: %w", err)
			}
			dest := "stdout"
			if out == "" || out == "-" {
				if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
					return fmt.Errorf("catalog import: %w", err)
				}
			} else {
				if err := writeFileAtomic(out, buf.Bytes()); err != nil {
					return fmt.Errorf("catalog import: %w", err)
				}
				dest = out
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "imported %s from %s to %s\n", catalogSummary(c), in, dest)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "input format: aws-csv, csv or yaml (default: by FILE's extension)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file, .yaml/.yml or .csv (default: YAML on stdout)")
	return cmd
}

// readCatalog reads path in the given import format.
func readCatalog(format, path string) (*pricing.Catalog, error) {
	var read func(string, io.Reader) (*pricing.Catalog, error)
	switch format {
	case "aws-csv", "aws":
		read = pricing.ImportAWS
	case "csv":
		read = pricing.ReadCSV
	case "yaml", "yml":
		read = func(name string, r io.Reader) (*pricing.Catalog, error) {
			data, err := io.ReadAll(r)
			if err != nil {
				return nil, err
			}
			return pricing.ParseYAML(name, data)
		}
	default:
		return nil, usageError{fmt.Errorf("--from: invalid value %q: want one of %s", format, strings.Join(catalogFormats, ", "))}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(path, f)
}

// catalogWriter picks the writer for an output path by its extension.
func catalogWriter(out string) (func(io.Writer, *pricing.Catalog) error, error) {
	if out == "" || out == "-" {
		return pricing.WriteYAML, nil
	}
	switch strings.ToLower(filepath.Ext(out)) {
	case ".yaml", ".yml":
		return pricing.WriteYAML, nil
	case ".csv":
		return pricing.WriteCSV, nil
	}
	return nil, usageError{fmt.Errorf("-o: invalid value %q: want a file ending in .yaml, .yml or .csv", out)}
}

// writeFileAtomic writes data to path through a temporary file, so that a
// failed write leaves any old file in place.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// catalogSummary is "1127 offers (1127 on-demand, 872 spot, 785 monthly
// plans), 0 vouchers".
func catalogSummary(c *pricing.Catalog) string {
	n := map[core.BillingMode]int{}
	for _, o := range c.Offers {
		for _, p := range o.Plans {
			n[p.Mode]++
		}
	}
	var parts []string
	for _, m := range core.BillingModes {
		if n[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[m], m))
		}
	}
	plans := "no plans"
	if len(parts) > 0 {
		plans = strings.Join(parts, ", ") + " plans"
	}
	return fmt.Sprintf("%d offers (%s), %d vouchers, in %s", len(c.Offers), plans, len(c.Vouchers), c.Currency)
}

func newCatalogListCmd() *cobra.Command {
	var path, gpu, region string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--catalog FILE] [--gpu MODEL] [--region R] [--json]",
		Short: "List a catalog's offers and their prices",
		Long: `List the offers of a catalog (.yaml or .csv; the embedded demo catalog
without --catalog), optionally only those whose GPU model contains MODEL
and whose region is R (both ignoring case), as a table or as JSON.`,
		Example: `  gpufleet catalog list --catalog catalog.yaml --gpu A100 --region us-east-1
  gpufleet catalog list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadCatalog(path)
			if err != nil {
				return fmt.Errorf("catalog list: %w", err)
			}
			offers := c.Filter(gpu, region)
			if asJSON {
				views := make([]offerJSON, 0, len(offers))
				for i := range offers {
					views = append(views, newOfferJSON(&offers[i]))
				}
				return writeJSON(cmd, views)
			}
			if len(offers) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no offers match (the catalog has %d)\n", len(c.Offers))
				return nil
			}
			return writeOfferTable(cmd.OutOrStdout(), c.Currency, offers)
		},
	}
	f := cmd.Flags()
	f.StringVar(&path, "catalog", "", "catalog file (.yaml or .csv); the embedded demo catalog if empty")
	f.StringVar(&gpu, "gpu", "", "only offers whose GPU model contains this, ignoring case (A100)")
	f.StringVar(&region, "region", "", "only offers in this region (us-east-1)")
	f.BoolVar(&asJSON, "json", false, "print a JSON array of offers")
	return cmd
}

var perAbbrev = map[core.Period]string{
	core.Second: "/s", core.Minute: "/min", core.Hour: "/h", core.Day: "/day", core.Week: "/wk", core.Month: "/mo",
}

func writeOfferTable(w io.Writer, cur core.Currency, offers []core.Offer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tGPU\tGPUS\tMEM/GPU\tPRICES (%s)\n", cur)
	for _, o := range offers {
		var prices []string
		for _, p := range o.Plans {
			s := fmt.Sprintf("%s %s%s", p.Mode, p.Price, perAbbrev[p.Per])
			if p.Committed() && p.Term != p.Per.Seconds() {
				s += fmt.Sprintf(" (%s term)", spanText(p.Term))
			}
			if p.TimeOfUse != nil {
				s += " (time-of-use)"
			}
			prices = append(prices, s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", o.ID, o.GPUModel, o.GPUs, memText(o.GPUMemMiB), strings.Join(prices, ", "))
	}
	return tw.Flush()
}

// memText shows MiB as GiB when whole: "40 GiB", "512 MiB", "-".
func memText(mib int64) string {
	switch {
	case mib == 0:
		return "-"
	case mib%1024 == 0:
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}

// spanText shows seconds in the largest whole period: "3 months", "2 weeks".
func spanText(sec int64) string {
	for i := len(core.Periods) - 1; i >= 0; i-- {
		p := core.Periods[i]
		if sec%p.Seconds() == 0 {
			n := sec / p.Seconds()
			if n == 1 {
				return "1 " + string(p)
			}
			return fmt.Sprintf("%d %ss", n, p)
		}
	}
	return fmt.Sprintf("%ds", sec)
}

// offerJSON is an offer as "catalog list --json" prints it. Its keys
// follow the API's offer view; money is an exact decimal number.
type offerJSON struct {
	ID           string        `json:"id"`
	Provider     string        `json:"provider"`
	Region       string        `json:"region"`
	InstanceType string        `json:"instance_type"`
	GPUModel     string        `json:"gpu_model"`
	GPUs         int           `json:"gpus"`
	GPUMemMiB    int64         `json:"gpu_memory_mib"`
	VCPUs        int           `json:"vcpus"`
	MemoryMiB    int64         `json:"memory_mib"`
	Currency     core.Currency `json:"currency"`
	Plans        []planJSON    `json:"plans"`
}

type planJSON struct {
	Mode        core.BillingMode `json:"mode"`
	Price       json.Number      `json:"price"`
	Per         core.Period      `json:"per"`
	Granularity int64            `json:"granularity_seconds"`
	MinCharge   int64            `json:"min_charge_seconds,omitempty"`
	Term        int64            `json:"term_seconds,omitempty"`
	// HourlyEquivalent is the price per machine-hour.
	HourlyEquivalent json.Number      `json:"hourly_equivalent"`
	EarlyTermination *earlyTermJSON   `json:"early_termination,omitempty"`
	Series           []pricePointJSON `json:"series,omitempty"`
	ReclaimBucket    string           `json:"reclaim_bucket,omitempty"`
	Reclaim          *reclaimJSON     `json:"reclaim,omitempty"`
	TimeOfUse        bool             `json:"time_of_use,omitempty"`
	TimeZone         string           `json:"time_zone,omitempty"`
	Windows          []windowJSON     `json:"time_of_use_windows,omitempty"`
}

type earlyTermJSON struct {
	Granularity int64       `json:"granularity_seconds"`
	Fee         json.Number `json:"fee"`
}

type pricePointJSON struct {
	At    time.Time   `json:"at"`
	Price json.Number `json:"price"`
}

type reclaimJSON struct {
	Bucket        string `json:"bucket,omitempty"`
	MonthlyRateBP int64  `json:"monthly_rate_bp"`
	NoticeSeconds int64  `json:"notice_seconds"`
}

type windowJSON struct {
	Weekdays     []string `json:"weekdays"`
	StartHour    int      `json:"start_hour"`
	EndHour      int      `json:"end_hour"`
	MultiplierBP int64    `json:"multiplier_bp"`
}

func newOfferJSON(o *core.Offer) offerJSON {
	v := offerJSON{ID: o.ID, Provider: o.Provider, Region: o.Region, InstanceType: o.InstanceType, GPUModel: o.GPUModel,
		GPUs: o.GPUs, GPUMemMiB: o.GPUMemMiB, VCPUs: o.VCPUs, MemoryMiB: o.MemoryMiB, Currency: o.Currency, Plans: []planJSON{}}
	for _, p := range o.Plans {
		pv := planJSON{Mode: p.Mode, Price: exactAmount(p.Price), Per: p.Per, Granularity: p.Granularity, MinCharge: p.MinCharge, Term: p.Term,
			HourlyEquivalent: exactAmount(core.Micros(core.MulDivHalfEven(int64(p.Price), 3600, p.Per.Seconds())))}
		if et := p.EarlyTermination; et != nil {
			pv.EarlyTermination = &earlyTermJSON{Granularity: et.Granularity, Fee: exactAmount(et.Fee)}
		}
		for _, pt := range p.Series {
			pv.Series = append(pv.Series, pricePointJSON{At: pt.At.UTC(), Price: exactAmount(pt.Price)})
		}
		if r := p.Reclaim; r != nil {
			pv.ReclaimBucket = r.Bucket
			pv.Reclaim = &reclaimJSON{Bucket: r.Bucket, MonthlyRateBP: r.MonthlyRateBP, NoticeSeconds: r.NoticeSeconds}
		}
		if t := p.TimeOfUse; t != nil {
			pv.TimeOfUse, pv.TimeZone = true, t.Location.String()
			for _, w := range t.Windows {
				days := make([]string, len(w.Weekdays))
				for i, d := range w.Weekdays {
					days[i] = strings.ToLower(d.String()[:3])
				}
				pv.Windows = append(pv.Windows, windowJSON{Weekdays: days, StartHour: w.StartHour, EndHour: w.EndHour, MultiplierBP: w.MultiplierBP})
			}
		}
		v.Plans = append(v.Plans, pv)
	}
	return v
}

// exactAmount renders micros as an exact JSON number: 900, 21.957642.
func exactAmount(m core.Micros) json.Number {
	s := m.String()
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return json.Number(s)
}
