package billing

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

var granularities = []int64{1, 60, 3600, 86400}

// genPlan draws any valid plan: on-demand or spot at any granularity and
// minimum, or a committed term with or without early termination, with
// or without a spot series and time-of-use windows.
func genPlan(t *rapid.T) *core.PricePlan {
	p := core.PricePlan{
		Mode:        rapid.SampledFrom(core.BillingModes).Draw(t, "mode"),
		Price:       core.Micros(rapid.Int64Range(0, 100_000_000).Draw(t, "price")),
		Per:         rapid.SampledFrom([]core.Period{core.Second, core.Hour, core.Day, core.Week, core.Month}).Draw(t, "per"),
		Granularity: rapid.SampledFrom(granularities).Draw(t, "gran"),
		MinCharge:   rapid.SampledFrom([]int64{0, 60, 600, 3600}).Draw(t, "min"),
	}
	switch p.Mode {
	case core.Daily, core.Weekly, core.Monthly:
		p.Term = map[core.BillingMode]int64{core.Daily: day, core.Weekly: week, core.Monthly: month}[p.Mode]
		p.Granularity = p.Term
		if rapid.Bool().Draw(t, "early") {
			p.EarlyTermination = &core.EarlyTermination{Granularity: rapid.SampledFrom(granularities).Draw(t, "etgran"), Fee: core.Micros(rapid.Int64Range(0, 500_000_000).Draw(t, "fee"))}
		}
	case core.Spot:
		n := rapid.IntRange(0, 5).Draw(t, "points")
		at := t0
		for i := 0; i < n; i++ {
			at = at.Add(time.Duration(rapid.Int64Range(1, 48*3600).Draw(t, "gap")) * time.Second)
			p.Series = append(p.Series, core.PricePoint{At: at, Price: core.Micros(rapid.Int64Range(0, 100_000_000).Draw(t, "spot"))})
		}
	}
	if rapid.Bool().Draw(t, "tou") {
		w := core.Window{
			Weekdays:     []time.Weekday{time.Weekday(rapid.IntRange(0, 6).Draw(t, "wd"))},
			StartHour:    rapid.IntRange(0, 23).Draw(t, "start"),
			EndHour:      rapid.IntRange(0, 24).Draw(t, "end"),
			MultiplierBP: rapid.Int64Range(0, 30000).Draw(t, "mult"),
		}
		p.TimeOfUse = &core.TimeOfUse{Location: loc(rapid.SampledFrom([]string{"UTC", "Asia/Shanghai", "America/New_York", "Asia/Kathmandu"}).Draw(t, "tz")), Windows: []core.Window{w}}
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("generated invalid plan: %v", err)
	}
	return &p
}

func genSpan(t *rapid.T, label string) Span {
	start := t0.Add(time.Duration(rapid.Int64Range(0, 30*86400).Draw(t, label+"start")) * time.Second)
	return Span{Start: start, End: start.Add(time.Duration(rapid.Int64Range(0, 70*86400).Draw(t, label+"len")) * time.Second)}
}

func TestPropertyCostMonotoneInDuration(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		s := genSpan(t, "")
		longer := s
		longer.End = s.End.Add(time.Duration(rapid.Int64Range(0, 10*86400).Draw(t, "more")) * time.Second)
		a, err1 := Cost(p, s)
		b, err2 := Cost(p, longer)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if b.Amount < a.Amount {
			t.Fatalf("held %d s costs %s, held %d s costs %s", a.Used, a.Amount, b.Used, b.Amount)
		}
		if a.Billed < a.Used || a.Billed < p.MinCharge && p.Term == 0 {
			t.Fatalf("billed %d s for %d s used (min %d)", a.Billed, a.Used, p.MinCharge)
		}
	})
}

func TestPropertyFinerGranularityNeverCostsMore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		if p.Term > 0 {
			p.Term, p.EarlyTermination = 0, nil
			p.Mode = core.OnDemand
		}
		i := rapid.IntRange(0, len(granularities)-1).Draw(t, "fine")
		j := rapid.IntRange(i, len(granularities)-1).Draw(t, "coarse")
		fine, coarse := *p, *p
		fine.Granularity, coarse.Granularity = granularities[i], granularities[j]
		s := genSpan(t, "")
		a, _ := Cost(&fine, s)
		b, _ := Cost(&coarse, s)
		if a.Amount > b.Amount {
			t.Fatalf("granularity %d s costs %s > granularity %d s costs %s", fine.Granularity, a.Amount, coarse.Granularity, b.Amount)
		}
	})
}

func TestPropertyAllocationSumsToBill(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		gpus := rapid.IntRange(1, 8).Draw(t, "gpus")
		s := genSpan(t, "")
		b, _ := Cost(p, s)
		// Uses laid on per-GPU timelines so that capacity holds.
		var uses []Use
		for g := 0; g < gpus; g++ {
			at := s.Start
			for k := rapid.IntRange(0, 3).Draw(t, "uses"); k > 0; k-- {
				from := at.Add(time.Duration(rapid.Int64Range(0, 86400).Draw(t, "gap")) * time.Second)
				to := from.Add(time.Duration(rapid.Int64Range(1, 5*86400).Draw(t, "dur")) * time.Second)
				uses = append(uses, Use{Team: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "team"), Milli: core.Milli(rapid.Int64Range(1, 1000).Draw(t, "milli")), From: from, To: to})
				at = to
			}
		}
		a, err := Allocate(p, gpus, s, uses)
		if err != nil {
			t.Fatal(err)
		}
		sum := a.Idle.Amount
		for _, l := range a.Lines {
			sum += l.Amount
			if l.Amount < 0 {
				t.Fatalf("negative line %+v", l)
			}
		}
		if sum != b.Amount || a.Bill != b.Amount {
			t.Fatalf("allocation sums to %s, bill %s", sum, b.Amount)
		}
		if a.Idle.Amount < 0 || a.Idle.MilliSeconds < 0 {
			t.Fatalf("negative idle %+v", a.Idle)
		}
	})
}

func TestPropertySplitSumsToBill(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		s := genSpan(t, "")
		var cuts []time.Time
		at := t0
		for k := rapid.IntRange(0, 20).Draw(t, "cuts"); k > 0; k-- {
			at = at.Add(time.Duration(rapid.Int64Range(1, 10*86400).Draw(t, "step")) * time.Second)
			cuts = append(cuts, at)
		}
		parts, b, err := Split(p, s, cuts)
		if err != nil {
			t.Fatal(err)
		}
		var sum core.Micros
		for _, x := range parts {
			sum += x
		}
		if sum != b.Amount {
			t.Fatalf("split sums to %s, bill %s", sum, b.Amount)
		}
	})
}

// referenceCost prices a span second by second through the standard
// library's calendar: slow and obviously right, to check the fast path.
func referenceCost(p *core.PricePlan, from, to time.Time) core.U128 {
	var acc core.U128
	for t := from; t.Before(to); {
		next := t.Add(time.Minute).Truncate(time.Minute)
		if next.After(to) {
			next = to
		}
		for _, pt := range p.Series {
			if pt.At.After(t) && pt.At.Before(next) {
				next = pt.At
			}
		}
		price := p.Price
		for _, pt := range p.Series {
			if !pt.At.After(t) {
				price = pt.Price
			}
		}
		mult := int64(bpOne)
		if p.TimeOfUse != nil {
			mult = p.TimeOfUse.MultiplierAt(t)
		}
		acc = acc.Add(core.Mul64(uint64(price), uint64(mult)).MulU64(uint64(next.Sub(t) / time.Second)))
		t = next
	}
	return acc
}

func TestPropertyIntegralMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		from := t0.Add(time.Duration(rapid.Int64Range(-400*86400, 400*86400).Draw(t, "from")) * time.Second)
		to := from.Add(time.Duration(rapid.Int64Range(0, 20*86400).Draw(t, "len")) * time.Second)
		got := newRater(p).integral(from, to)
		if want := referenceCost(p, from, to); got != want {
			t.Fatalf("integral %v, reference %v", got, want)
		}
	})
}

// TestPropertyPaidUntilMatchesCost: PaidUntil, which skips pricing where
// it can, gives Cost's boundary for any plan and span, sub-second
// instants and spans that end before they start included.
func TestPropertyPaidUntilMatchesCost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		s := genSpan(t, "")
		s.Start = s.Start.Add(time.Duration(rapid.Int64Range(0, 999).Draw(t, "startms")) * time.Millisecond)
		s.End = s.End.Add(time.Duration(rapid.Int64Range(-2000, 999).Draw(t, "endms")) * time.Millisecond)
		b, errCost := Cost(p, s)
		got, err := PaidUntil(p, s.Start, s.End)
		if (err != nil) != (errCost != nil) || !got.Equal(b.PaidUntil) {
			t.Fatalf("PaidUntil = %s, %v; Cost's = %s, %v", got, err, b.PaidUntil, errCost)
		}
	})
}

// TestPropertyPaidMemo: a PaidMemo answers as PaidUntil does for any plan
// and any sequence of instants, mostly later and sometimes earlier than
// the last (the memo must notice when an instant leaves what it holds
// for), sometimes before the start (an error), and when the plan or the
// start changes.
func TestPropertyPaidMemo(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plans := []*core.PricePlan{genPlan(t), genPlan(t)}
		starts := []time.Time{t0.Add(time.Duration(rapid.Int64Range(0, 86400).Draw(t, "s0")) * time.Millisecond * 1000),
			t0.Add(time.Duration(rapid.Int64Range(0, 86400*1000).Draw(t, "s1")) * time.Millisecond)}
		var m PaidMemo
		now := starts[0]
		for i, n := 0, rapid.IntRange(1, 60).Draw(t, "n"); i < n; i++ {
			p := plans[rapid.IntRange(0, 9).Draw(t, "plan")/9]
			start := starts[rapid.IntRange(0, 9).Draw(t, "start")/9]
			switch rapid.IntRange(0, 9).Draw(t, "move") {
			case 0:
				now = now.Add(-time.Duration(rapid.Int64Range(0, 3*86400*1000).Draw(t, "back")) * time.Millisecond)
			case 1:
				now = now.Add(time.Duration(rapid.Int64Range(0, 40*86400).Draw(t, "jump")) * time.Second)
			default:
				now = now.Add(time.Duration(rapid.Int64Range(0, 7200*1000).Draw(t, "step")) * time.Millisecond)
			}
			want, werr := PaidUntil(p, start, now)
			got, gerr := m.PaidUntil(p, start, now)
			if (werr != nil) != (gerr != nil) || want != got {
				t.Fatalf("step %d at %s: memo %s (%v), PaidUntil %s (%v)", i, now, got, gerr, want, werr)
			}
		}
	})
}

// TestPropertyPricer: a Pricer, carried over any sequence of plans that
// share, change and drop time-of-use tariffs, prices every span as Cost
// does.
func TestPropertyPricer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plans := []*core.PricePlan{genPlan(t), genPlan(t), genPlan(t)}
		if rapid.Bool().Draw(t, "share") && plans[0].TimeOfUse != nil {
			plans[1].TimeOfUse = plans[0].TimeOfUse // one tariff, two plans
		}
		var pr Pricer
		for i, n := 0, rapid.IntRange(1, 20).Draw(t, "n"); i < n; i++ {
			p := plans[rapid.IntRange(0, len(plans)-1).Draw(t, "plan")]
			s := genSpan(t, "")
			s.Reclaimed = rapid.Bool().Draw(t, "reclaimed")
			want, werr := Cost(p, s)
			got, gerr := pr.Cost(p, s)
			if (werr != nil) != (gerr != nil) || want != got {
				t.Fatalf("call %d: Pricer %+v (%v), Cost %+v (%v)", i, got, gerr, want, werr)
			}
		}
	})
}
