package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

const (
	hour  = 3600
	day   = 24 * hour
	week  = 7 * day
	month = 730 * hour
)

func money(t testing.TB, s string) core.Micros {
	t.Helper()
	m, err := core.ParseMicros(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChooseTerm(t *testing.T) {
	m := func(s string) core.Micros { return money(t, s) }
	hourly := func(price string, gran int64) PeriodPrice { return OnDemand(core.Hour, m(price), gran, 0) }
	fixed := func(p core.Period, price string) PeriodPrice { return Fixed(p, m(price)) }
	pc := func(name string, sec, n int64, cost string) PeriodCount {
		return PeriodCount{Period: name, Seconds: sec, Count: n, Cost: m(cost)}
	}
	tests := []struct {
		name   string
		req    TermRequest
		chosen string
		total  string
		per    []PeriodCount
		paid   int64
		alts   []string // "plan total", cheapest first
		reason string   // a substring of the reason
	}{
		{
			name:   "seed: two weeks beat a month",
			req:    TermRequest{Length: 14 * day, Count: 1, Prices: []PeriodPrice{fixed(core.Week, "450"), fixed(core.Month, "1800")}},
			chosen: "all weekly", total: "900",
			per:    []PeriodCount{pc("week", week, 2, "900")},
			paid:   14 * day,
			alts:   []string{"all weekly 900.00", "all monthly 1800.00"},
			reason: "2 weeks at 450.00 = 900.00, no idle time; all monthly would cost 1800.00 (+900.00) and pay for 16d 10h idle",
		},
		{
			name:   "a week and three days",
			req:    TermRequest{Length: 10 * day, Count: 1, Prices: []PeriodPrice{fixed(core.Day, "80"), fixed(core.Week, "450")}},
			chosen: "mix", total: "690",
			per:    []PeriodCount{pc("week", week, 1, "450"), pc("day", day, 3, "240")},
			paid:   10 * day,
			alts:   []string{"mix 690.00", "all daily 800.00", "all weekly 900.00"},
			reason: "1 week at 450.00 + 3 days at 80.00 = 690.00, no idle time; all daily would cost 800.00 (+110.00); all weekly would cost 900.00 (+210.00) and pay for 4d idle",
		},
		{
			name:   "three days and five hours on demand",
			req:    TermRequest{Length: 3*day + 5*hour, Count: 1, Prices: []PeriodPrice{hourly("5", hour), fixed(core.Day, "80")}},
			chosen: "mix", total: "265",
			per:    []PeriodCount{pc("day", day, 3, "240"), pc("hour", hour, 5, "25")},
			paid:   3*day + 5*hour,
			alts:   []string{"mix 265.00", "all daily 320.00", "all hourly 385.00"},
			reason: "3 days at 80.00 + 5 hours at 5.00 = 265.00",
		},
		{
			name:   "a 730-hour month beats four weeks",
			req:    TermRequest{Length: 28 * day, Count: 1, Prices: []PeriodPrice{fixed(core.Week, "450"), fixed(core.Month, "1500")}},
			chosen: "all monthly", total: "1500",
			per:    []PeriodCount{pc("month", month, 1, "1500")},
			paid:   month,
			alts:   []string{"all monthly 1500.00", "all weekly 1800.00"},
			reason: "1 month at 1500.00 = 1500.00, 2d 10h idle",
		},
		{
			name:   "eight GPUs multiply every cost",
			req:    TermRequest{Length: 10 * day, Count: 8, Prices: []PeriodPrice{fixed(core.Day, "80"), fixed(core.Week, "450")}},
			chosen: "mix", total: "5520",
			per:    []PeriodCount{pc("week", week, 1, "3600"), pc("day", day, 3, "1920")},
			paid:   10 * day,
			alts:   []string{"mix 5520.00", "all daily 6400.00", "all weekly 7200.00"},
			reason: "= 690.00 per machine, 5520.00 for 8 machines",
		},
		{
			name:   "partial hours round up to the next hour",
			req:    TermRequest{Length: 2*hour + 1, Count: 1, Prices: []PeriodPrice{fixed(core.Hour, "3"), fixed(core.Day, "50")}},
			chosen: "all hourly", total: "9",
			per:  []PeriodCount{pc("hour", hour, 3, "9")},
			paid: 3 * hour,
			alts: []string{"all hourly 9.00", "all daily 50.00"},
		},
		{
			name:   "per-second billing charges the last partial hour pro rata",
			req:    TermRequest{Length: day + 90*60, Count: 1, Prices: []PeriodPrice{hourly("4", 1), fixed(core.Day, "80")}},
			chosen: "mix", total: "86",
			per:    []PeriodCount{pc("day", day, 1, "80"), {Period: "hour", Seconds: hour, Count: 1, PartialSeconds: 1800, Cost: m("6")}},
			paid:   day + 90*60,
			alts:   []string{"mix 86.00", "all hourly 102.00", "all daily 160.00"},
			reason: "1 day at 80.00 + 1h 30m at 4.00 per hour = 86.00",
		},
		{
			name: "a minimum charge applies to the one on-demand lease",
			req: TermRequest{Length: 60, Count: 1, Prices: []PeriodPrice{
				OnDemand(core.Hour, m("2"), 1, 600), fixed(core.Day, "40")}},
			chosen: "all hourly", total: "0.333333",
			per:  []PeriodCount{{Period: "hour", Seconds: hour, PartialSeconds: 600, Cost: m("0.333333")}},
			paid: 600,
			alts: []string{"all hourly 0.333333", "all daily 40.00"},
		},
		{
			name: "an arbitrary committed term",
			req: TermRequest{Length: 95 * day, Count: 1, Prices: []PeriodPrice{
				{Name: "3 months", Seconds: 3 * month, Price: m("4000")}, fixed(core.Month, "1500"), fixed(core.Week, "400")}},
			chosen: "mix", total: "4400",
			per:  []PeriodCount{pc("3 months", 3*month, 1, "4000"), pc("week", week, 1, "400")},
			paid: 3*month + week,
			// 95 days = 2280 h: 3 months (2190 h) + a week (168 h) cover it.
			alts:   []string{"mix 4400.00", "all weekly 5600.00", "all monthly 6000.00", "all 3 months 8000.00"},
			reason: "1 × 3 months at 4000.00 + 1 week at 400.00 = 4400.00, 3d 6h idle",
		},
		{
			name:   "equal cost: fewer leases win",
			req:    TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{fixed(core.Hour, "1"), fixed(core.Day, "24")}},
			chosen: "all daily", total: "24",
			per:    []PeriodCount{pc("day", day, 1, "24")},
			paid:   day,
			alts:   []string{"all daily 24.00", "all hourly 24.00"},
			reason: "all hourly would cost the same with 24 leases instead of 1",
		},
		{
			name:   "equal cost and leases: the longer period wins",
			req:    TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{hourly("1", hour), fixed(core.Day, "24")}},
			chosen: "all daily", total: "24",
			per:    []PeriodCount{pc("day", day, 1, "24")},
			paid:   day,
			alts:   []string{"all daily 24.00", "all hourly 24.00"},
			reason: "all hourly would cost the same with shorter periods",
		},
		{
			name:   "only pay as you go",
			req:    TermRequest{Length: 3*hour + 10, Count: 2, Prices: []PeriodPrice{hourly("3.6", 60)}},
			chosen: "all hourly", total: "21.72",
			per:  []PeriodCount{{Period: "hour", Seconds: hour, Count: 3, PartialSeconds: 60, Cost: m("21.72")}},
			paid: 3*hour + 60,
			alts: []string{"all hourly 21.72"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChooseTerm(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Plan != tt.chosen || !got.Chosen {
				t.Errorf("plan = %q (chosen %v), want %q", got.Plan, got.Chosen, tt.chosen)
			}
			if got.Total != m(tt.total) {
				t.Errorf("total = %s, want %s", got.Total, tt.total)
			}
			if diff := cmp.Diff(tt.per, got.Periods); diff != "" {
				t.Errorf("periods (-want +got):\n%s", diff)
			}
			if got.PaidSeconds != tt.paid || got.NeededSeconds != tt.req.Length {
				t.Errorf("paid, needed = %d, %d; want %d, %d", got.PaidSeconds, got.NeededSeconds, tt.paid, tt.req.Length)
			}
			var alts []string
			nChosen := 0
			for _, a := range got.Alternatives {
				alts = append(alts, a.Plan+" "+a.Total.String())
				if a.Chosen {
					nChosen++
					if diff := cmp.Diff(got.Alternative, a); diff != "" {
						t.Errorf("chosen alternative differs from the choice (-choice +alt):\n%s", diff)
					}
				}
			}
			if diff := cmp.Diff(tt.alts, alts); diff != "" {
				t.Errorf("alternatives (-want +got):\n%s", diff)
			}
			if nChosen != 1 {
				t.Errorf("%d alternatives chosen, want 1", nChosen)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason = %q\nwant it to contain %q", got.Reason, tt.reason)
			}
		})
	}
}

func TestChooseTermInvalid(t *testing.T) {
	week := Fixed(core.Week, 450*core.MicrosPerUnit)
	tests := []struct {
		name  string
		req   TermRequest
		field string
	}{
		{"zero length", TermRequest{Length: 0, Count: 1, Prices: []PeriodPrice{week}}, "length"},
		{"negative length", TermRequest{Length: -5, Count: 1, Prices: []PeriodPrice{week}}, "length"},
		{"beyond ten years", TermRequest{Length: MaxLength + 1, Count: 1, Prices: []PeriodPrice{week}}, "length"},
		{"no machines", TermRequest{Length: day, Count: 0, Prices: []PeriodPrice{week}}, "count"},
		{"no prices", TermRequest{Length: day, Count: 1}, "prices"},
		{"too many prices", TermRequest{Length: day, Count: 1, Prices: manyPrices(MaxPrices + 1)}, "prices"},
		{"negative price", TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{Fixed(core.Day, -1)}}, "prices[day].price"},
		{"unnamed", TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{{Seconds: day}}}, "prices[0].name"},
		{"duplicate name", TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{week, week}}, "prices[1].name"},
		{"zero-length period", TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{{Name: "x", Price: 1}}}, "prices[x].seconds"},
		{"negative granularity", TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{OnDemand(core.Hour, 1, -1, 0)}}, "prices[hour].granularity"},
		{"negative minimum", TermRequest{Length: day, Count: 1, Prices: []PeriodPrice{OnDemand(core.Hour, 1, 1, -1)}}, "prices[hour].min_charge"},
		{"unit too fine for the length", TermRequest{Length: 365 * day, Count: 1, Prices: []PeriodPrice{Fixed(core.Second, 1), week}}, "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ChooseTerm(tt.req)
			var fe *core.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *core.FieldError", err)
			}
			if fe.Field != tt.field || fe.Allowed == "" {
				t.Errorf("field = %q (allowed %q), want %q", fe.Field, fe.Allowed, tt.field)
			}
		})
	}
}

func manyPrices(n int) []PeriodPrice {
	out := make([]PeriodPrice, n)
	for i := range out {
		out[i] = PeriodPrice{Name: fmt.Sprint(i), Seconds: int64(i+1) * hour, Price: 1}
	}
	return out
}

func TestChooseTermOverflow(t *testing.T) {
	big := core.Micros(1 << 62)
	_, err := ChooseTerm(TermRequest{Length: 10 * day, Count: 1, Prices: []PeriodPrice{Fixed(core.Day, big)}})
	if err == nil || !strings.Contains(err.Error(), "cost of every plan for 10d overflows") {
		t.Errorf("err = %v, want an overflow error", err)
	}
	_, err = ChooseTerm(TermRequest{Length: day, Count: 4, Prices: []PeriodPrice{Fixed(core.Day, big)}})
	if err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("err = %v, want an overflow error", err)
	}
}

func TestPricesFromOffer(t *testing.T) {
	m := func(s string) core.Micros { return money(t, s) }
	o := &core.Offer{ID: "sim/r1/g8", Currency: "USD", Plans: []core.PricePlan{
		{Mode: core.OnDemand, Price: m("0.001"), Per: core.Second, Granularity: 1, MinCharge: 60},
		{Mode: core.Spot, Price: m("1"), Per: core.Hour, Granularity: 1},
		{Mode: core.Weekly, Price: m("2"), Per: core.Hour, Granularity: 3600, Term: core.Week.Seconds()},
		{Mode: core.Monthly, Price: m("1000"), Per: core.Month, Granularity: 3600},
		{Mode: core.Monthly, Price: m("900"), Per: core.Month, Granularity: 3600, Term: 3 * core.Month.Seconds()},
		{Mode: core.Daily, Price: m("50"), Per: core.Day, Granularity: 3600, Term: core.Day.Seconds()},
		{Mode: core.Daily, Price: m("45"), Per: core.Day, Granularity: 3600}, // cheaper day: kept
	}}
	got, err := PricesFromOffer(o)
	if err != nil {
		t.Fatal(err)
	}
	want := []PeriodPrice{
		{Name: "hour", Seconds: hour, Price: m("3.6"), Granularity: 1, MinCharge: 60},
		{Name: "day", Seconds: day, Price: m("45")},
		{Name: "week", Seconds: week, Price: m("336")},
		{Name: "month", Seconds: month, Price: m("1000")},
		{Name: "3 months", Seconds: 3 * month, Price: m("2700")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prices (-want +got):\n%s", diff)
	}

	// An on-demand price per month is turned into an hourly one, half to
	// even: 1000/730 = 1.36986301...
	o2 := &core.Offer{ID: "x", Plans: []core.PricePlan{{Mode: core.OnDemand, Price: m("1000"), Per: core.Month, Granularity: 3600}}}
	got, err = PricesFromOffer(o2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]PeriodPrice{{Name: "hour", Seconds: hour, Price: m("1.369863"), Granularity: 3600}}, got); diff != "" {
		t.Errorf("monthly on-demand (-want +got):\n%s", diff)
	}

	bad := &core.Offer{ID: "bad", Plans: []core.PricePlan{{Mode: core.OnDemand, Price: -1, Per: core.Hour, Granularity: 1}}}
	_, err = PricesFromOffer(bad)
	var fe *core.FieldError
	if !errors.As(err, &fe) || fe.Field != "price" || !strings.Contains(err.Error(), "offer bad plan 0") {
		t.Errorf("err = %v, want a price FieldError naming the plan", err)
	}
}

// TestChooseTermFromOffer runs an offer's prices through the planner.
func TestChooseTermFromOffer(t *testing.T) {
	m := func(s string) core.Micros { return money(t, s) }
	o := &core.Offer{ID: "o", Plans: []core.PricePlan{
		{Mode: core.OnDemand, Price: m("4"), Per: core.Hour, Granularity: 1},
		{Mode: core.Weekly, Price: m("400"), Per: core.Week, Granularity: 3600},
	}}
	prices, err := PricesFromOffer(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ChooseTerm(TermRequest{Length: 8*day + 1800, Count: 1, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	want := []PeriodCount{
		{Period: "week", Seconds: week, Count: 1, Cost: m("400")},
		{Period: "hour", Seconds: hour, Count: 24, PartialSeconds: 1800, Cost: m("98")},
	}
	if diff := cmp.Diff(want, got.Periods); diff != "" {
		t.Errorf("periods (-want +got):\n%s", diff)
	}
}

// genPrices draws one to four distinct periods: fixed or pay-as-you-go,
// lengths in quarter hours up to maxQuarters, prices in cents.
func genPrices(t *rapid.T, maxQuarters int64) []PeriodPrice {
	n := rapid.IntRange(1, 4).Draw(t, "n")
	out := make([]PeriodPrice, n)
	for i := range out {
		q := rapid.Int64Range(1, maxQuarters).Draw(t, "quarters")
		p := PeriodPrice{
			Name:    fmt.Sprintf("p%d", i),
			Seconds: q * 900,
			Price:   core.Micros(rapid.Int64Range(0, 100_000).Draw(t, "cents") * 10_000),
		}
		if rapid.IntRange(0, 2).Draw(t, "kind") == 0 {
			p.Granularity = rapid.SampledFrom([]int64{1, 60, 900, 3600, 7200}).Draw(t, "granularity")
			p.MinCharge = rapid.SampledFrom([]int64{0, 0, 60, 3600}).Draw(t, "min")
		}
		out[i] = p
	}
	return out
}

func TestChooseTermProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prices := genPrices(t, 4*800)
		length := rapid.Int64Range(1, 2*365*day).Draw(t, "length")
		count := rapid.IntRange(1, 16).Draw(t, "count")
		r := TermRequest{Length: length, Count: count, Prices: prices}
		got, err := ChooseTerm(r)
		if err != nil {
			t.Fatal(err)
		}
		// The mix covers the length, and its parts add up.
		if got.PaidSeconds < length {
			t.Fatalf("paid %d < needed %d", got.PaidSeconds, length)
		}
		var paid int64
		var total core.Micros
		for _, pc := range got.Periods {
			paid += pc.Paid()
			total += pc.Cost
		}
		if paid != got.PaidSeconds || total != got.Total {
			t.Fatalf("parts add up to %d s, %s; choice says %d s, %s", paid, total, got.PaidSeconds, got.Total)
		}
		// Never worse than any single-period plan, and every one is listed.
		if len(got.Alternatives) < len(prices) {
			t.Fatalf("%d alternatives for %d prices", len(got.Alternatives), len(prices))
		}
		for _, a := range got.Alternatives {
			if a.Total < got.Total {
				t.Fatalf("%s costs %s < chosen %s", a.Plan, a.Total, got.Total)
			}
			if a.PaidSeconds < length {
				t.Fatalf("%s pays %d s < %d s", a.Plan, a.PaidSeconds, length)
			}
		}
		if !slices.IsSortedFunc(got.Alternatives, func(a, b Alternative) int { return cmpInt(int64(a.Total), int64(b.Total)) }) || !got.Alternatives[0].Chosen {
			t.Fatalf("alternatives not sorted with the chosen first: %+v", got.Alternatives)
		}
		// Monotone: a longer project never costs less.
		r.Length = min(length+rapid.Int64Range(1, 30*day).Draw(t, "more"), MaxLength)
		longer, err := ChooseTerm(r)
		if err != nil {
			t.Fatal(err)
		}
		if longer.Total < got.Total {
			t.Fatalf("%d s costs %s, but %d s costs %s", r.Length, longer.Total, length, got.Total)
		}
	})
}

// TestChooseTermBruteForce checks the knapsack against plain enumeration of
// every count of every fixed period, the remainder on each pay-as-you-go
// price, under the same order: cost, leases, then fewer short leases.
func TestChooseTermBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prices := genPrices(t, 4*16)
		length := rapid.Int64Range(1, 12*hour).Draw(t, "length")
		r := TermRequest{Length: length, Count: 1, Prices: prices}
		got, err := ChooseTerm(r)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteForce(length, prices)
		if got.Total != want.Total || got.Leases != want.Leases {
			t.Fatalf("got %s with %d leases %+v, brute force %s with %d leases %+v", got.Total, got.Leases, got.Periods, want.Total, want.Leases, want.Periods)
		}
		if diff := cmp.Diff(want.Periods, got.Periods, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("periods (-brute +got):\n%s", diff)
		}
	})
}

func bruteForce(length int64, prices []PeriodPrice) Alternative {
	slots := slices.Clone(prices)
	slices.SortStableFunc(slots, func(a, b PeriodPrice) int { return cmpInt(a.Seconds, b.Seconds) })
	counts := make([]int64, len(slots))
	var bestKey []int64 // cost, leases, counts...
	var best Alternative
	try := func(cost int64, leases int64, counts []int64, payg int, billed int64) {
		k := append([]int64{cost, leases}, counts...)
		if payg >= 0 {
			k[2+payg]++
		}
		if bestKey != nil && slices.Compare(k, bestKey) >= 0 {
			return
		}
		bestKey = k
		best = Alternative{Total: core.Micros(cost), Leases: leases}
		for i := len(slots) - 1; i >= 0; i-- {
			s := slots[i]
			switch {
			case i == payg:
				_, c, _ := stretch(s, billed)
				best.Periods = append(best.Periods, PeriodCount{Period: s.Name, Seconds: s.Seconds, Count: billed / s.Seconds, PartialSeconds: billed % s.Seconds, Cost: core.Micros(c)})
			case counts[i] > 0:
				best.Periods = append(best.Periods, PeriodCount{Period: s.Name, Seconds: s.Seconds, Count: counts[i], Cost: core.Micros(counts[i]) * s.Price})
			}
		}
	}
	var rec func(i int, covered, cost, leases int64)
	rec = func(i int, covered, cost, leases int64) {
		if i == len(slots) {
			rest := length - covered
			if rest <= 0 {
				try(cost, leases, counts, -1, 0)
				return
			}
			for j, s := range slots {
				if s.PayAsYouGo() {
					billed, c, _ := stretch(s, rest)
					try(cost+c, leases+1, counts, j, billed)
				}
			}
			return
		}
		s := slots[i]
		if s.PayAsYouGo() {
			rec(i+1, covered, cost, leases)
			return
		}
		for n := int64(0); n <= ceilDiv(max(0, length-covered), s.Seconds); n++ {
			counts[i] = n
			rec(i+1, covered+n*s.Seconds, cost+n*int64(s.Price), leases+n)
		}
		counts[i] = 0
	}
	rec(0, 0, 0, 0)
	return best
}

func BenchmarkChooseTerm(b *testing.B) {
	r := TermRequest{Length: 365 * day, Count: 8, Prices: []PeriodPrice{
		OnDemand(core.Hour, 3_500_000, 1, 60),
		Fixed(core.Day, 75_000_000),
		Fixed(core.Week, 450_000_000),
		Fixed(core.Month, 1_800_000_000),
	}}
	for b.Loop() {
		if _, err := ChooseTerm(r); err != nil {
			b.Fatal(err)
		}
	}
}
