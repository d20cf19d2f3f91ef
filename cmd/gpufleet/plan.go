package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
)

// newPlanCmd returns "gpufleet plan", offline planning. Each planner of
// internal/plan gets a subcommand here: "term" today; "job" (demand from
// benchmarks) and "portfolio" (a mix of offers) are to come and will be
// added next to it.
func newPlanCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan offline: which leases to rent for known work",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newPlanTermCmd())
	// Later: cmd.AddCommand(newPlanJobCmd(), newPlanPortfolioCmd())
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
func amount(m core.Micros) json.Number { return json.Number(m.String()) }

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
