package plan

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// offerB builds an offer for tests, fluently.
type offerB struct{ o core.Offer }

func offer(id, model string, gpus int) *offerB {
	return &offerB{core.Offer{ID: id, Provider: "p", Region: "r", InstanceType: id, GPUModel: model, GPUs: gpus, Currency: "CNY"}}
}

func (b *offerB) hourly(price string) *offerB {
	b.o.Plans = append(b.o.Plans, core.PricePlan{Mode: core.OnDemand, Price: m(price), Per: core.Hour, Granularity: 3600, MinCharge: 3600})
	return b
}

// hourlyTOU adds an on-demand plan with one window every day, in UTC.
func (b *offerB) hourlyTOU(price string, start, end int, multBP int64) *offerB {
	b.hourly(price)
	p := &b.o.Plans[len(b.o.Plans)-1]
	p.TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: allDays, StartHour: start, EndHour: end, MultiplierBP: multBP}}}
	return b
}

var allDays = []time.Weekday{0, 1, 2, 3, 4, 5, 6}

func (b *offerB) spot(price string, monthlyRateBP int64) *offerB {
	p := core.PricePlan{Mode: core.Spot, Price: m(price), Per: core.Hour, Granularity: 1}
	if monthlyRateBP > 0 {
		p.Reclaim = &core.ReclaimModel{MonthlyRateBP: monthlyRateBP, NoticeSeconds: 120}
	}
	b.o.Plans = append(b.o.Plans, p)
	return b
}

func (b *offerB) term(mode core.BillingMode, per core.Period, price string) *offerB {
	b.o.Plans = append(b.o.Plans, core.PricePlan{Mode: mode, Price: m(price), Per: per, Granularity: per.Seconds(), Term: per.Seconds()})
	return b
}

func (b *offerB) weekly(price string) *offerB  { return b.term(core.Weekly, core.Week, price) }
func (b *offerB) monthly(price string) *offerB { return b.term(core.Monthly, core.Month, price) }
func (b *offerB) daily(price string) *offerB   { return b.term(core.Daily, core.Day, price) }
func (b *offerB) build() core.Offer            { return b.o }

func m(s string) core.Micros {
	v, err := core.ParseMicros(s)
	if err != nil {
		panic(err)
	}
	return v
}

// series builds a one-class series from per-hour GPUs.
func series(model string, gpus []int64) Series {
	return Series{Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), Hours: len(gpus), Classes: []ClassDemand{{GPUModel: model, GPUs: gpus}}}
}

// flat returns n hours of g GPUs.
func flat(n int, g int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = g
	}
	return out
}

// bump adds g GPUs to hours [from, to).
func bump(v []int64, from, to int, g int64) []int64 {
	for i := from; i < to; i++ {
		v[i] += g
	}
	return v
}

func mustClasses(offers ...core.Offer) []ClassPrices {
	c, err := Classes(offers)
	if err != nil {
		panic(err)
	}
	return c
}
