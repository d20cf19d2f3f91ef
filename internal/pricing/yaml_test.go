package pricing

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestExampleCatalog(t *testing.T) {
	c, err := Load("../../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Currency != "USD" || len(c.Offers) != 3 || len(c.Vouchers) != 1 {
		t.Fatalf("catalog: %s, %d offers, %d vouchers", c.Currency, len(c.Offers), len(c.Vouchers))
	}
	p4d, err := c.Offer("aws/us-east-1/p4d.24xlarge")
	if err != nil {
		t.Fatal(err)
	}
	od, _ := p4d.Plan(core.OnDemand)
	if od.Price != 21_957_642 || od.Per != core.Hour || od.Granularity != 1 || od.MinCharge != 60 {
		t.Errorf("on-demand plan %+v", od)
	}
	if p4d.GPUMemMiB != 40*1024 || p4d.MemoryMiB != 1152*1024 {
		t.Errorf("memory %d, %d MiB", p4d.GPUMemMiB, p4d.MemoryMiB)
	}
	spot, _ := p4d.Plan(core.Spot)
	wantSeries := []core.PricePoint{
		{At: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), Price: 8_100_000},
		{At: time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC), Price: 9_350_000},
	}
	if spot.Price != 8_590_750 || len(spot.Series) != 2 || !spot.Series[1].At.Equal(wantSeries[1].At) || spot.Series[1].Price != wantSeries[1].Price {
		t.Errorf("spot plan %+v", spot)
	}
	if r := spot.Reclaim; r == nil || *r != (core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}) {
		t.Errorf("reclaim %+v", spot.Reclaim)
	}
	mo, _ := p4d.Plan(core.Monthly)
	if mo.Price != 10_162_398_620 || mo.Term != core.Month.Seconds() || mo.Granularity != core.Month.Seconds() || mo.MinCharge != 0 {
		t.Errorf("monthly plan %+v", mo)
	}

	v100, err := c.Offer("idc-chengdu/cd1/v100x8") // id from provider/region/instance_type
	if err != nil {
		t.Fatal(err)
	}
	daily, _ := v100.Plan(core.Daily)
	if fmt.Sprintf("%+v", *daily) != fmt.Sprintf("%+v", core.PricePlan{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: 86400, Term: 86400}) {
		t.Errorf("daily plan defaults %+v", daily)
	}
	mo, _ = v100.Plan(core.Monthly)
	if mo.Term != 3*core.Month.Seconds() || mo.Granularity != core.Month.Seconds() || mo.Price != 2_000_000_000 ||
		*mo.EarlyTermination != (core.EarlyTermination{Granularity: 86400, Fee: 150_000_000}) {
		t.Errorf("3-month plan %+v", mo)
	}

	a100, _ := c.Offer("idc-chengdu/cd1/a100x8")
	tou := a100.Plans[0].TimeOfUse
	if tou == nil || tou.Location.String() != "Asia/Shanghai" || len(tou.Windows) != 2 {
		t.Fatalf("time of use %+v", tou)
	}
	mf := []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
	if w := tou.Windows[0]; fmt.Sprint(w.Weekdays) != fmt.Sprint(mf) || w.StartHour != 22 || w.EndHour != 6 || w.MultiplierBP != 5000 {
		t.Errorf("window 0 %+v", w)
	}
	if w := tou.Windows[1]; fmt.Sprint(w.Weekdays) != "[Saturday Sunday]" || w.StartHour != 0 || w.EndHour != 24 {
		t.Errorf("window 1 %+v", w)
	}
	v := c.Vouchers[0]
	if v.ShareBP != 3000 || v.Cap != 500_000_000 || !v.ValidTo.Equal(time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)) ||
		fmt.Sprint(v.Providers) != "[idc-chengdu]" || fmt.Sprint(v.Modes) != "[weekly monthly]" {
		t.Errorf("voucher %+v", v)
	}
	roundTripYAML(t, c)
}

func TestSeedExampleCNY(t *testing.T) {
	c, err := Load("../../examples/idc-v100-cny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Offer("idc-chengdu/cd1/v100")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := o.Plan(core.Weekly)
	m, _ := o.Plan(core.Monthly)
	if c.Currency != "CNY" || w.Price != 450_000_000 || w.Term != 7*86400 || m.Price != 1_800_000_000 || m.Term != 730*3600 {
		t.Errorf("CNY example: %s weekly %+v monthly %+v", c.Currency, w, m)
	}
	roundTripYAML(t, c)
	roundTripCSV(t, c)
}

func TestDemo(t *testing.T) {
	c := Demo()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Currency != "USD" {
		t.Errorf("currency %s", c.Currency)
	}
	for _, model := range []string{"A100", "H100", "A10G", "T4", "V100"} {
		if len(c.Filter(model, "us-east-1")) == 0 {
			t.Errorf("no AWS %s offer in the demo", model)
		}
	}
	idc := c.Filter("", "cd1")
	if len(idc) != 2 {
		t.Fatalf("%d IDC offers, want 2", len(idc))
	}
	for _, o := range idc {
		for _, m := range []core.BillingMode{core.Daily, core.Weekly, core.Monthly} {
			if _, ok := o.Plan(m); !ok {
				t.Errorf("%s has no %s plan", o.ID, m)
			}
		}
	}
	a100, err := c.Offer("idc-chengdu/cd1/a100x8")
	if err != nil {
		t.Fatal(err)
	}
	od, _ := a100.Plan(core.OnDemand)
	if tou := od.TimeOfUse; tou == nil || tou.Location.String() != "Asia/Shanghai" || tou.Windows[0].StartHour != 22 ||
		tou.Windows[0].EndHour != 6 || tou.Windows[0].MultiplierBP != 5000 || len(tou.Windows[0].Weekdays) != 7 {
		t.Errorf("off-peak window %+v", od.TimeOfUse)
	}
	if len(c.Vouchers) != 1 || c.Vouchers[0].ShareBP != 3000 || c.Vouchers[0].Cap != 500_000_000 ||
		!c.Vouchers[0].ValidTo.Equal(time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("voucher %+v", c.Vouchers)
	}
	// The AWS prices are the real ones, as ImportAWS maps them.
	real := loadAWS(t, "testdata/aws_excerpt.csv")
	for _, o := range c.Offers {
		if o.Provider != "aws" {
			continue
		}
		want, err := real.Offer(o.ID)
		if err != nil {
			t.Errorf("demo offer %s: %v", o.ID, err)
			continue
		}
		if d := diffCatalogs(&Catalog{Offers: []core.Offer{*want}}, &Catalog{Offers: []core.Offer{o}}); d != "" {
			t.Errorf("demo offer %s differs from the AWS price list:\n%s", o.ID, d)
		}
	}
	// Fresh copies.
	c.Offers[0].GPUs = 99
	if Demo().Offers[0].GPUs == 99 {
		t.Error("Demo returns a shared catalog")
	}
	roundTripYAML(t, c)
}

func TestPlanDefaults(t *testing.T) {
	c := mustParse(t, `
currency: eur
offers:
  - {provider: p, gpu_model: G, gpus: 1, plans: [
      {mode: hourly, price: 2},
      {mode: spot, series: [{at: 2026-01-01, price: 0.7}, {at: "2026-01-02T08:00:00+08:00", price: 0.9}]},
      {mode: weekly, price: 100, per: day, term: 2w},
      {mode: monthly, price: 1000, granularity: 1 day, min_charge: 0}]}
`)
	if c.Currency != "EUR" {
		t.Errorf("currency %q", c.Currency)
	}
	o := c.Offers[0]
	if o.ID != "p" {
		t.Errorf("id %q, want the provider alone", o.ID)
	}
	want := []core.PricePlan{
		{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 3600},
		{Mode: core.Spot, Price: 700_000, Per: core.Hour, Granularity: 3600},
		{Mode: core.Weekly, Price: 100_000_000, Per: core.Day, Granularity: 14 * 86400, Term: 14 * 86400},
		{Mode: core.Monthly, Price: 1_000_000_000, Per: core.Month, Granularity: 86400, Term: core.Month.Seconds()},
	}
	for i, w := range want {
		got := o.Plans[i]
		got.Series = nil
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", w) {
			t.Errorf("plan %d = %+v, want %+v", i, got, w)
		}
	}
	s := o.Plans[1].Series
	if len(s) != 2 || !s[1].At.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("series %+v", s)
	}
	roundTripYAML(t, c)
}

func TestWeekdays(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"all", "[Monday Tuesday Wednesday Thursday Friday Saturday Sunday]"},
		{"weekdays", "[Monday Tuesday Wednesday Thursday Friday]"},
		{"weekends", "[Saturday Sunday]"},
		{"mon-fri", "[Monday Tuesday Wednesday Thursday Friday]"},
		{"fri-mon", "[Friday Saturday Sunday Monday]"},
		{"Sunday", "[Sunday]"},
		{`"mon,wed,fri"`, "[Monday Wednesday Friday]"},
		{"[tue, thu]", "[Tuesday Thursday]"},
		{"[mon-tue, sat]", "[Monday Tuesday Saturday]"},
		{"sun-sat", "[Sunday Monday Tuesday Wednesday Thursday Friday Saturday]"},
	}
	for _, tt := range tests {
		c := mustParse(t, fmt.Sprintf(`
currency: USD
offers:
  - provider: p
    gpu_model: G
    gpus: 1
    plans:
      - mode: on-demand
        price: 1
        time_of_use: {timezone: UTC, windows: [{weekdays: %s, start: 0, end: 24, multiplier: 2}]}
`, tt.spec))
		w := c.Offers[0].Plans[0].TimeOfUse.Windows[0]
		if got := fmt.Sprint(w.Weekdays); got != tt.want {
			t.Errorf("weekdays %s = %s, want %s", tt.spec, got, tt.want)
		}
		if w.MultiplierBP != 20000 {
			t.Errorf("multiplier %d", w.MultiplierBP)
		}
		roundTripYAML(t, c)
	}
}

func TestSharesAndRates(t *testing.T) {
	tests := []struct {
		share string
		want  int64
	}{{"30%", 3000}, {"0.3", 3000}, {"12.5%", 1250}, {"1", 10000}, {"100%", 10000}, {"0.0001", 1}, {"0.01%", 1}}
	for _, tt := range tests {
		c := mustParse(t, fmt.Sprintf(`
currency: USD
offers: [{provider: p, gpu_model: G, gpus: 1, plans: [{mode: on-demand, price: 1}]}]
vouchers: [{id: v, share: %q, cap: 1, valid_from: 2026-01-01, valid_to: 2026-02-01}]
`, tt.share))
		if got := c.Vouchers[0].ShareBP; got != tt.want {
			t.Errorf("share %s = %d bp, want %d", tt.share, got, tt.want)
		}
		roundTripYAML(t, c)
	}
	rates := []struct {
		rate string
		want int64
	}{{"25%", 2500}, {"2.5%", 250}, {"0%", 0}, {"100%", 10000}, {"0.01%", 1}}
	for _, tt := range rates {
		c := mustParse(t, fmt.Sprintf(`
currency: USD
offers: [{provider: p, gpu_model: G, gpus: 1, plans: [{mode: spot, price: 1, reclaim: {monthly_rate: %q, notice: 120}}]}]
`, tt.rate))
		if got := c.Offers[0].Plans[0].Reclaim.MonthlyRateBP; got != tt.want {
			t.Errorf("rate %s = %d bp, want %d", tt.rate, got, tt.want)
		}
		roundTripYAML(t, c)
	}
}

// TestYAMLErrors checks that each bad input is refused with the file, the
// line, the field path and the value in the message.
func TestYAMLErrors(t *testing.T) {
	const head = "currency: USD\noffers:\n  - provider: p\n    gpu_model: G\n    gpus: 1\n    plans:\n"
	plan := func(lines ...string) string { return head + "      - " + strings.Join(lines, "\n        ") + "\n" }
	tou := func(window string) string {
		return plan("mode: on-demand", "price: 1", "time_of_use:", "  timezone: UTC", "  windows:", "    - "+window)
	}
	tests := []struct {
		name, src string
		want      []string
	}{
		{"negative price", plan("mode: on-demand", "price: -2"),
			[]string{"t.yaml:8:", "offers[0].plans[0].price", `"-2"`, "want a price >= 0"}},
		{"price not a number", plan("mode: on-demand", "price: 2,5"),
			[]string{"t.yaml:8:", "offers[0].plans[0].price", `"2,5"`, "decimal"}},
		{"price in exponent form", plan("mode: on-demand", "price: 1e3"),
			[]string{"t.yaml:8:", "offers[0].plans[0].price", `"1e3"`}},
		{"missing price", plan("mode: on-demand"),
			[]string{"t.yaml:7:", "offers[0].plans[0].price", "missing"}},
		{"unknown currency", "currency: XYZ\noffers: []\n",
			[]string{"t.yaml:1:", "currency", `"XYZ"`, "ISO 4217"}},
		{"missing currency", "offers: []\n",
			[]string{"t.yaml:1:", "currency", "missing"}},
		{"unknown top key", "currency: USD\noffer: []\n",
			[]string{"t.yaml:2:", `unknown key "offer"`, "did you mean offers"}},
		{"unknown plan key", plan("mode: on-demand", "price: 1", "prise: 2"),
			[]string{"t.yaml:9:", "offers[0].plans[0]", `unknown key "prise"`, "one of mode, price"}},
		{"unknown offer key", head[:len(head)-len("    plans:\n")] + "    gpu: 1\n",
			[]string{"t.yaml:6:", "offers[0]", `unknown key "gpu"`}},
		{"duplicate key", plan("mode: on-demand", "price: 1", "price: 2"),
			[]string{"t.yaml:9:", "offers[0].plans[0]", `duplicate key "price"`, "first at line 8"}},
		{"unknown mode", plan("mode: yearly", "price: 1"),
			[]string{"t.yaml:7:", "offers[0].plans[0].mode", `"yearly"`, "on-demand"}},
		{"bad per", plan("mode: on-demand", "price: 1", "per: fortnight"),
			[]string{"t.yaml:9:", "offers[0].plans[0].per", `"fortnight"`}},
		{"bad granularity", plan("mode: on-demand", "price: 1", "granularity: 1.5s"),
			[]string{"t.yaml:9:", "offers[0].plans[0].granularity", `"1.5s"`, "Go duration"}},
		{"term on on-demand", plan("mode: on-demand", "price: 1", "term: 1 month"),
			[]string{"t.yaml:9:", "offers[0].plans[0].term", `"1 month"`, "no term"}},
		{"bad timezone", strings.Replace(tou("{weekdays: all, start: 0, end: 6, multiplier: 0.5}"), "timezone: UTC", "timezone: Mars/Olympus", 1),
			[]string{"t.yaml:10:", "offers[0].plans[0].time_of_use.timezone", `"Mars/Olympus"`, "IANA"}},
		{"bad weekday", tou("{weekdays: [mon, funday], start: 0, end: 6, multiplier: 0.5}"),
			[]string{"t.yaml:12:", "offers[0].plans[0].time_of_use.windows[0].weekdays[1]", `"funday"`, "mon-fri"}},
		{"bad weekday range", tou("{weekdays: mon-xyz, start: 0, end: 6, multiplier: 0.5}"),
			[]string{"t.yaml:12:", "offers[0].plans[0].time_of_use.windows[0].weekdays", `"mon-xyz"`}},
		{"weekday twice", tou("{weekdays: [mon-fri, wed], start: 0, end: 6, multiplier: 0.5}"),
			[]string{"t.yaml:12:", "windows[0].weekdays[1]", `"wed"`, "wed is listed twice"}},
		{"bad multiplier", tou("{weekdays: all, start: 0, end: 6, multiplier: half}"),
			[]string{"t.yaml:12:", "offers[0].plans[0].time_of_use.windows[0].multiplier", `"half"`, "0.5"}},
		{"multiplier too precise", tou("{weekdays: all, start: 0, end: 6, multiplier: 0.33333}"),
			[]string{"t.yaml:12:", "windows[0].multiplier", `"0.33333"`, "four decimals"}},
		{"negative multiplier", tou("{weekdays: all, start: 0, end: 6, multiplier: -1}"),
			[]string{"t.yaml:12:", "windows[0].multiplier", `"-1"`}},
		{"bad hour", tou("{weekdays: all, start: 25, end: 6, multiplier: 0.5}"),
			[]string{"t.yaml:12:", "offers[0].plans[0].time_of_use.windows[0].start", `"25"`, "0..23"}},
		{"bad rate", plan("mode: spot", "price: 1", "reclaim: {monthly_rate: 0.25}"),
			[]string{"t.yaml:9:", "offers[0].plans[0].reclaim.monthly_rate", `"0.25"`, "percentage"}},
		{"series out of order", plan("mode: spot", "series: [{at: 2026-01-02, price: 1}, {at: 2026-01-01, price: 1}]"),
			[]string{"t.yaml:8:", "offers[0].plans[0].series[1].at", `"2026-01-01"`, "increasing"}},
		{"bad time", plan("mode: spot", "series: [{at: tomorrow, price: 1}]"),
			[]string{"t.yaml:8:", "offers[0].plans[0].series[0].at", `"tomorrow"`, "RFC 3339"}},
		{"zero gpus", strings.Replace(plan("mode: on-demand", "price: 1"), "gpus: 1", "gpus: 0", 1),
			[]string{"t.yaml:5:", "offers[0].gpus", `"0"`, "1..1024"}},
		{"one and a half gpus", strings.Replace(plan("mode: on-demand", "price: 1"), "gpus: 1", "gpus: 1.5", 1),
			[]string{"t.yaml:5:", "offers[0].gpus", `"1.5"`, "a fraction of one GPU in thousandths"}},
		{"gpus below a milli-GPU", strings.Replace(plan("mode: on-demand", "price: 1"), "gpus: 1", "gpus: 0.0001", 1),
			[]string{"t.yaml:5:", "offers[0].gpus", `"0.0001"`, "0.001..0.999"}},
		{"unknown accelerator", strings.Replace(plan("mode: on-demand", "price: 1"), "gpus: 1", "gpus: 1\n    accelerator: tpu", 1),
			[]string{"t.yaml:6:", "offers[0].accelerator", `"tpu"`, "aws-inferentia"}},
		{"unknown capability", strings.Replace(plan("mode: on-demand", "price: 1"), "gpus: 1", "gpus: 1\n    capability: serving", 1),
			[]string{"t.yaml:6:", "offers[0].capability", `"serving"`, "training (trains and serves) or inference"}},
		{"memory not whole MiB", strings.Replace(plan("mode: on-demand", "price: 1"), "gpus: 1", "gpus: 1\n    gpu_memory_gib: 0.1", 1),
			[]string{"t.yaml:6:", "offers[0].gpu_memory_gib", `"0.1"`, "whole MiB"}},
		{"duplicate id", head + "      - {mode: on-demand, price: 1}\n  - {provider: p, gpu_model: G, gpus: 1, plans: [{mode: spot, price: 1}]}\n",
			[]string{"t.yaml:8:", "offers[1].id", `"p"`, "unique id (offers[0] has it)"}},
		{"two plans one mode", plan("mode: on-demand", "price: 1") + "      - {mode: hourly, price: 2}\n",
			[]string{"t.yaml:9:", "offers[0].plans[1].mode", `"hourly"`, "one plan per mode"}},
		{"no plans", head[:len(head)-len("    plans:\n")],
			[]string{"t.yaml:3:", "offers[0].plans: missing", "at least one price plan"}},
		{"series on on-demand", plan("mode: on-demand", "price: 1", "series: [{at: 2026-01-02, price: 1}]"),
			[]string{"t.yaml:7:", "offers[0].plans[0].mode", `"on-demand"`, "spot for a plan with a price series"}},
		{"offer is a list", "currency: USD\noffers:\n  - [a, b]\n",
			[]string{"t.yaml:3:", "offers[0]", "got a list", "an offer"}},
		{"voucher share", head + "      - {mode: on-demand, price: 1}\nvouchers: [{id: v, share: 130%, cap: 1, valid_from: 2026-01-01, valid_to: 2027-01-01}]\n",
			[]string{"t.yaml:8:", "vouchers[0].share", `"130%"`, "at most 100%"}},
		{"voucher provider", head + "      - {mode: on-demand, price: 1}\nvouchers: [{id: v, share: 30%, cap: 1, valid_from: 2026-01-01, valid_to: 2027-01-01, providers: [q]}]\n",
			[]string{"t.yaml:8:", "vouchers[0].providers[0]", `"q"`, "a provider of an offer in the catalog (p)"}},
		{"voucher dates", head + "      - {mode: on-demand, price: 1}\nvouchers: [{id: v, share: 30%, cap: 1, valid_from: 2026-01-01, valid_to: 2025-01-01}]\n",
			[]string{"t.yaml:8:", "vouchers[0].valid_to", `"2025-01-01"`, "after valid_from"}},
		{"voucher mode", head + "      - {mode: on-demand, price: 1}\nvouchers: [{id: v, share: 30%, cap: 1, valid_from: 2026-01-01, valid_to: 2027-01-01, modes: [yearly]}]\n",
			[]string{"t.yaml:8:", "vouchers[0].modes[0]", `"yearly"`}},
		{"syntax", "currency: USD\noffers: [\n",
			[]string{"t.yaml:", "YAML syntax error"}},
		{"tabs", "currency: USD\n\toffers: []\n",
			[]string{"t.yaml:2:", "YAML syntax error"}},
		{"empty", "", []string{"t.yaml: empty file"}},
		{"two documents", "currency: USD\n---\ncurrency: EUR\n", []string{"t.yaml:2:", "second YAML document"}},
		{"custom tag", plan("mode: on-demand", "price: !money 5"), []string{"t.yaml:8:", "offers[0].plans[0].price", `"5"`, "tagged !money"}},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\n", []string{"t.yaml:1:", `unknown key "a"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseYAML("t.yaml", []byte(tt.src))
			t.Log(err)
			wantErr(t, err, tt.want...)
			var pe *ParseError
			if err != nil && !errors.As(err, &pe) {
				t.Errorf("error %T, want *ParseError", err)
			}
		})
	}
}

func TestAliases(t *testing.T) {
	c := mustParse(t, `
currency: USD
offers:
  - provider: a
    gpu_model: G
    gpus: 1
    plans:
      - &od {mode: on-demand, price: 1, time_of_use: &night {timezone: Asia/Shanghai, windows: [{weekdays: all, start: 22, end: 6, multiplier: 0.5}]}}
  - {provider: b, gpu_model: G, gpus: 1, plans: [*od]}
`)
	if c.Offers[1].Plans[0].TimeOfUse.Location.String() != "Asia/Shanghai" {
		t.Error("alias not followed")
	}
	// A billion laughs is cut off, not expanded: 300 offers × 300 plans ×
	// 300 windows through aliases.
	rep := func(alias string) string { return strings.TrimSuffix(strings.Repeat(alias+", ", 300), ", ") }
	// Anchors under an unknown key are refused before anything expands.
	src := "currency: USD\nunused:\n" +
		"  - &w {weekdays: all, start: 0, end: 1, multiplier: 1}\n" +
		"  - &p {mode: spot, price: 1, time_of_use: {timezone: UTC, windows: [" + rep("*w") + "]}}\n" +
		"  - &o {provider: p, gpu_model: G, gpus: 1, plans: [" + rep("*p") + "]}\n" +
		"offers: [" + rep("*o") + "]\n"
	start := time.Now()
	_, err := ParseYAML("t.yaml", []byte(src))
	wantErr(t, err, `unknown key "unused"`)
	// Put the anchors where they are read: in the first offer's plans.
	src = "currency: USD\noffers:\n" +
		"  - {provider: p, gpu_model: G, gpus: 1, plans: [{mode: spot, price: 1, time_of_use: {timezone: UTC, windows: [&w {weekdays: all, start: 0, end: 1, multiplier: 1}]}}]}\n" +
		"  - &o {provider: q, gpu_model: G, gpus: 1, plans: [&p {mode: spot, price: 1, time_of_use: {timezone: UTC, windows: [" + rep("*w") + "]}}, " + rep("*p") + "]}\n" +
		"  - " + strings.ReplaceAll(rep("*o"), ", ", "\n  - ") + "\n"
	_, err = ParseYAML("t.yaml", []byte(src))
	wantErr(t, err, "too many values after expanding aliases")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("alias expansion took %v", d)
	}
}

func TestParseErrorFormat(t *testing.T) {
	tests := []struct {
		e    ParseError
		want string
	}{
		{ParseError{File: "catalog.yaml", Line: 17, Field: "offers[3].plans[1].price", Value: "-2", Allowed: "a price >= 0"},
			`catalog.yaml:17: offers[3].plans[1].price: invalid value "-2": want a price >= 0`},
		{ParseError{File: "p.csv", Line: 4, Column: 11, Field: "hourly", Value: "x", Allowed: "a price"},
			`p.csv:4: column 11 (hourly): invalid value "x": want a price`},
		{ParseError{File: "c.yaml", Line: 2, Problem: "unknown key", Value: "offer", Allowed: "one of currency, offers, vouchers"},
			`c.yaml:2: unknown key "offer": want one of currency, offers, vouchers`},
		{ParseError{File: "c.yaml", Line: 2, Field: "offers[0]", Problem: "missing", Allowed: "x"},
			`c.yaml:2: offers[0]: missing: want x`},
		{ParseError{File: "c.yaml", Problem: "empty file"}, `c.yaml: empty file`},
		{ParseError{File: "c.yaml", Line: 1, Field: "id", Value: ""}, `c.yaml:1: id: invalid value ""`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %s\n want %s", got, tt.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/nope.yaml")
	wantErr(t, err, "load catalog", "nope.yaml")
	_, err = Load("catalog.json")
	wantErr(t, err, `unknown extension ".json"`)
	c, err := Load("testdata/aws_excerpt.csv")
	if err == nil {
		t.Fatalf("Load read the AWS list as a canonical CSV: %d offers", len(c.Offers))
	}
	wantErr(t, err, "testdata/aws_excerpt.csv:1:", "unknown column", "--from aws-csv")
}

// TestYAMLFractionalGPUs reads a quarter-GPU machine and the accelerator
// keys from YAML.
func TestYAMLFractionalGPUs(t *testing.T) {
	src := `currency: USD
offers:
  - provider: cloud
    gpu_model: NVIDIA L4
    gpus: 0.25
    gpu_memory_gib: 24
    plans: [{mode: on-demand, price: 0.2}]
  - provider: cloud
    instance_type: trn
    gpu_model: NeuronCore-v2
    gpus: 16
    accelerator: aws-trainium
    capability: training
    plans: [{mode: on-demand, price: 20}]
`
	c, err := ParseYAML("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	q, trn := c.Offers[0], c.Offers[1]
	if q.GPUs != 1 || q.SliceMilli != 250 || q.MemPerGPUMiB() != 6*1024 || q.Capability != core.Inference {
		t.Errorf("quarter GPU: %d GPUs, slice %d, %d MiB, %q", q.GPUs, q.SliceMilli, q.MemPerGPUMiB(), q.Capability)
	}
	if trn.Accelerator != core.AWSTrainium || trn.Capability != "" {
		t.Errorf("trainium: %q %q", trn.Accelerator, trn.Capability)
	}
	out := roundTripYAML(t, c)
	if !strings.Contains(string(out), "gpus: 0.25") || !strings.Contains(string(out), "accelerator: aws-trainium") {
		t.Errorf("written YAML:\n%s", out)
	}
	roundTripCSV(t, c)
}
