// Package audittest holds the fixed workload of the audit's golden tests
// and the builders it is made with, for the tests of audit, report, api
// and the CLI.
package audittest

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Nov is the first instant of the fixed workload's month, November 2026 UTC.
var Nov = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// At is hour o'clock of a November 2026 day, UTC.
func At(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }

// Money parses a decimal amount; it panics on a typo in a test.
func Money(s string) core.Micros {
	m, err := core.ParseMicros(s)
	if err != nil {
		panic(err)
	}
	return m
}

// OfferB builds an offer.
// OfferB builds an offer.
type OfferB struct{ o core.Offer }

// NewOffer starts an offer of gpus GPUs of model with memMiB each.
func NewOffer(id, model string, gpus int, memMiB int64) *OfferB {
	return &OfferB{core.Offer{ID: id, Provider: "cloud", Region: "r1", InstanceType: id, GPUModel: model, GPUs: gpus, GPUMemMiB: memMiB, Currency: "USD"}}
}

// Hourly adds an on-demand plan at price per hour, billed hourly.
func (b *OfferB) Hourly(price string) *OfferB {
	b.o.Plans = append(b.o.Plans, core.PricePlan{Mode: core.OnDemand, Price: Money(price), Per: core.Hour, Granularity: 3600})
	return b
}

// Monthly adds a committed monthly term at price per month.
func (b *OfferB) Monthly(price string) *OfferB {
	b.o.Plans = append(b.o.Plans, core.PricePlan{Mode: core.Monthly, Price: Money(price), Per: core.Month, Granularity: 3600, Term: core.Month.Seconds()})
	return b
}

// Peak multiplies weekday 08-20 by peakBP and nightly 22-06 by offBP.
func (b *OfferB) Peak(peakBP, offBP int64) *OfferB {
	p := &b.o.Plans[0]
	week := []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
	all := append([]time.Weekday{time.Sunday}, append(week, time.Saturday)...)
	p.TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{
		{Weekdays: week, StartHour: 8, EndHour: 20, MultiplierBP: peakBP},
		{Weekdays: all, StartHour: 22, EndHour: 6, MultiplierBP: offBP},
	}}
	return b
}

// Build returns the offer.
func (b *OfferB) Build() core.Offer { return b.o }

// JobB builds a job.
// JobB builds a job.
type JobB struct{ j core.Job }

// NewJob starts a one-GPU regular job of team.
func NewJob(id, team string) *JobB {
	return &JobB{core.Job{ID: id, Team: team, Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: Nov, State: core.JobSucceeded}}
}

// GPUs sets the GPU count.
func (b *JobB) GPUs(n int) *JobB { b.j.Request.GPUs = n; return b }

// Mem sets the memory asked per GPU.
func (b *JobB) Mem(mib int64) *JobB { b.j.Request.MemPerGPUMiB = mib; return b }

// Milli sets the share of each GPU.
func (b *JobB) Milli(m core.Milli) *JobB { b.j.Request.MilliPerGPU = m; return b }

// Tier sets the tier.
func (b *JobB) Tier(t core.Tier) *JobB { b.j.Tier = t; return b }

// Deferrable marks the job deferrable.
func (b *JobB) Deferrable() *JobB { b.j.Deferrable = true; return b }

// Throughput sets the throughput table: model, units per hour, ...
func (b *JobB) Throughput(kv ...any) *JobB {
	b.j.Request.Throughput = map[string]int64{}
	for i := 0; i < len(kv); i += 2 {
		b.j.Request.Throughput[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return b
}

// Build returns the job.
func (b *JobB) Build() core.Job { return b.j }

// NewLease is a lease of offerID in mode over [from, to) (to zero: open).
func NewLease(id, offerID string, mode core.BillingMode, from, to time.Time) audit.Lease {
	return audit.Lease{ID: id, OfferID: offerID, Mode: mode, Start: from, End: to}
}

// NewRun is a whole-GPU run of jobID on gpus of leaseID over [from, to).
func NewRun(jobID, leaseID string, gpus []int, from, to time.Time) audit.Run {
	return audit.Run{JobID: jobID, Unit: jobID, LeaseID: leaseID, GPUs: gpus, Milli: core.WholeGPU, From: from, To: to}
}

// Samples returns readings of one GPU every step over [from, to).
func Samples(leaseID string, gpu int, from, to time.Time, step time.Duration, util int, memMiB int64) []core.Sample {
	var out []core.Sample
	for t := from; t.Before(to); t = t.Add(step) {
		out = append(out, core.Sample{LeaseID: leaseID, GPU: gpu, At: t, UtilPct: util, MemUsedMiB: memMiB})
	}
	return out
}

// Catalog is the fixed workload's catalog.
func Catalog() []core.Offer {
	return []core.Offer{
		NewOffer("a100x8", "A100-80G", 8, 81920).Hourly("32").Monthly("16000").Build(),
		NewOffer("a100x1", "A100-80G", 1, 81920).Hourly("4").Monthly("2000").Build(),
		NewOffer("h100x1", "H100", 1, 81920).Hourly("8").Build(),
		NewOffer("l4x1", "L4", 1, 24576).Hourly("0.8").Build(),
		NewOffer("t4x1", "T4", 1, 16384).Hourly("0.5").Build(),
		NewOffer("v100x1", "V100", 1, 16384).Hourly("1.2").Peak(15000, 5000).Build(),
	}
}

// Workload is the fixed workload: a job asking 16 GB and peaking at 8, an
// 8-GPU job with 3 busy GPUs, an H100 at low utilization, deferrable work
// at peak hours and a committed base of two A100s for one small job.
func Workload() audit.Input {
	in := audit.Input{From: Nov, To: Nov.AddDate(0, 1, 0), Period: audit.Month, Currency: "USD", Offers: Catalog(), Location: time.UTC}
	in.Jobs = []core.Job{
		NewJob("mem-16", "vision").Mem(16384).Build(),
		NewJob("gang-8", "nlp").GPUs(8).Mem(40000).Build(),
		NewJob("infer-h100", "vision").Mem(20000).Throughput("H100", 1000, "L4", 300, "A100-80G", 600).Build(),
		NewJob("etl-peak", "data").Tier(core.TierOffline).Deferrable().Build(),
		NewJob("train-small", "research").Mem(40000).Build(),
	}
	in.Leases = []audit.Lease{
		NewLease("l-mem", "a100x1", core.OnDemand, At(2, 0), At(2, 10)),
		NewLease("l-gang", "a100x8", core.OnDemand, At(3, 0), At(3, 20)),
		NewLease("l-h100", "h100x1", core.OnDemand, At(5, 0), At(7, 2)),
		NewLease("l-v100", "v100x1", core.OnDemand, At(9, 10), At(9, 14)),
		NewLease("l-base-1", "a100x1", core.Monthly, Nov, time.Time{}),
		NewLease("l-base-2", "a100x1", core.Monthly, Nov, time.Time{}),
	}
	in.Runs = []audit.Run{
		NewRun("mem-16", "l-mem", []int{0}, At(2, 0), At(2, 10)),
		NewRun("gang-8", "l-gang", []int{0, 1, 2, 3, 4, 5, 6, 7}, At(3, 0), At(3, 20)),
		NewRun("infer-h100", "l-h100", []int{0}, At(5, 0), At(7, 2)),
		NewRun("etl-peak", "l-v100", []int{0}, At(9, 10), At(9, 14)),
		NewRun("train-small", "l-base-1", []int{0}, At(4, 0), At(8, 4)),
	}
	half := 30 * time.Minute
	add := func(ss []core.Sample) { in.Samples = append(in.Samples, ss...) }
	add(Samples("l-mem", 0, At(2, 0), At(2, 10), half, 60, 8192))
	for g := range 8 {
		if g < 3 {
			add(Samples("l-gang", g, At(3, 0), At(3, 20), half, 70, 30000))
		} else {
			add(Samples("l-gang", g, At(3, 0), At(3, 20), half, 2, 500))
		}
	}
	add(Samples("l-h100", 0, At(5, 0), At(7, 2), half, 20, 18000))
	add(Samples("l-v100", 0, At(9, 10), At(9, 14), 15*time.Minute, 90, 12000))
	add(Samples("l-base-1", 0, At(4, 0), At(8, 4), half, 80, 36000))
	add(Samples("l-base-2", 0, At(4, 0), At(8, 4), half, 0, 0))
	in.Alerts = []audit.Alert{
		{Kind: audit.ZombieKind, LeaseID: "l-base-2", GPU: 0, Unit: "old-notebook", Team: "research", Raised: At(10, 9), Resolved: At(10, 10)},
		{Kind: "idle-alert", LeaseID: "l-gang", GPU: 5, Unit: "gang-8", Team: "nlp", Raised: At(3, 1)},
	}
	in.Now = Nov.AddDate(0, 1, 0)
	return in
}

// ByKind returns r's recommendations of kind k.
func ByKind(r audit.Report, k audit.Kind) []audit.Recommendation {
	var out []audit.Recommendation
	for _, x := range r.Recommendations {
		if x.Kind == k {
			out = append(out, x)
		}
	}
	return out
}

// EvidenceOf returns the value of r's evidence named name.
func EvidenceOf(r audit.Recommendation, name string) string {
	for _, e := range r.Evidence {
		if e.Name == name {
			return e.Value
		}
	}
	return fmt.Sprintf("<no %s>", name)
}
