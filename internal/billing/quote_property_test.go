package billing

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// quoteByLedger is the quote worked out line by line: count leases metered
// into daily ledger lines, then the vouchers applied to those lines. It
// is what QuoteLease must equal, in work and memory proportional to
// count × days, so only small inputs use it.
func quoteByLedger(o *core.Offer, mode core.BillingMode, s Span, count int, vouchers []core.Voucher) (Quote, error) {
	p, ok := o.Plan(mode)
	if !ok {
		return Quote{}, fmt.Errorf("mode %s not sold", mode)
	}
	b, err := Cost(p, s)
	if err != nil {
		return Quote{}, err
	}
	cuts := DayCuts(s.Start, b.PaidUntil, time.UTC)
	l := &Ledger{Currency: o.Currency}
	for i := 0; i < count; i++ {
		lease := &core.Lease{ID: fmt.Sprintf("quote-%d", i), OfferID: o.ID, Mode: mode}
		if _, err := l.Meter(o, lease, p, s, cuts); err != nil {
			return Quote{}, err
		}
	}
	total := l.Total()
	credits := l.ApplyVouchers(vouchers)
	q := Quote{
		OfferID: o.ID, Mode: mode, Count: count, Currency: o.Currency,
		Start: s.Start, End: s.End, Bill: b, Total: total, Credits: credits, Net: l.Total(),
		PaidMilliGPUHours: core.MulDivHalfEven(int64(count*o.GPUs)*1000, b.Billed, 3600),
	}
	if p.Reclaim != nil && !s.Reclaimed {
		q.ExpectedReclaimsBP = core.MulDivHalfEven(p.Reclaim.MonthlyRateBP, b.Billed, core.Month.Seconds())
	}
	return q, nil
}

// genVouchers draws up to four vouchers around span s: any share, caps
// from a micro-unit to more than any bill, validity starting before or
// inside the span (mostly at odd times, now and then at midnight) and
// ending inside or after it, caps that often run out part way through the
// count machines' total, filters that mostly take the offer, and now
// and then an id used twice, since QuoteLease takes vouchers from any
// caller.
func genVouchers(t *rapid.T, o *core.Offer, mode core.BillingMode, s Span, total core.Micros) []core.Voucher {
	n := rapid.IntRange(0, 4).Draw(t, "vouchers")
	vs := make([]core.Voucher, n)
	for i := range vs {
		from := s.Start.Add(time.Duration(rapid.Int64Range(-5*86400, int64(s.End.Sub(s.Start)/time.Second)+86400).Draw(t, "vfrom")) * time.Second)
		if rapid.IntRange(0, 3).Draw(t, "midnight") == 0 {
			from = from.Truncate(24 * time.Hour)
		}
		v := core.Voucher{
			ID:        rapid.SampledFrom([]string{"a", "b", "c", "d", fmt.Sprint("v", i)}).Draw(t, "vid"),
			ShareBP:   rapid.Int64Range(1, 10_000).Draw(t, "share"),
			Cap:       core.Micros(rapid.SampledFrom([]int64{1, 7, 1_000, 999_999, 50_000_000, 3_000_000_000, 1 << 50}).Draw(t, "cap")),
			ValidFrom: from,
			ValidTo:   from.Add(time.Duration(rapid.Int64Range(-86400, 100*86400).Draw(t, "vlen")) * time.Second),
		}
		switch rapid.IntRange(0, 5).Draw(t, "filter") {
		case 1:
			v.Providers = []string{o.Provider}
		case 2:
			v.Providers = []string{"elsewhere"}
		case 3:
			v.Modes = []core.BillingMode{mode}
		}
		if rapid.Bool().Draw(t, "capofbill") {
			// A cap that runs out part way through the lines.
			v.Cap = core.Micros(rapid.Int64Range(1, max(1, int64(total)/2)).Draw(t, "capbill"))
		}
		vs[i] = v
	}
	return vs
}

// TestPropertyQuoteMatchesLedger: pricing one machine and multiplying,
// with vouchers worked out over one machine's daily lines in batches,
// gives the same quote, to the micro-unit, as metering every machine's
// daily lines into a ledger and applying the vouchers line by line.
func TestPropertyQuoteMatchesLedger(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPlan(t)
		o := &core.Offer{ID: "x/y/z", Provider: "idc", GPUModel: "V100", GPUs: rapid.IntRange(1, 8).Draw(t, "gpus"), Currency: "CNY", Plans: []core.PricePlan{*p}}
		s := genSpan(t, "")
		s.Start = s.Start.Add(time.Duration(rapid.Int64Range(0, 999).Draw(t, "ms")) * time.Millisecond)
		s.Reclaimed = p.Mode == core.Spot && rapid.Bool().Draw(t, "reclaimed")
		count := rapid.IntRange(1, 12).Draw(t, "count")
		b, _ := Cost(p, s)
		vs := genVouchers(t, o, p.Mode, s, b.Amount*core.Micros(count))
		want, werr := quoteByLedger(o, p.Mode, s, count, vs)
		got, gerr := QuoteLease(o, p.Mode, s, count, vs)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: ledger %v, quote %v", werr, gerr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("quote differs from the ledger's (-ledger +quote):\n%s", diff)
		}
	})
}

// TestQuoteWorkDoesNotGrowWithCount: a quote of 1000 machines over ten
// years allocates no more than a quote of one, on a time-of-use plan that
// a voucher covers for two of the years (the costliest kind of quote).
func TestQuoteWorkDoesNotGrowWithCount(t *testing.T) {
	sh := loc("Asia/Shanghai")
	o := &core.Offer{ID: "idc/cd/a100x8", Provider: "idc", GPUModel: "A100", GPUs: 8, Currency: "USD", Plans: []core.PricePlan{
		*plan(core.OnDemand, "24").tou(sh, core.Window{Weekdays: allDays, StartHour: 23, EndHour: 7, MultiplierBP: 6000}).build(t),
	}}
	s := Span{Start: t0, End: t0.Add(MaxQuoteSpan)}
	vs := []core.Voucher{{ID: "v", ShareBP: 3000, Cap: money("500"), ValidFrom: t0, ValidTo: t0.AddDate(2, 0, 0)}}
	allocs := func(count int) float64 {
		return testing.AllocsPerRun(3, func() {
			if _, err := QuoteLease(o, core.OnDemand, s, count, vs); err != nil {
				t.Fatal(err)
			}
		})
	}
	one, many := allocs(1), allocs(1000)
	if many > one {
		t.Errorf("allocations: %.0f for 1000 machines, %.0f for one; want no more", many, one)
	}
	q, err := QuoteLease(o, core.OnDemand, s, 1000, vs)
	if err != nil {
		t.Fatal(err)
	}
	one1, _ := QuoteLease(o, core.OnDemand, s, 1, vs)
	if q.Total != 1000*one1.Total || q.Credits["v"] != money("500") || q.Net != q.Total-money("500") {
		t.Errorf("1000 machines: total %s (one: %s), credits %v, net %s", q.Total, one1.Total, q.Credits, q.Net)
	}
}

func TestQuoteLeaseLimits(t *testing.T) {
	o := &core.Offer{ID: "idc/cd/v100x8", Provider: "idc", GPUModel: "V100", GPUs: 8, Currency: "CNY", Plans: []core.PricePlan{
		*plan(core.OnDemand, "1000000").build(t),
	}}
	cases := []struct {
		name   string
		span   Span
		count  int
		field  string
		prefix string
	}{
		{"span of 3650 days and a second", Span{Start: t0, End: t0.Add(MaxQuoteSpan + time.Second)}, 1, "end",
			`end: invalid value "2036-02-28T10:00:01Z": want at most 3650 days after start 2026-03-02T10:00:00Z`},
		{"span of thousands of years", Span{Start: time.Time{}, End: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}, 1, "end", "end: "},
		{"total overflows", Span{Start: t0, End: t0.Add(MaxQuoteSpan)}, 1_000_000, "count",
			`count: invalid value "1000000": want at most 105 machines: at 87600000000.00 CNY each the total must not exceed 9223372036854.775807 CNY`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := QuoteLease(o, core.OnDemand, tc.span, tc.count, nil)
			fe, ok := err.(*core.FieldError)
			if !ok || fe.Field != tc.field || len(err.Error()) < len(tc.prefix) || err.Error()[:len(tc.prefix)] != tc.prefix {
				t.Errorf("err = %v, want a field error on %s starting %q", err, tc.field, tc.prefix)
			}
		})
	}
	if _, err := QuoteLease(o, core.OnDemand, Span{Start: t0, End: t0.Add(MaxQuoteSpan)}, 105, nil); err != nil {
		t.Errorf("105 machines over 3650 days: %v", err)
	}
}

// TestQuoteCreditsMatchLedger pins the cases where batching the machines
// of a day could go wrong against the line-by-line ledger.
func TestQuoteCreditsMatchLedger(t *testing.T) {
	o := &core.Offer{ID: "idc/cd/v100x8", Provider: "idc", GPUModel: "V100", GPUs: 8, Currency: "CNY", Plans: []core.PricePlan{
		*plan(core.OnDemand, "10.000007").gran(60).build(t),
		*plan(core.Weekly, "450").per(core.Week).term(week).early(day, "30").build(t),
	}}
	span := Span{Start: t0.Add(1234 * time.Millisecond), End: t0.Add(9*24*time.Hour + 17*time.Minute)}
	v := func(id, share, capv string, from, to time.Time) core.Voucher {
		bp, _ := core.ParseMicros(share)
		return core.Voucher{ID: id, ShareBP: int64(bp) / 10_000, Cap: money(capv), ValidFrom: from, ValidTo: to}
	}
	year := t0.AddDate(1, 0, 0)
	cases := []struct {
		name  string
		mode  core.BillingMode
		span  Span
		count int
		vs    []core.Voucher
	}{
		{"cap runs out inside a day's machines", core.OnDemand, span, 7, []core.Voucher{v("v", "30", "1000", t0, year)}},
		{"a second voucher takes what the first left", core.OnDemand, span, 7, []core.Voucher{v("a", "50", "777.77", t0, year), v("b", "100", "2000", t0, year)}},
		{"one id twice, caps shared", core.OnDemand, span, 5, []core.Voucher{v("a", "20", "300", t0, year), v("a", "30", "100000", t0, year)}},
		{"validity from an odd hour to a midnight", core.OnDemand, span, 3, []core.Voucher{v("v", "100", "100000", t0.Add(50*time.Hour+13*time.Minute), time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC))}},
		{"left early with a fee", core.Weekly, Span{Start: t0, End: t0.Add(3*24*time.Hour + time.Hour)}, 4, []core.Voucher{v("v", "40", "1000000", t0, year)}},
		{"no voucher", core.OnDemand, span, 9, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := quoteByLedger(o, tc.mode, tc.span, tc.count, tc.vs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := QuoteLease(o, tc.mode, tc.span, tc.count, tc.vs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-ledger +quote):\n%s", diff)
			}
			if len(tc.vs) > 0 && len(got.Credits) == 0 {
				t.Errorf("no voucher credited: the case tests nothing")
			}
		})
	}
}
