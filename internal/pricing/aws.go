package pricing

import (
	"io"
	"math/big"
	"strings"
	"unicode"

	"github.com/gpufleet/gpufleet/internal/core"
)

// AWS price list columns ImportAWS reads; the file's other columns are
// ignored.
var awsRequired = []string{
	"instance_type", "gpu_model", "gpu_count", "gpu_memory_gib_total", "vcpus", "memory_gib",
	"region", "ondemand_usd_per_hr",
}

var awsFields = csvColumns{
	"id": "instance_type", "provider": "instance_type", "region": "region", "instance_type": "instance_type",
	"gpu_model": "gpu_model", "gpus": "gpu_count", "gpu_memory_gib": "gpu_memory_gib_total",
	"vcpus": "vcpus", "memory_gib": "memory_gib",
	"plan.reclaim.bucket": "spot_interrupt_freq",
}

// AWSReclaimRates maps the AWS Spot Instance Advisor's interruption
// buckets to a monthly reclaim probability in basis points: the middle of
// each bucket, and 25% for ">20%".
var AWSReclaimRates = map[string]int64{
	"<5%":    250,
	"5-10%":  750,
	"10-15%": 1250,
	"15-20%": 1750,
	">20%":   2500,
}

// AWSSpotNoticeSeconds is the warning AWS gives before it reclaims a spot
// instance.
const AWSSpotNoticeSeconds = 120

// ImportAWS reads the AWS GPU price list derived from instances.vantage.sh
// (shared/data/aws-gpu-pricing-vantage/aws_gpu_prices_linux.csv) into a USD
// catalog, one offer per row with id aws/<region>/<instance_type>:
//
//   - on-demand: ondemand_usd_per_hr per hour, billed per second with a
//     60-second minimum;
//   - monthly, when reserved_1y_noupfront_usd_per_hr is present: AWS sells
//     1- and 3-year terms, not monthly ones; we model a monthly commitment
//     (term and granularity one core.Month, 730 h) priced at the 1-year
//     no-upfront effective hourly rate × 730, rounded once to micro-dollars;
//   - spot, when spot_avg_usd_per_hr is present: that price per hour, per
//     second with a 60-second minimum, and a reclaim model from
//     spot_interrupt_freq (AWSReclaimRates, 120 s notice). An empty bucket
//     gives a spot plan without a reclaim model (the rate is unknown); an
//     unrecognised bucket is an error.
//
// GPU memory per GPU is gpu_memory_gib_total / gpu_count. A fractional
// gpu_count (g6f: 0.125 of an L4) is a GPU slice: one GPU with SliceMilli
// its share (125), the memory that of the whole GPU (3 GiB / 0.125 = 24).
// The accelerator family and capability come from the instance family
// (awsFamilies, table in docs/catalog.md), else from gpu_model.
func ImportAWS(name string, r io.Reader) (*Catalog, error) {
	t, err := newCSVTable(name, r, nil, awsRequired, nil)
	if err != nil {
		return nil, err
	}
	c := &Catalog{Currency: "USD"}
	var places []csvPlace
	for {
		row, err := t.next()
		if err != nil {
			return nil, err
		}
		if row == nil {
			break
		}
		o, cols, err := awsOffer(row)
		if err != nil {
			return nil, err
		}
		c.Offers = append(c.Offers, o)
		places = append(places, csvPlace{row: row, planCols: cols})
	}
	if len(c.Offers) == 0 {
		return nil, &ParseError{File: name, Line: 1, Problem: "no offers", Allowed: "at least one row after the header"}
	}
	if err := c.Validate(); err != nil {
		return nil, locateCSV(name, err, places, awsFields)
	}
	return c, nil
}

func awsOffer(row *csvRow) (core.Offer, []string, error) {
	o := core.Offer{
		Provider:     "aws",
		Region:       row.get("region"),
		InstanceType: row.get("instance_type"),
		GPUModel:     row.get("gpu_model"),
		Currency:     "USD",
	}
	o.ID = "aws/" + o.Region + "/" + o.InstanceType
	if o.Region == "" || strings.IndexFunc(o.Region, unicode.IsSpace) >= 0 {
		return o, nil, row.bad("region", "an AWS region such as us-east-1", nil)
	}
	if o.InstanceType == "" || strings.IndexFunc(o.InstanceType, unicode.IsSpace) >= 0 {
		return o, nil, row.bad("instance_type", "an instance type such as p4d.24xlarge", nil)
	}
	var ok bool
	if o.GPUs, o.SliceMilli, ok = parseGPUCount(row.get("gpu_count")); !ok {
		return o, nil, row.bad("gpu_count", gpuCountAllowed, nil)
	}
	count := big.NewRat(int64(o.CapMilli()), int64(core.WholeGPU))
	total, err := parseDecimal(row.get("gpu_memory_gib_total"))
	if err != nil || total.Sign() < 0 {
		return o, nil, row.bad("gpu_memory_gib_total", "GiB of accelerator memory per instance, such as 320", err)
	}
	// Per whole GPU: a slice's memory is its share of the GPU's.
	perGPU := new(big.Rat).Quo(total, count)
	if err := awsHardware(row, &o); err != nil {
		return o, nil, err
	}
	mib, ok := exactInt(perGPU, 1024)
	if !ok {
		return o, nil, row.bad("gpu_memory_gib_total", "GiB that divide into whole MiB per GPU", nil)
	}
	o.GPUMemMiB = mib
	vcpus, err := csvInt(row, "vcpus", 0, maxVCPUs, false)
	if err != nil {
		return o, nil, err
	}
	o.VCPUs = int(vcpus)
	if o.MemoryMiB, err = csvGiB(row, "memory_gib", "GiB of host memory, such as 1152 or 30.5"); err != nil {
		return o, nil, err
	}
	var cols []string
	const priceAllowed = "a price in USD per hour, such as 21.958, or empty"
	if s := row.get("ondemand_usd_per_hr"); s != "" {
		price, err := core.ParseMicros(s)
		if err != nil {
			return o, nil, row.bad("ondemand_usd_per_hr", priceAllowed, err)
		}
		o.Plans = append(o.Plans, core.PricePlan{Mode: core.OnDemand, Price: price, Per: core.Hour, Granularity: 1, MinCharge: 60})
		cols = append(cols, "ondemand_usd_per_hr")
	}
	if s := row.get("spot_avg_usd_per_hr"); s != "" {
		price, err := core.ParseMicros(s)
		if err != nil {
			return o, nil, row.bad("spot_avg_usd_per_hr", priceAllowed, err)
		}
		p := core.PricePlan{Mode: core.Spot, Price: price, Per: core.Hour, Granularity: 1, MinCharge: 60}
		if b := row.get("spot_interrupt_freq"); b != "" {
			rate, ok := AWSReclaimRates[b]
			if !ok {
				return o, nil, row.bad("spot_interrupt_freq", "a Spot Advisor bucket: <5%, 5-10%, 10-15%, 15-20%, >20%, or empty", nil)
			}
			p.Reclaim = &core.ReclaimModel{Bucket: b, MonthlyRateBP: rate, NoticeSeconds: AWSSpotNoticeSeconds}
		}
		o.Plans = append(o.Plans, p)
		cols = append(cols, "spot_avg_usd_per_hr")
	}
	if s := row.get("reserved_1y_noupfront_usd_per_hr"); s != "" {
		if _, err := core.ParseMicros(s); err != nil {
			return o, nil, row.bad("reserved_1y_noupfront_usd_per_hr", priceAllowed, err)
		}
		price, ok := mulMicros(s, 730)
		if !ok {
			return o, nil, row.bad("reserved_1y_noupfront_usd_per_hr", priceAllowed, nil)
		}
		month := core.Month.Seconds()
		o.Plans = append(o.Plans, core.PricePlan{Mode: core.Monthly, Price: price, Per: core.Month, Granularity: month, Term: month})
		cols = append(cols, "reserved_1y_noupfront_usd_per_hr")
	}
	if len(o.Plans) == 0 {
		return o, nil, &ParseError{File: row.t.file, Line: row.line, Problem: "a row without a price", Allowed: "a price in at least one of ondemand_usd_per_hr, spot_avg_usd_per_hr, reserved_1y_noupfront_usd_per_hr"}
	}
	return o, cols, nil
}

// awsHardware sets o's accelerator and capability from its instance
// family, or failing that from its GPU model; a model no rule knows is an
// error rather than a guess that could put training on an inference chip.
func awsHardware(row *csvRow, o *core.Offer) error {
	family, _, _ := strings.Cut(o.InstanceType, ".")
	f, ok := awsFamilies[family]
	if !ok {
		a, c, known := guessHardware(o.GPUModel, o.SliceMilli)
		if !known {
			return row.bad("gpu_model", "an accelerator of a known maker (NVIDIA, AMD, AWS Inferentia or Trainium, Intel Gaudi, Qualcomm), or an instance family listed in docs/catalog.md", nil)
		}
		f = awsFamily{accel: a, cap: c}
	}
	if o.SliceMilli > 0 {
		f.cap = core.Inference
	}
	if f.model != "" {
		o.GPUModel = f.model
	}
	setHardware(o, f.accel, f.cap)
	return nil
}
