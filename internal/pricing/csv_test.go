package pricing

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestExampleCSV(t *testing.T) {
	c, err := Load("../../examples/catalog.csv")
	if err != nil {
		t.Fatal(err)
	}
	if c.Currency != "USD" || len(c.Offers) != 4 {
		t.Fatalf("%s, %d offers", c.Currency, len(c.Offers))
	}
	p4d, err := c.Offer("aws/us-east-1/p4d.24xlarge")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.PricePlan{
		{Mode: core.OnDemand, Price: 21_957_642, Per: core.Hour, Granularity: 1, MinCharge: 60},
		{Mode: core.Spot, Price: 8_590_750, Per: core.Hour, Granularity: 1, MinCharge: 60,
			Reclaim: &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}},
		{Mode: core.Monthly, Price: 10_162_398_620, Per: core.Month, Granularity: core.Month.Seconds(), Term: core.Month.Seconds()},
	}
	if d := diffCatalogs(&Catalog{Offers: []core.Offer{{Plans: want}}}, &Catalog{Offers: []core.Offer{{Plans: p4d.Plans}}}); d != "" {
		t.Errorf("p4d plans (-want +got):\n%s", d)
	}
	// The same machine as the real AWS import gives, but for the plan order.
	v100, _ := c.Offer("idc-chengdu/cd1/v100x8")
	if len(v100.Plans) != 3 {
		t.Fatalf("v100 plans %+v", v100.Plans)
	}
	for i, m := range []core.BillingMode{core.Daily, core.Weekly, core.Monthly} {
		p := v100.Plans[i]
		if p.Mode != m || p.Term != p.Per.Seconds() || p.Granularity != p.Term || p.MinCharge != 0 {
			t.Errorf("plan %d %+v", i, p)
		}
	}
	a100, _ := c.Offer("idc-chengdu/cd1/a100x8")
	if od := a100.Plans[0]; od.Mode != core.OnDemand || od.Granularity != 3600 || od.MinCharge != 3600 || od.Price != 12_000_000 {
		t.Errorf("a100 on-demand %+v", od)
	}
	if a100.GPUMemMiB != 80*1024 || a100.MemoryMiB != 1024*1024 || a100.VCPUs != 128 {
		t.Errorf("a100 machine %+v", a100)
	}
	roundTripCSV(t, c)
	roundTripYAML(t, c)
}

func TestCSVColumnOrderAndDefaults(t *testing.T) {
	src := "\ufeffCurrency , gpu_model,provider,region,instance_type,gpu_count,hourly,id,memory_gib\n" +
		"cny,V100,idc,cd1,v100,1,3.5,my-v100,30.5\n" +
		"CNY,V100,idc,cd1,v100b,1,4,,\n"
	c, err := ReadCSV("t.csv", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.Currency != "CNY" || c.Offers[0].ID != "my-v100" || c.Offers[1].ID != "idc/cd1/v100b" || c.Offers[0].MemoryMiB != 31232 {
		t.Errorf("catalog %+v", c)
	}
	if p := c.Offers[0].Plans[0]; p.Granularity != 3600 || p.MinCharge != 0 || p.Per != core.Hour {
		t.Errorf("default granularity: %+v", p)
	}
	roundTripCSV(t, c)
}

// TestCSVErrors checks that each bad input is refused with the file, the
// line, the column and the value in the message.
func TestCSVErrors(t *testing.T) {
	const header = "provider,region,instance_type,gpu_model,gpu_count,currency,hourly,daily,spot_hourly,granularity,min_charge_seconds,spot_reclaim_rate\n"
	const good = "aws,us-east-1,p4d,A100,8,USD,21.9,,,1s,60,\n"
	tests := []struct {
		name, src string
		want      []string
	}{
		{"wrong column count", header + good + "aws,us-east-1,p5,H100,8,USD\n",
			[]string{"t.csv:3:", "a row of 6 fields", "aws,us-east-1,p5,H100,8,USD", "want 12 fields"}},
		{"not a number", header + "aws,us-east-1,p4d,A100,8,USD,abc,,,1s,60,\n",
			[]string{"t.csv:2:", "column 7 (hourly)", `"abc"`, "price"}},
		{"negative price", header + "aws,us-east-1,p4d,A100,8,USD,,-2,,1s,60,\n",
			[]string{"t.csv:2:", "column 8 (daily)", `"-2"`, "want a price >= 0"}},
		{"gpu count 1.5", header + "aws,us-east-1,p4d,A100,1.5,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 5 (gpu_count)", `"1.5"`, "whole number of GPUs 1..1024, or a fraction of one GPU in thousandths"}},
		{"gpu count zero", header + "aws,us-east-1,p4d,A100,0,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 5 (gpu_count)", `"0"`, "0.001..0.999"}},
		{"gpu count below a milli-GPU", header + "aws,us-east-1,p4d,A100,0.0005,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 5 (gpu_count)", `"0.0005"`, "in thousandths"}},
		{"gpu count negative slice", header + "aws,us-east-1,p4d,A100,-0.25,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 5 (gpu_count)", `"-0.25"`}},
		{"gpu count too many", header + "aws,us-east-1,p4d,A100,1025,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 5 (gpu_count)", `"1025"`, "1..1024"}},
		{"unknown currency", header + "aws,us-east-1,p4d,A100,8,XYZ,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 6 (currency)", `"XYZ"`, "ISO 4217"}},
		{"mixed currencies", header + good + "aws,us-east-1,p5,H100,8,EUR,1,,,1s,60,\n",
			[]string{"t.csv:3:", "column 6 (currency)", `"EUR"`, "USD as on line 2"}},
		{"bad granularity", header + "aws,us-east-1,p4d,A100,8,USD,1,,,often,60,\n",
			[]string{"t.csv:2:", "column 10 (granularity)", `"often"`}},
		{"bad min charge", header + "aws,us-east-1,p4d,A100,8,USD,1,,,1s,-5,\n",
			[]string{"t.csv:2:", "column 11 (min_charge_seconds)", `"-5"`}},
		{"no price", header + "aws,us-east-1,p4d,A100,8,USD,,,,1s,60,\n",
			[]string{"t.csv:2:", "a row without a price", "at least one of hourly"}},
		{"reclaim without spot", header + "aws,us-east-1,p4d,A100,8,USD,1,,,1s,60,25%\n",
			[]string{"t.csv:2:", "column 12 (spot_reclaim_rate)", `"25%"`, "unless the row has a spot_hourly price"}},
		{"bad reclaim rate", header + "aws,us-east-1,p4d,A100,8,USD,1,,0.5,1s,60,25\n",
			[]string{"t.csv:2:", "column 12 (spot_reclaim_rate)", `"25"`, "25%"}},
		{"duplicate id", header + good + good,
			[]string{"t.csv:3:", "column 3 (instance_type)", `"p4d"`, "a unique id (aws/us-east-1/p4d is also the id on line 2)"}},
		{"unknown column", "provider,region,instance_type,gpu_model,gpu_count,currency,hourli\n",
			[]string{"t.csv:1:", "column 7", `unknown column "hourli"`, "did you mean hourly"}},
		{"duplicate column", "provider,region,instance_type,gpu_model,gpu_count,currency,hourly,Hourly\n",
			[]string{"t.csv:1:", "column 8", `duplicate column "hourly"`, "also column 7"}},
		{"missing columns", "provider,region,gpu_model\n",
			[]string{"t.csv:1:", "header", `missing columns "instance_type,gpu_count,currency"`}},
		{"aws file", "instance_type,family,gpu_model,gpu_count,gpu_memory_gib_total,vcpus,memory_gib,region,ondemand_usd_per_hr\n",
			[]string{"t.csv:1:", `column 2: unknown column "family"`, "--from aws-csv"}},
		{"bare quote", header + "aws,us-east-1,p\"4d,A100,8,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "CSV syntax error", "bare"}},
		{"no rows", header, []string{"t.csv:1:", "no offers"}},
		{"empty", "", []string{"t.csv: empty file"}},
		{"multi-line cell", header + "aws,us-east-1,\"p4d\nx\",A100,8,USD,abc,,,1s,60,\n",
			[]string{"t.csv:3:", "column 7 (hourly)", `"abc"`}},
		{"control character", header + "aws,us-east-1,\"p4d\nx\",A100,8,USD,1,,,1s,60,\n",
			[]string{"t.csv:2:", "column 3 (instance_type)", `"p4d\nx"`, "printable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadCSV("t.csv", strings.NewReader(tt.src))
			t.Log(err)
			wantErr(t, err, tt.want...)
		})
	}
}

func TestWriteCSVRefuses(t *testing.T) {
	tests := []struct {
		file, want string
	}{
		{"../../examples/catalog.yaml", "vouchers"},
	}
	for _, tt := range tests {
		c, err := Load(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		err = WriteCSV(&bytes.Buffer{}, c)
		wantErr(t, err, tt.want)
		c.Vouchers = nil
		err = WriteCSV(&bytes.Buffer{}, c)
		wantErr(t, err, `offer "aws/us-east-1/p4d.24xlarge": plan spot`, "price series", "write YAML instead")
	}
	base := func() *Catalog {
		return &Catalog{Currency: "USD", Offers: []core.Offer{{ID: "a", Provider: "a", GPUModel: "G", GPUs: 1, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 1, Per: core.Hour, Granularity: 1},
			{Mode: core.Spot, Price: 1, Per: core.Hour, Granularity: 1},
			{Mode: core.Weekly, Price: 1, Per: core.Week, Granularity: 7 * 86400, Term: 7 * 86400},
		}}}}
	}
	roundTripCSV(t, base())
	cases := []struct {
		name   string
		mutate func(p []core.PricePlan)
		want   string
	}{
		{"per day on-demand", func(p []core.PricePlan) { p[0].Per = core.Day }, "a price per day"},
		{"granularities differ", func(p []core.PricePlan) { p[1].Granularity = 60 }, "different granularities"},
		{"two-week term", func(p []core.PricePlan) { p[2].Term, p[2].Granularity = 14*86400, 14*86400 }, "a term of 2 weeks"},
		{"weekly per day", func(p []core.PricePlan) { p[2].Granularity = 86400 }, "billed per 1 day"},
		{"early termination", func(p []core.PricePlan) { p[2].EarlyTermination = &core.EarlyTermination{Granularity: 1} }, "early termination"},
	}
	for _, tt := range cases {
		c := base()
		tt.mutate(c.Offers[0].Plans)
		err := WriteCSV(&bytes.Buffer{}, c)
		wantErr(t, err, tt.want)
	}
	wantErr(t, WriteCSV(&bytes.Buffer{}, &Catalog{Currency: "USD"}), "no offers")
	wantErr(t, WriteCSV(&bytes.Buffer{}, &Catalog{Currency: "US"}), "write csv", "currency")
}

func TestFormatSpan(t *testing.T) {
	for _, sec := range []int64{1, 59, 60, 90, 3600, 5400, 86400, 7 * 86400, 14 * 86400, 730 * 3600, 3 * 730 * 3600, 1<<31 + 1, 1 << 40} {
		s := formatSpan(sec)
		got, err := core.ParseSpan(s)
		if err != nil || got != sec {
			t.Errorf("ParseSpan(formatSpan(%d) = %q) = %d, %v", sec, s, got, err)
		}
	}
	if got := fmt.Sprint(formatSpan(60), ", ", formatSpan(14*86400), ", ", formatSpan(90)); got != "1 minute, 2 weeks, 90 seconds" {
		t.Errorf("formatSpan: %s", got)
	}
}

// TestCSVFractionalGPUs reads quarter- and eighth-GPU machines and the
// accelerator columns: a slice is one GPU with its share in milli-GPUs
// and that share of the whole GPU's memory, inference-only unless the row
// says otherwise; accelerator and capability default from gpu_model.
func TestCSVFractionalGPUs(t *testing.T) {
	src := "provider,region,instance_type,gpu_model,gpu_count,gpu_memory_gib,currency,hourly,accelerator,capability\n" +
		"cloud,r1,l4-quarter,NVIDIA L4,0.25,24,USD,0.2,,\n" +
		"cloud,r1,l4-eighth,NVIDIA L4,0.125,24,USD,0.1,,training\n" +
		"cloud,r1,inf,AWS Inferentia,4,8,USD,1,,\n" +
		"cloud,r1,mi300x,MI300X,8,192,USD,30,amd,\n" +
		"cloud,r1,h100,H100,8,80,USD,40,,\n"
	c, err := ReadCSV("t.csv", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	type hw struct {
		GPUs        int
		Slice, Cap  core.Milli
		MemPerGPU   int64
		Accelerator core.Accelerator
		Capability  core.Capability
	}
	var got []hw
	for i := range c.Offers {
		o := &c.Offers[i]
		got = append(got, hw{o.GPUs, o.SliceMilli, o.CapMilli(), o.MemPerGPUMiB(), o.Accelerator, o.Capability})
	}
	want := []hw{
		{1, 250, 250, 6 * 1024, "", core.Inference},
		{1, 125, 125, 3 * 1024, "", ""},
		{4, 0, 4000, 8 * 1024, core.AWSInferentia, core.Inference},
		{8, 0, 8000, 192 * 1024, core.AMD, ""},
		{8, 0, 8000, 80 * 1024, "", ""},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("offers (-want +got):\n%s", d)
	}
	out := roundTripCSV(t, c)
	if !strings.Contains(string(out), ",l4-eighth,NVIDIA L4,0.125,24,") {
		t.Errorf("written CSV lost the eighth GPU:\n%s", out)
	}
	roundTripYAML(t, c)
}
