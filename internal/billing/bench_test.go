package billing

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// benchSpans are lease intervals of varied length: minutes to weeks.
func benchSpans() []Span {
	spans := make([]Span, 1024)
	for i := range spans {
		start := t0.Add(time.Duration(i*977) * time.Second)
		spans[i] = Span{Start: start, End: start.Add(time.Duration(60+i*i*37) * time.Second)}
	}
	return spans
}

// BenchmarkCost prices lease intervals; the figure is the cost of
// 1M intervals = ns/op × 1e6.
func BenchmarkCost(b *testing.B) {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	plans := map[string]*core.PricePlan{
		"on-demand-per-second": {Mode: core.OnDemand, Price: 21_958_000, Per: core.Hour, Granularity: 1, MinCharge: 60},
		"monthly-term":         {Mode: core.Monthly, Price: 1_800_000_000, Per: core.Month, Granularity: month, Term: month},
		"spot-series": {Mode: core.Spot, Price: 8_591_000, Per: core.Hour, Granularity: 1, Series: []core.PricePoint{
			{At: t0.Add(6 * time.Hour), Price: 9_000_000}, {At: t0.Add(30 * time.Hour), Price: 7_500_000}, {At: t0.Add(80 * time.Hour), Price: 8_000_000}}},
		"time-of-use": {Mode: core.OnDemand, Price: 10_000_000, Per: core.Hour, Granularity: 3600, TimeOfUse: &core.TimeOfUse{Location: sh,
			Windows: []core.Window{{Weekdays: allDays, StartHour: 22, EndHour: 6, MultiplierBP: 5000}}}},
	}
	spans := benchSpans()
	for name, p := range plans {
		b.Run(name, func(b *testing.B) {
			var sink core.Micros
			for i := 0; b.Loop(); i++ {
				bill, err := Cost(p, spans[i%len(spans)])
				if err != nil {
					b.Fatal(err)
				}
				sink += bill.Amount
			}
			_ = sink
		})
	}
}
