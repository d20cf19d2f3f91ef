package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/api"
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
				views := make([]api.OfferView, 0, len(offers))
				for i := range offers {
					views = append(views, api.NewOfferView(&offers[i]))
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
	fmt.Fprintf(tw, "ID\tGPU\tGPUS\tMEM/GPU\tACCELERATOR\tRUNS\tPRICES (%s)\n", cur)
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
		runs := "training, inference"
		if !core.Runs(o.Capability, core.Training) {
			runs = "inference only"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.ID, o.GPUModel, pricing.FormatGPUCount(&o), memText(o.MemPerGPUMiB()),
			o.Accelerator.Or(), runs, strings.Join(prices, ", "))
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
