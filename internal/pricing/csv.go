package pricing

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The canonical CSV columns, in the order WriteCSV writes them. See
// docs/catalog.md for what each means.
var csvColumnNames = []string{
	"id", "provider", "region", "instance_type", "gpu_model", "gpu_count", "gpu_memory_gib",
	"vcpus", "memory_gib", "currency", "accelerator", "capability",
	"hourly", "daily", "weekly", "monthly", "spot_hourly",
	"granularity", "min_charge_seconds",
	"spot_reclaim_bucket", "spot_reclaim_rate", "spot_notice_seconds",
}

var csvRequired = []string{"provider", "region", "instance_type", "gpu_model", "gpu_count", "currency"}

// csvFields maps Validate's field names to canonical CSV columns.
var csvFields = csvColumns{
	"id": "id", "provider": "provider", "region": "region", "instance_type": "instance_type",
	"gpu_model": "gpu_model", "gpus": "gpu_count", "gpu_memory_gib": "gpu_memory_gib",
	"vcpus": "vcpus", "memory_gib": "memory_gib", "currency": "currency",
	"accelerator": "accelerator", "capability": "capability",
	"plan.granularity": "granularity", "plan.min_charge": "min_charge_seconds",
	"plan.reclaim.bucket": "spot_reclaim_bucket", "plan.reclaim.monthly_rate": "spot_reclaim_rate",
	"plan.reclaim.notice": "spot_notice_seconds",
	"alt.id":              "instance_type",
}

// csvPlanColumns are the price columns, each one plan, in the order
// ReadCSV adds the plans.
var csvPlanColumns = []struct {
	col    string
	mode   core.BillingMode
	per    core.Period
	commit bool
}{
	{"hourly", core.OnDemand, core.Hour, false},
	{"spot_hourly", core.Spot, core.Hour, false},
	{"daily", core.Daily, core.Day, true},
	{"weekly", core.Weekly, core.Week, true},
	{"monthly", core.Monthly, core.Month, true},
}

// AWS's price list has these columns; seeing them in a canonical CSV
// means the wrong reader was chosen.
func awsHint(header []string) string {
	for _, h := range header {
		if h == "ondemand_usd_per_hr" {
			return " (this looks like the AWS price list: import it with ImportAWS, gpufleet catalog import --from aws-csv)"
		}
	}
	return ""
}

// ReadCSV reads a catalog in the canonical CSV form: a header row, then one
// offer per row (docs/catalog.md lists the columns). Columns are matched by
// name in any order; an unknown column is an error, a missing optional one
// is empty. An empty price cell means the plan is not offered. Every row
// must have the same currency. Errors are *ParseError with the line,
// column and value.
func ReadCSV(name string, r io.Reader) (*Catalog, error) {
	t, err := newCSVTable(name, r, csvColumnNames, csvRequired, awsHint)
	if err != nil {
		return nil, err
	}
	c := &Catalog{}
	var places []csvPlace
	firstLine := 0
	for {
		row, err := t.next()
		if err != nil {
			return nil, err
		}
		if row == nil {
			break
		}
		o, cols, err := csvOffer(row)
		if err != nil {
			return nil, err
		}
		if c.Currency == "" {
			c.Currency, firstLine = o.Currency, row.line
		} else if o.Currency != c.Currency {
			return nil, row.bad("currency", fmt.Sprintf("%s as on line %d (one catalog has one currency)", c.Currency, firstLine), nil)
		}
		c.Offers = append(c.Offers, o)
		places = append(places, csvPlace{row: row, planCols: cols})
	}
	if len(c.Offers) == 0 {
		return nil, &ParseError{File: name, Line: 1, Problem: "no offers", Allowed: "at least one row after the header"}
	}
	if err := c.Validate(); err != nil {
		return nil, locateCSV(name, err, places, csvFields)
	}
	return c, nil
}

func csvOffer(row *csvRow) (core.Offer, []string, error) {
	o := core.Offer{
		ID:           row.get("id"),
		Provider:     row.get("provider"),
		Region:       row.get("region"),
		InstanceType: row.get("instance_type"),
		GPUModel:     row.get("gpu_model"),
	}
	if o.ID == "" {
		o.ID = defaultID(o.Provider, o.Region, o.InstanceType)
	}
	cur, err := core.ParseCurrency(row.get("currency"))
	if err != nil {
		return o, nil, row.bad("currency", "an ISO 4217 code such as USD, EUR, CNY", err)
	}
	o.Currency = cur
	var ok bool
	if o.GPUs, o.SliceMilli, ok = parseGPUCount(row.get("gpu_count")); !ok {
		return o, nil, row.bad("gpu_count", gpuCountAllowed, nil)
	}
	if s := row.get("accelerator"); s != "" {
		if o.Accelerator, err = core.ParseAccelerator("accelerator", s); err != nil {
			return o, nil, row.bad("accelerator", accelAllowed, nil)
		}
	}
	if s := row.get("capability"); s != "" {
		if o.Capability, err = core.ParseWorkload("capability", s); err != nil {
			return o, nil, row.bad("capability", capAllowed, nil)
		}
	}
	withGuessedHardware(&o)
	n, err := csvInt(row, "vcpus", 0, maxVCPUs, false)
	if err != nil {
		return o, nil, err
	}
	o.VCPUs = int(n)
	if o.GPUMemMiB, err = csvGiB(row, "gpu_memory_gib", "GiB of memory per GPU in whole MiB, such as 40"); err != nil {
		return o, nil, err
	}
	if o.MemoryMiB, err = csvGiB(row, "memory_gib", "GiB of host memory in whole MiB, such as 1152 or 30.5"); err != nil {
		return o, nil, err
	}
	gran := core.Hour.Seconds()
	if s := row.get("granularity"); s != "" {
		if gran, err = core.ParseSpan(s); err != nil {
			return o, nil, row.bad("granularity", spanAllowed, err)
		}
	}
	var minCharge int64
	if s := row.get("min_charge_seconds"); s != "" {
		if minCharge, err = parseSpanOrZero(s); err != nil {
			return o, nil, row.bad("min_charge_seconds", "whole seconds >= 0, such as 60", err)
		}
	}
	var cols []string
	for _, pc := range csvPlanColumns {
		s := row.get(pc.col)
		if s == "" {
			continue
		}
		price, err := core.ParseMicros(s)
		if err != nil {
			return o, nil, row.bad(pc.col, "a price >= 0 per "+string(pc.per)+", such as 21.958, or empty when not offered", err)
		}
		p := core.PricePlan{Mode: pc.mode, Price: price, Per: pc.per, Granularity: gran, MinCharge: minCharge}
		if pc.commit {
			p.Term, p.Granularity, p.MinCharge = pc.per.Seconds(), pc.per.Seconds(), 0
		}
		o.Plans = append(o.Plans, p)
		cols = append(cols, pc.col)
	}
	if err := csvReclaim(row, &o); err != nil {
		return o, nil, err
	}
	if len(o.Plans) == 0 {
		return o, nil, &ParseError{File: row.t.file, Line: row.line, Problem: "a row without a price", Allowed: "a price in at least one of hourly, daily, weekly, monthly, spot_hourly"}
	}
	return o, cols, nil
}

func csvReclaim(row *csvRow, o *core.Offer) error {
	bucket, rate, notice := row.get("spot_reclaim_bucket"), row.get("spot_reclaim_rate"), row.get("spot_notice_seconds")
	if bucket == "" && rate == "" && notice == "" {
		return nil
	}
	spot, ok := o.Plan(core.Spot)
	if !ok {
		col := "spot_reclaim_rate"
		if rate == "" {
			col = "spot_reclaim_bucket"
			if bucket == "" {
				col = "spot_notice_seconds"
			}
		}
		return row.bad(col, "empty unless the row has a spot_hourly price", nil)
	}
	const rateAllowed = "a monthly reclaim probability 0%..100%, such as 25% (at most two decimals)"
	if rate == "" {
		return row.bad("spot_reclaim_rate", rateAllowed+"; required with spot_reclaim_bucket or spot_notice_seconds", nil)
	}
	bp, ok := parsePercentBP(rate)
	if !ok || bp < 0 || bp > 10000 {
		return row.bad("spot_reclaim_rate", rateAllowed, nil)
	}
	r := &core.ReclaimModel{Bucket: bucket, MonthlyRateBP: bp}
	if notice != "" {
		var err error
		if r.NoticeSeconds, err = parseSpanOrZero(notice); err != nil {
			return row.bad("spot_notice_seconds", "whole seconds >= 0, such as 120", err)
		}
	}
	spot.Reclaim = r
	return nil
}

func csvInt(row *csvRow, col string, lo, hi int64, required bool) (int64, error) {
	s := row.get(col)
	allowed := fmt.Sprintf("a whole number %d..%d", lo, hi)
	if s == "" {
		if required {
			return 0, row.bad(col, allowed, nil)
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, row.bad(col, allowed, err)
	}
	return n, nil
}

func csvGiB(row *csvRow, col, allowed string) (int64, error) {
	s := row.get(col)
	if s == "" {
		return 0, nil
	}
	v, ok := parseGiBToMiB(s)
	if !ok {
		return 0, row.bad(col, allowed, nil)
	}
	return v, nil
}

// WriteCSV writes c in the canonical CSV form. The form has no vouchers
// and only the plans its columns describe: on-demand and spot priced per
// hour sharing one granularity and minimum charge, daily, weekly and
// monthly terms of one period billed per term, and a spot reclaim model; no
// time-of-use, series or early termination. A catalog with anything else is
// an error naming the offer and plan: write YAML instead. Plans are read
// back in the column order (on-demand, spot, daily, weekly, monthly).
func WriteCSV(w io.Writer, c *Catalog) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	if len(c.Vouchers) > 0 {
		return fmt.Errorf("write csv: the catalog has %d vouchers and the CSV form has none: write YAML instead", len(c.Vouchers))
	}
	if len(c.Offers) == 0 {
		return fmt.Errorf("write csv: the catalog has no offers and the CSV form needs at least one row: write YAML instead")
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumnNames); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	for i := range c.Offers {
		rec, err := csvRecord(&c.Offers[i])
		if err != nil {
			return fmt.Errorf("write csv: offer %q: %w", c.Offers[i].ID, err)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

func csvRecord(o *core.Offer) ([]string, error) {
	cell := map[string]string{
		"id": o.ID, "provider": o.Provider, "region": o.Region, "instance_type": o.InstanceType,
		"gpu_model": o.GPUModel, "gpu_count": FormatGPUCount(o), "currency": string(o.Currency),
	}
	a, c := writtenHardware(o)
	cell["accelerator"], cell["capability"] = string(a), string(c)
	if o.GPUMemMiB != 0 {
		cell["gpu_memory_gib"] = formatMiBAsGiB(o.GPUMemMiB)
	}
	if o.VCPUs != 0 {
		cell["vcpus"] = strconv.Itoa(o.VCPUs)
	}
	if o.MemoryMiB != 0 {
		cell["memory_gib"] = formatMiBAsGiB(o.MemoryMiB)
	}
	var shared *core.PricePlan
	for i := range o.Plans {
		p := &o.Plans[i]
		no := func(what string) error {
			return fmt.Errorf("plan %s: the CSV form cannot express %s: write YAML instead", p.Mode, what)
		}
		switch {
		case p.TimeOfUse != nil:
			return nil, no("time-of-use windows")
		case p.EarlyTermination != nil:
			return nil, no("early termination")
		case len(p.Series) > 0:
			return nil, no("a price series")
		}
		for _, pc := range csvPlanColumns {
			if pc.mode != p.Mode {
				continue
			}
			if p.Per != pc.per {
				return nil, no("a price per " + string(p.Per) + " (its column " + pc.col + " is per " + string(pc.per) + ")")
			}
			if pc.commit {
				if p.Term != pc.per.Seconds() || p.Granularity != p.Term || p.MinCharge != 0 {
					return nil, no(fmt.Sprintf("a term of %s billed per %s with a minimum charge of %s (the column means a term of 1 %s billed whole)",
						formatSpan(p.Term), formatSpan(p.Granularity), formatSpan(p.MinCharge), pc.per))
				}
			} else {
				if shared != nil && (shared.Granularity != p.Granularity || shared.MinCharge != p.MinCharge) {
					return nil, no("on-demand and spot plans with different granularities or minimum charges")
				}
				shared = p
				cell["granularity"] = formatSpan(p.Granularity)
				cell["min_charge_seconds"] = strconv.FormatInt(p.MinCharge, 10)
			}
			cell[pc.col] = p.Price.String()
		}
		if r := p.Reclaim; r != nil {
			cell["spot_reclaim_bucket"] = r.Bucket
			cell["spot_reclaim_rate"] = formatPercentBP(r.MonthlyRateBP)
			cell["spot_notice_seconds"] = strconv.FormatInt(r.NoticeSeconds, 10)
		}
	}
	rec := make([]string, len(csvColumnNames))
	for i, col := range csvColumnNames {
		rec[i] = cell[col]
	}
	return rec, nil
}
