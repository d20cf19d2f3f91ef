package audit

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The fixed workload of the golden tests: November 2026, UTC.
var nov = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }

func money(s string) core.Micros {
	m, err := core.ParseMicros(s)
	if err != nil {
		panic(err)
	}
	return m
}

// offerB builds an offer.
type offerB struct{ o core.Offer }

func offer(id, model string, gpus int, memMiB int64) *offerB {
	return &offerB{core.Offer{ID: id, Provider: "cloud", Region: "r1", InstanceType: id, GPUModel: model, GPUs: gpus, GPUMemMiB: memMiB, Currency: "USD"}}
}

func (b *offerB) hourly(price string) *offerB {
	b.o.Plans = append(b.o.Plans, core.PricePlan{Mode: core.OnDemand, Price: money(price), Per: core.Hour, Granularity: 3600})
	return b
}

func (b *offerB) monthly(price string) *offerB {
	b.o.Plans = append(b.o.Plans, core.PricePlan{Mode: core.Monthly, Price: money(price), Per: core.Month, Granularity: 3600, Term: core.Month.Seconds()})
	return b
}

// peak multiplies weekday 08-20 by peakBP and nightly 22-06 by offBP.
func (b *offerB) peak(peakBP, offBP int64) *offerB {
	p := &b.o.Plans[0]
	week := []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
	all := append([]time.Weekday{time.Sunday}, append(week, time.Saturday)...)
	p.TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{
		{Weekdays: week, StartHour: 8, EndHour: 20, MultiplierBP: peakBP},
		{Weekdays: all, StartHour: 22, EndHour: 6, MultiplierBP: offBP},
	}}
	return b
}

func (b *offerB) build() core.Offer { return b.o }

// jobB builds a job.
type jobB struct{ j core.Job }

func job(id, team string) *jobB {
	return &jobB{core.Job{ID: id, Team: team, Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: nov, State: core.JobSucceeded}}
}

func (b *jobB) gpus(n int) *jobB         { b.j.Request.GPUs = n; return b }
func (b *jobB) mem(mib int64) *jobB      { b.j.Request.MemPerGPUMiB = mib; return b }
func (b *jobB) milli(m core.Milli) *jobB { b.j.Request.MilliPerGPU = m; return b }
func (b *jobB) tier(t core.Tier) *jobB   { b.j.Tier = t; return b }
func (b *jobB) deferrable() *jobB        { b.j.Deferrable = true; return b }
func (b *jobB) throughput(kv ...any) *jobB {
	b.j.Request.Throughput = map[string]int64{}
	for i := 0; i < len(kv); i += 2 {
		b.j.Request.Throughput[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return b
}
func (b *jobB) build() core.Job { return b.j }

func lease(id, offerID string, mode core.BillingMode, from, to time.Time) Lease {
	return Lease{ID: id, OfferID: offerID, Mode: mode, Start: from, End: to}
}

func run(jobID, leaseID string, gpus []int, from, to time.Time) Run {
	return Run{JobID: jobID, Unit: jobID, LeaseID: leaseID, GPUs: gpus, Milli: core.WholeGPU, From: from, To: to}
}

// samples returns readings of one GPU every step over [from, to).
func samples(leaseID string, gpu int, from, to time.Time, step time.Duration, util int, memMiB int64) []core.Sample {
	var out []core.Sample
	for t := from; t.Before(to); t = t.Add(step) {
		out = append(out, core.Sample{LeaseID: leaseID, GPU: gpu, At: t, UtilPct: util, MemUsedMiB: memMiB})
	}
	return out
}

// catalog is the fixed workload's catalog.
func catalog() []core.Offer {
	return []core.Offer{
		offer("a100x8", "A100-80G", 8, 81920).hourly("32").monthly("16000").build(),
		offer("a100x1", "A100-80G", 1, 81920).hourly("4").monthly("2000").build(),
		offer("h100x1", "H100", 1, 81920).hourly("8").build(),
		offer("l4x1", "L4", 1, 24576).hourly("0.8").build(),
		offer("t4x1", "T4", 1, 16384).hourly("0.5").build(),
		offer("v100x1", "V100", 1, 16384).hourly("1.2").peak(15000, 5000).build(),
	}
}

// workload is the fixed workload: a job asking 16 GB and peaking at 8, an
// 8-GPU job with 3 busy GPUs, an H100 at low utilization, deferrable work
// at peak hours and a committed base of two A100s for one small job.
func workload() Input {
	in := Input{From: nov, To: nov.AddDate(0, 1, 0), Period: Month, Currency: "USD", Offers: catalog(), Location: time.UTC}
	in.Jobs = []core.Job{
		job("mem-16", "vision").mem(16384).build(),
		job("gang-8", "nlp").gpus(8).mem(40000).build(),
		job("infer-h100", "vision").mem(20000).throughput("H100", 1000, "L4", 300, "A100-80G", 600).build(),
		job("etl-peak", "data").tier(core.TierOffline).deferrable().build(),
		job("train-small", "research").mem(40000).build(),
	}
	in.Leases = []Lease{
		lease("l-mem", "a100x1", core.OnDemand, at(2, 0), at(2, 10)),
		lease("l-gang", "a100x8", core.OnDemand, at(3, 0), at(3, 20)),
		lease("l-h100", "h100x1", core.OnDemand, at(5, 0), at(7, 2)),
		lease("l-v100", "v100x1", core.OnDemand, at(9, 10), at(9, 14)),
		lease("l-base-1", "a100x1", core.Monthly, nov, time.Time{}),
		lease("l-base-2", "a100x1", core.Monthly, nov, time.Time{}),
	}
	in.Runs = []Run{
		run("mem-16", "l-mem", []int{0}, at(2, 0), at(2, 10)),
		run("gang-8", "l-gang", []int{0, 1, 2, 3, 4, 5, 6, 7}, at(3, 0), at(3, 20)),
		run("infer-h100", "l-h100", []int{0}, at(5, 0), at(7, 2)),
		run("etl-peak", "l-v100", []int{0}, at(9, 10), at(9, 14)),
		run("train-small", "l-base-1", []int{0}, at(4, 0), at(8, 4)),
	}
	half := 30 * time.Minute
	add := func(ss []core.Sample) { in.Samples = append(in.Samples, ss...) }
	add(samples("l-mem", 0, at(2, 0), at(2, 10), half, 60, 8192))
	for g := range 8 {
		if g < 3 {
			add(samples("l-gang", g, at(3, 0), at(3, 20), half, 70, 30000))
		} else {
			add(samples("l-gang", g, at(3, 0), at(3, 20), half, 2, 500))
		}
	}
	add(samples("l-h100", 0, at(5, 0), at(7, 2), half, 20, 18000))
	add(samples("l-v100", 0, at(9, 10), at(9, 14), 15*time.Minute, 90, 12000))
	add(samples("l-base-1", 0, at(4, 0), at(8, 4), half, 80, 36000))
	add(samples("l-base-2", 0, at(4, 0), at(8, 4), half, 0, 0))
	in.Alerts = []Alert{
		{Kind: ZombieKind, LeaseID: "l-base-2", GPU: 0, Unit: "old-notebook", Team: "research", Raised: at(10, 9), Resolved: at(10, 10)},
		{Kind: "idle-alert", LeaseID: "l-gang", GPU: 5, Unit: "gang-8", Team: "nlp", Raised: at(3, 1)},
	}
	in.Now = nov.AddDate(0, 1, 0)
	return in
}

func recByKind(r Report, k Kind) []Recommendation {
	var out []Recommendation
	for _, x := range r.Recommendations {
		if x.Kind == k {
			out = append(out, x)
		}
	}
	return out
}

func evidence(r Recommendation, name string) string {
	for _, e := range r.Evidence {
		if e.Name == name {
			return e.Value
		}
	}
	return fmt.Sprintf("<no %s>", name)
}
