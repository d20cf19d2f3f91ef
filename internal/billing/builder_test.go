package billing

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// planB builds price plans for tests: plan(core.OnDemand, "21.958").per(core.Hour)...
type planB struct{ p core.PricePlan }

func plan(mode core.BillingMode, price string) *planB {
	m, err := core.ParseMicros(price)
	if err != nil {
		panic(err)
	}
	return &planB{core.PricePlan{Mode: mode, Price: m, Per: core.Hour, Granularity: 1}}
}

func (b *planB) per(p core.Period) *planB   { b.p.Per = p; return b }
func (b *planB) gran(sec int64) *planB      { b.p.Granularity = sec; return b }
func (b *planB) minCharge(sec int64) *planB { b.p.MinCharge = sec; return b }
func (b *planB) term(sec int64) *planB      { b.p.Term = sec; b.p.Granularity = sec; return b }
func (b *planB) reclaim(bp int64) *planB {
	b.p.Reclaim = &core.ReclaimModel{MonthlyRateBP: bp, NoticeSeconds: 120}
	return b
}
func (b *planB) early(gran int64, fee string) *planB {
	f, _ := core.ParseMicros(fee)
	b.p.EarlyTermination = &core.EarlyTermination{Granularity: gran, Fee: f}
	return b
}
func (b *planB) series(pts ...any) *planB {
	for i := 0; i < len(pts); i += 2 {
		m, _ := core.ParseMicros(pts[i+1].(string))
		b.p.Series = append(b.p.Series, core.PricePoint{At: pts[i].(time.Time), Price: m})
	}
	return b
}
func (b *planB) tou(loc *time.Location, ws ...core.Window) *planB {
	b.p.TimeOfUse = &core.TimeOfUse{Location: loc, Windows: ws}
	return b
}
func (b *planB) build(t testing.TB) *core.PricePlan {
	t.Helper()
	p := b.p
	if err := p.Validate(); err != nil {
		t.Fatalf("test plan invalid: %v", err)
	}
	return &p
}

func money(s string) core.Micros {
	m, err := core.ParseMicros(s)
	if err != nil {
		panic(err)
	}
	return m
}

func loc(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

var (
	t0       = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC) // a Monday
	hour     = int64(3600)
	day      = 24 * hour
	week     = 7 * day
	month    = core.Month.Seconds()
	weekdays = []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}
	allDays  = []time.Weekday{time.Sunday, time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday}
)

func at(d time.Duration) time.Time { return t0.Add(d) }
