package billing

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestCost(t *testing.T) {
	shanghai := loc("Asia/Shanghai")
	// 21:00 local in Shanghai on Monday 2026-03-02 is 13:00 UTC.
	sh21 := time.Date(2026, 3, 2, 21, 0, 0, 0, shanghai)
	offPeak := core.Window{Weekdays: allDays, StartHour: 22, EndHour: 6, MultiplierBP: 6000}
	tests := []struct {
		name       string
		plan       *planB
		span       Span
		want       string
		wantBilled int64
	}{
		// AWS on-demand: per second with a 60 s minimum.
		{"per-second minimum applies", plan(core.OnDemand, "21.958").minCharge(60), Span{t0, at(30 * time.Second), false}, "0.365967", 60},
		{"per-second past the minimum", plan(core.OnDemand, "21.958").minCharge(60), Span{t0, at(90 * time.Second), false}, "0.54895", 90},
		{"per-second one hour", plan(core.OnDemand, "21.958").minCharge(60), Span{t0, at(time.Hour), false}, "21.958", 3600},
		{"sub-second end rounds up", plan(core.OnDemand, "3.6"), Span{t0, at(1500 * time.Millisecond), false}, "0.002", 2},
		{"zero-length lease pays one increment", plan(core.OnDemand, "3.6").gran(hour), Span{t0, t0, false}, "3.6", 3600},
		{"hourly granularity rounds a started hour up", plan(core.OnDemand, "2").gran(hour), Span{t0, at(61 * time.Minute), false}, "4", 7200},
		{"exactly on the boundary charges no extra hour", plan(core.OnDemand, "2").gran(hour), Span{t0, at(2 * time.Hour), false}, "4", 7200},
		{"minute granularity", plan(core.OnDemand, "6").gran(60), Span{t0, at(10*time.Minute + time.Second), false}, "1.1", 660},
		{"price quoted per day billed per hour", plan(core.OnDemand, "48").per(core.Day).gran(hour), Span{t0, at(90 * time.Minute), false}, "4", 7200},
		// Committed terms are charged in full.
		{"daily term used 5 h", plan(core.Daily, "80").per(core.Day).term(day), Span{t0, at(5 * time.Hour), false}, "80", day},
		{"daily term used 30 h renews a day", plan(core.Daily, "80").per(core.Day).term(day), Span{t0, at(30 * time.Hour), false}, "160", 2 * day},
		// The seed: a 2-week V100 fine-tune at 450 per week costs 900; the
		// monthly 1800 is due in full even if the work ends in two weeks.
		{"seed: weekly 450 for 14 days", plan(core.Weekly, "450").per(core.Week).term(week), Span{t0, at(14 * 24 * time.Hour), false}, "900", 2 * week},
		{"seed: monthly 1800 for 14 days", plan(core.Monthly, "1800").per(core.Month).term(month), Span{t0, at(14 * 24 * time.Hour), false}, "1800", month},
		{"monthly for 5 weeks renews a month", plan(core.Monthly, "1800").per(core.Month).term(month), Span{t0, at(35 * 24 * time.Hour), false}, "3600", 2 * month},
		// Early termination settles used hours pro rata plus a fee.
		{"early termination after 10 days", plan(core.Monthly, "1800").per(core.Month).term(month).early(hour, "50"), Span{t0, at(240 * time.Hour), false}, "641.780822", 240 * hour},
		{"early termination never above the term", plan(core.Monthly, "1800").per(core.Month).term(month).early(hour, "500"), Span{t0, at(600 * time.Hour), false}, "1800", month},
		// Spot.
		{"spot price series", plan(core.Spot, "1").series(at(30*time.Minute), "2"), Span{t0, at(time.Hour), false}, "1.5", 3600},
		{"spot series before its first point uses the base price", plan(core.Spot, "1").series(at(2*time.Hour), "2", at(3*time.Hour), "4"), Span{t0, at(4 * time.Hour), false}, "8", 4 * 3600},
		{"reclaimed spot charged to the reclaim", plan(core.Spot, "3.6").minCharge(60).gran(hour).reclaim(2500), Span{t0, at(30 * time.Second), true}, "0.03", 30},
		{"released spot rounds up", plan(core.Spot, "3.6").minCharge(60).gran(hour).reclaim(2500), Span{t0, at(30 * time.Second), false}, "3.6", 3600},
		// Time of use: the seed's off-peak 22:00-06:00 at 40% off.
		{"time of use across the window start", plan(core.OnDemand, "10").tou(shanghai, offPeak), Span{sh21, sh21.Add(2 * time.Hour), false}, "16", 7200},
		{"time of use over a whole day", plan(core.OnDemand, "10").tou(shanghai, offPeak), Span{sh21, sh21.Add(24 * time.Hour), false}, "208", day},
		{"time of use half an hour in", plan(core.OnDemand, "10").tou(shanghai, offPeak), Span{sh21.Add(30 * time.Minute), sh21.Add(90 * time.Minute), false}, "8", 3600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Cost(tc.plan.build(t), tc.span)
			if err != nil {
				t.Fatal(err)
			}
			if b.Amount != money(tc.want) || b.Billed != tc.wantBilled {
				t.Errorf("Cost = %s for %d s billed, want %s for %d s", b.Amount, b.Billed, tc.want, tc.wantBilled)
			}
			if b.Amount != b.Usage+b.Fee {
				t.Errorf("amount %s != usage %s + fee %s", b.Amount, b.Usage, b.Fee)
			}
			if want := tc.span.Start.Truncate(time.Second).Add(time.Duration(b.Billed) * time.Second); !b.PaidUntil.Equal(want) {
				t.Errorf("PaidUntil = %v, want %v", b.PaidUntil, want)
			}
		})
	}
}

func TestTimeOfUseWeekdaysAndWrap(t *testing.T) {
	sh := loc("Asia/Shanghai")
	// Weekday nights only: the Friday window runs into Saturday morning;
	// Saturday night is full price.
	p := plan(core.OnDemand, "1").tou(sh, core.Window{Weekdays: weekdays, StartHour: 22, EndHour: 6, MultiplierBP: 5000}).build(t)
	fri23 := time.Date(2026, 3, 6, 23, 0, 0, 0, sh)
	cases := []struct {
		from time.Time
		want string
	}{
		{fri23, "0.5"},                     // Fri 23:00, Friday's window
		{fri23.Add(3 * time.Hour), "0.5"},  // Sat 02:00, still Friday's window
		{fri23.Add(7 * time.Hour), "1"},    // Sat 06:00, ended
		{fri23.Add(23 * time.Hour), "1"},   // Sat 22:00, no Saturday window
		{fri23.Add(48 * time.Hour), "1"},   // Sun 23:00
		{fri23.Add(50 * time.Hour), "1"},   // Mon 01:00: Sunday started no window
		{fri23.Add(71 * time.Hour), "0.5"}, // Mon 22:00
	}
	for _, c := range cases {
		b, err := Cost(p, Span{Start: c.from, End: c.from.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if b.Amount != money(c.want) {
			t.Errorf("hour from %s: %s, want %s", c.from.Format("Mon 15:04"), b.Amount, c.want)
		}
	}
}

func TestTimeOfUseAcrossDST(t *testing.T) {
	ny := loc("America/New_York")
	// 2026-03-08: clocks go from 02:00 to 03:00; the local day has 23 h.
	// A window 00:00-12:00 at 0x makes the bill count only local
	// afternoon hours: 12 of the 23 real hours.
	p := plan(core.OnDemand, "1").tou(ny, core.Window{Weekdays: allDays, StartHour: 0, EndHour: 12, MultiplierBP: 0}).build(t)
	start := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	end := time.Date(2026, 3, 9, 0, 0, 0, 0, ny)
	b, err := Cost(p, Span{Start: start, End: end})
	if err != nil {
		t.Fatal(err)
	}
	if b.Billed != 23*hour || b.Amount != money("12") {
		t.Errorf("DST day: %d s billed, %s; want 82800 s, 12", b.Billed, b.Amount)
	}
}

func TestCostEndBeforeStart(t *testing.T) {
	_, err := Cost(plan(core.OnDemand, "1").build(t), Span{Start: t0, End: t0.Add(-time.Second)})
	if !errors.Is(err, ErrEndBeforeStart) {
		t.Fatalf("err = %v, want ErrEndBeforeStart", err)
	}
}

func TestPaidUntil(t *testing.T) {
	hourly := plan(core.OnDemand, "2").gran(hour).build(t)
	got, err := PaidUntil(hourly, t0, at(20*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := at(time.Hour); !got.Equal(want) {
		t.Errorf("PaidUntil = %v, want %v", got, want)
	}
	monthly := plan(core.Monthly, "1800").per(core.Month).term(month).build(t)
	got, _ = PaidUntil(monthly, t0, at(24*time.Hour))
	if want := t0.Add(core.Month.Duration()); !got.Equal(want) {
		t.Errorf("monthly PaidUntil = %v, want %v", got, want)
	}
}

func TestSplitAndCostIn(t *testing.T) {
	sh := loc("Asia/Shanghai")
	p := plan(core.OnDemand, "0.333333").gran(hour).tou(sh, core.Window{Weekdays: allDays, StartHour: 22, EndHour: 6, MultiplierBP: 3333}).build(t)
	s := Span{Start: t0.Add(17 * time.Minute), End: t0.Add(77*time.Hour + 5*time.Minute)}
	var cuts []time.Time
	for d := 1; d <= 4; d++ {
		cuts = append(cuts, time.Date(2026, 3, 2+d, 0, 0, 0, 0, time.UTC))
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
		t.Fatalf("parts %v sum to %s, bill is %s", parts, sum, b.Amount)
	}
	in, err := CostIn(p, s, cuts[0], cuts[1])
	if err != nil || in != parts[1] {
		t.Errorf("CostIn(day 2) = %s, %v; want %s", in, err, parts[1])
	}
	if _, _, err := Split(p, s, []time.Time{cuts[1], cuts[0]}); err == nil {
		t.Error("Split accepted decreasing cuts")
	}
	if _, err := CostIn(p, s, cuts[1], cuts[0]); !errors.Is(err, ErrEndBeforeStart) {
		t.Errorf("CostIn reversed: %v", err)
	}
	// The fee of an early termination lands in the part holding the end.
	et := plan(core.Monthly, "730").per(core.Month).term(month).early(hour, "5").build(t)
	parts, b, _ = Split(et, Span{Start: t0, End: at(30 * time.Hour)}, []time.Time{at(24 * time.Hour)})
	if diff := cmp.Diff([]core.Micros{money("24"), money("11")}, parts); diff != "" || b.Fee != money("5") {
		t.Errorf("early-termination split (-want +got):\n%s fee %s", diff, b.Fee)
	}
}
