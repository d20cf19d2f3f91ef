package pricing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestImportAWSRealFile reads the whole AWS price list.
func TestImportAWSRealFile(t *testing.T) {
	c := loadAWS(t, awsCSV)
	if c.Currency != "USD" {
		t.Errorf("currency %s", c.Currency)
	}
	if len(c.Offers) != 1127 {
		t.Errorf("%d offers, want 1127 (one per row)", len(c.Offers))
	}
	modes := map[core.BillingMode]int{}
	reclaim, buckets := 0, map[string]int{}
	for _, o := range c.Offers {
		for _, p := range o.Plans {
			modes[p.Mode]++
			if p.Reclaim != nil {
				reclaim++
				buckets[p.Reclaim.Bucket]++
			}
		}
	}
	// Counts from the README: 872 rows with spot, buckets >20% 406, <5% 182,
	// 10-15% 101, 5-10% 94, 15-20% 86 (258 unknown, 255 of them without spot).
	if modes[core.OnDemand] != 1127 || modes[core.Spot] != 872 || modes[core.Monthly] != 785 || len(modes) != 3 {
		t.Errorf("plans per mode %v, want 1127 on-demand, 872 spot, 785 monthly", modes)
	}
	wantBuckets := map[string]int{">20%": 406, "<5%": 182, "10-15%": 101, "5-10%": 94, "15-20%": 86}
	for b, n := range wantBuckets {
		if buckets[b] != n {
			t.Errorf("bucket %s: %d spot plans, want %d", b, buckets[b], n)
		}
	}
	if reclaim != 869 {
		t.Errorf("%d reclaim models, want 869 (872 spot rows, 3 without a bucket)", reclaim)
	}

	p4d, err := c.Offer("aws/us-east-1/p4d.24xlarge")
	if err != nil {
		t.Fatal(err)
	}
	if p4d.Provider != "aws" || p4d.GPUModel != "NVIDIA A100" || p4d.GPUs != 8 || p4d.GPUMemMiB != 40*1024 ||
		p4d.VCPUs != 96 || p4d.MemoryMiB != 1152*1024 || p4d.Currency != "USD" {
		t.Errorf("p4d machine %+v", p4d)
	}
	od, _ := p4d.Plan(core.OnDemand)
	spot, _ := p4d.Plan(core.Spot)
	mo, _ := p4d.Plan(core.Monthly)
	if od == nil || od.Price != 21_957_642 || od.Per != core.Hour || od.Granularity != 1 || od.MinCharge != 60 {
		t.Errorf("p4d on-demand %+v, want 21.957642/h per second, 60 s minimum", od)
	}
	if spot == nil || spot.Price != 8_590_750 || spot.Reclaim == nil ||
		*spot.Reclaim != (core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}) {
		t.Errorf("p4d spot %+v", spot)
	}
	// 13.921094 USD/h × 730 h, exactly.
	if mo == nil || mo.Price != 10_162_398_620 || mo.Per != core.Month || mo.Term != 730*3600 || mo.Granularity != 730*3600 {
		t.Errorf("p4d monthly %+v, want 10162.39862 per 730-hour month", mo)
	}
	p5, _ := c.Offer("aws/us-east-1/p5.48xlarge")
	if _, ok := p5.Plan(core.Monthly); ok || p5.GPUMemMiB != 80*1024 {
		t.Errorf("p5.48xlarge: AWS sells no 1-year RI, yet %+v", p5.Plans)
	}
	if sp, _ := p5.Plan(core.Spot); sp.Price != 28_106_467 || sp.Reclaim.MonthlyRateBP != 750 {
		t.Errorf("p5 spot %+v", sp)
	}
	g5, _ := c.Offer("aws/us-east-1/g5.xlarge")
	if od, _ := g5.Plan(core.OnDemand); od.Price != 1_006_000 {
		t.Errorf("g5.xlarge on-demand %s", od.Price)
	}
	// A fractional GPU is a slice of one L4: 125 milli-GPUs and 1/8 of
	// its 24 GiB, for inference only.
	g6f, _ := c.Offer("aws/us-east-1/g6f.large")
	if g6f.GPUs != 1 || g6f.SliceMilli != 125 || g6f.CapMilli() != 125 || g6f.GPUModel != "NVIDIA L4" ||
		g6f.GPUMemMiB != 24*1024 || g6f.MemPerGPUMiB() != 3*1024 || g6f.Capability != core.Inference {
		t.Errorf("g6f.large %d x %s slice %d, %d MiB per GPU, %s", g6f.GPUs, g6f.GPUModel, g6f.SliceMilli, g6f.GPUMemMiB, g6f.Capability)
	}
	if got := len(c.Filter("A100", "us-east-1")); got != 2 {
		t.Errorf("%d A100 offers in us-east-1, want 2 (p4d, p4de)", got)
	}
	roundTripYAML(t, c)
	roundTripCSV(t, c)
}

func TestImportAWSExcerpt(t *testing.T) {
	c := loadAWS(t, "testdata/aws_excerpt.csv")
	if len(c.Offers) != 9 {
		t.Fatalf("%d offers, want 9", len(c.Offers))
	}
	eu, err := c.Offer("aws/eu-north-1/p4d.24xlarge")
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := eu.Plan(core.Spot); !ok || sp.Reclaim != nil || sp.Price != 7_649_800 {
		t.Errorf("spot without a bucket: %+v (want a spot plan without a reclaim model)", sp)
	}
	k520, _ := c.Offer("aws/ap-northeast-1/g2.2xlarge")
	if len(k520.Plans) != 1 || k520.Plans[0].Mode != core.OnDemand {
		t.Errorf("on-demand only: %+v", k520.Plans)
	}
	g3s, _ := c.Offer("aws/us-east-1/g3s.xlarge")
	if g3s.MemoryMiB != 31232 {
		t.Errorf("30.5 GiB = %d MiB", g3s.MemoryMiB)
	}
	roundTripYAML(t, c)
	roundTripCSV(t, c)
}

// TestImportAWSErrors checks bad rows: file, line, column and value.
func TestImportAWSErrors(t *testing.T) {
	const header = "instance_type,gpu_model,gpu_count,gpu_memory_gib_total,vcpus,memory_gib,region,ondemand_usd_per_hr,reserved_1y_noupfront_usd_per_hr,spot_avg_usd_per_hr,spot_interrupt_freq\n"
	const good = "p4d.24xlarge,NVIDIA A100,8,320,96,1152,us-east-1,21.957642,13.921094,8.59075,>20%\n"
	tests := []struct {
		name, src string
		want      []string
	}{
		{"malformed on-demand", header + "p4d.24xlarge,NVIDIA A100,8,320,96,1152,us-east-1,21.9.5,,,\n",
			[]string{"aws.csv:2:", "column 8 (ondemand_usd_per_hr)", `"21.9.5"`}},
		{"malformed reserved", header + good + "p5.48xlarge,NVIDIA H100,8,640,192,2048,us-east-1,55.04,n/a,,\n",
			[]string{"aws.csv:3:", "column 9 (reserved_1y_noupfront_usd_per_hr)", `"n/a"`}},
		{"malformed spot", header + "p4d.24xlarge,NVIDIA A100,8,320,96,1152,us-east-1,1,,$8,>20%\n",
			[]string{"aws.csv:2:", "column 10 (spot_avg_usd_per_hr)", `"$8"`}},
		{"negative price", header + "p4d.24xlarge,NVIDIA A100,8,320,96,1152,us-east-1,-1,,,\n",
			[]string{"aws.csv:2:", "column 8 (ondemand_usd_per_hr)", `"-1"`, ">= 0"}},
		{"unknown bucket", header + "p4d.24xlarge,NVIDIA A100,8,320,96,1152,us-east-1,1,,0.5,>30%\n",
			[]string{"aws.csv:2:", "column 11 (spot_interrupt_freq)", `">30%"`, "<5%, 5-10%"}},
		{"gpu count", header + "p4d.24xlarge,NVIDIA A100,eight,320,96,1152,us-east-1,1,,,\n",
			[]string{"aws.csv:2:", "column 3 (gpu_count)", `"eight"`}},
		{"gpu count 1.5", header + "p4d.24xlarge,NVIDIA A100,1.5,320,96,1152,us-east-1,1,,,\n",
			[]string{"aws.csv:2:", "column 3 (gpu_count)", `"1.5"`, "a fraction of one GPU in thousandths"}},
		{"gpu count below a milli-GPU", header + "g6f.large,NVIDIA L4,0.0625,3,2,8,us-east-1,1,,,\n",
			[]string{"aws.csv:2:", "column 3 (gpu_count)", `"0.0625"`, "0.001..0.999"}},
		{"unknown accelerator", header + "x9.large,Acme Tensor Brick,1,16,2,8,us-east-1,1,,,\n",
			[]string{"aws.csv:2:", "column 2 (gpu_model)", `"Acme Tensor Brick"`, "a known maker"}},
		{"memory", header + "p4d.24xlarge,NVIDIA A100,3,1,96,1152,us-east-1,1,,,\n",
			[]string{"aws.csv:2:", "column 4 (gpu_memory_gib_total)", `"1"`, "whole MiB per GPU"}},
		{"vcpus", header + "p4d.24xlarge,NVIDIA A100,8,320,9.6,1152,us-east-1,1,,,\n",
			[]string{"aws.csv:2:", "column 5 (vcpus)", `"9.6"`}},
		{"wrong column count", header + "p4d.24xlarge,NVIDIA A100,8\n",
			[]string{"aws.csv:2:", "a row of 3 fields", "want 11 fields"}},
		{"duplicate row", header + good + good,
			[]string{"aws.csv:3:", "column 1 (instance_type)", "aws/us-east-1/p4d.24xlarge is also the id on line 2"}},
		{"no region", header + "p4d.24xlarge,NVIDIA A100,8,320,96,1152,,1,,,\n",
			[]string{"aws.csv:2:", "column 7 (region)", "AWS region"}},
		{"missing column", "instance_type,gpu_model\n", []string{"aws.csv:1:", "missing columns", "gpu_count"}},
		{"no price", header + "p4d.24xlarge,NVIDIA A100,8,320,96,1152,us-east-1,,,,\n",
			[]string{"aws.csv:2:", "a row without a price"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ImportAWS("aws.csv", strings.NewReader(tt.src))
			t.Log(err)
			wantErr(t, err, tt.want...)
		})
	}
}

func TestMulMicros(t *testing.T) {
	tests := []struct {
		s    string
		m    int64
		want core.Micros
	}{
		{"13.921094", 730, 10_162_398_620},
		{"0.0000005", 1, 0},   // half to even: 0.5 µ → 0
		{"0.0000015", 1, 2},   // 1.5 µ → 2
		{"0.00000151", 1, 2},  // above half
		{"-0.0000015", 1, -2}, // symmetric
		{"1.0000001", 730, 730_000_073},
	}
	for _, tt := range tests {
		got, ok := mulMicros(tt.s, tt.m)
		if !ok || got != tt.want {
			t.Errorf("mulMicros(%s, %d) = %d, %v; want %d", tt.s, tt.m, got, ok, tt.want)
		}
	}
	if _, ok := mulMicros("99999999999999999", 730); ok {
		t.Error("mulMicros accepted an overflow")
	}
}

// TestImportAWSAccelerators checks what the real price list's instance
// families become: every offer of a family has the same accelerator,
// capability and GPU model, and they are the ones docs/catalog.md lists.
func TestImportAWSAccelerators(t *testing.T) {
	c := loadAWS(t, awsCSV)
	got := map[string]string{}
	for _, o := range c.Offers {
		family, _, _ := strings.Cut(o.InstanceType, ".")
		hw := fmt.Sprintf("%s %s %s", o.Accelerator.Or(), o.Capability.Or(), o.GPUModel)
		if o.SliceMilli > 0 {
			hw += " slice"
		}
		if prev, ok := got[family]; ok && prev != hw {
			t.Errorf("family %s: %s and %s", family, prev, hw)
		}
		got[family] = hw
	}
	want := map[string]string{
		"inf1":    "aws-inferentia inference AWS Inferentia",
		"inf2":    "aws-inferentia inference AWS Inferentia2",
		"trn1":    "aws-trainium training AWS Trainium",
		"trn1n":   "aws-trainium training AWS Trainium",
		"dl2q":    "qualcomm-ai100 inference Qualcomm AI 100 Accelerators",
		"g4ad":    "amd inference AMD Radeon Pro V520",
		"g2":      "nvidia inference NVIDIA GRID K520",
		"g3":      "nvidia training NVIDIA Tesla M60",
		"g3s":     "nvidia training NVIDIA Tesla M60",
		"g6f":     "nvidia inference NVIDIA L4 slice",
		"gr6f":    "nvidia inference NVIDIA L4 slice",
		"g6":      "nvidia training NVIDIA L4",
		"gr6":     "nvidia training NVIDIA L4",
		"g4dn":    "nvidia training NVIDIA T4 Tensor Core",
		"g5":      "nvidia training NVIDIA A10G",
		"g5g":     "nvidia training NVIDIA T4G Tensor Core",
		"g6e":     "nvidia training NVIDIA L40S",
		"p2":      "nvidia training NVIDIA Tesla K80",
		"p3":      "nvidia training NVIDIA Tesla V100",
		"p3dn":    "nvidia training NVIDIA Tesla V100",
		"p4d":     "nvidia training NVIDIA A100",
		"p4de":    "nvidia training NVIDIA A100",
		"p5":      "nvidia training NVIDIA H100",
		"p5en":    "nvidia training NVIDIA H200",
		"p6-b200": "nvidia training NVIDIA B200",
		"p6-b300": "nvidia training NVIDIA B300",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("families (-want +got):\n%s", d)
	}
	// The slices: an eighth, a quarter and a half of one L4.
	for id, milli := range map[string]core.Milli{"aws/us-east-1/g6f.large": 125, "aws/us-east-1/g6f.xlarge": 125,
		"aws/us-east-1/g6f.2xlarge": 250, "aws/us-east-1/g6f.4xlarge": 500} {
		o, err := c.Offer(id)
		if err != nil {
			t.Fatal(err)
		}
		if o.GPUs != 1 || o.SliceMilli != milli || o.MemPerGPUMiB() != 24*1024*int64(milli)/1000 {
			t.Errorf("%s: %d GPUs, slice %d, %d MiB; want 1 GPU, slice %d, %d MiB", id, o.GPUs, o.SliceMilli, o.MemPerGPUMiB(), milli, 24*1024*int64(milli)/1000)
		}
	}
}
