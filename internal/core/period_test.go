package core

import (
	"strings"
	"testing"
	"time"
)

func TestParseSpan(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"hour", 3600}, {"60", 60}, {"90s", 90}, {"1h30m", 5400}, {"3 months", 3 * 730 * 3600},
		{"2w", 14 * 86400}, {"1 day", 86400}, {"month", 2_628_000},
	}
	for _, tc := range tests {
		got, err := ParseSpan(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSpan(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "0", "-5", "1.5s", "soon", "3 fortnights", "100ms"} {
		if _, err := ParseSpan(bad); err == nil {
			t.Errorf("ParseSpan(%q) accepted", bad)
		}
	}
}

func TestPlanValidateNamesField(t *testing.T) {
	good := PricePlan{Mode: OnDemand, Price: 1, Per: Hour, Granularity: 1}
	tests := []struct {
		name   string
		mutate func(p *PricePlan)
		field  string
	}{
		{"negative price", func(p *PricePlan) { p.Price = -1 }, "price"},
		{"bad mode", func(p *PricePlan) { p.Mode = "yearly" }, "mode"},
		{"bad per", func(p *PricePlan) { p.Per = "fortnight" }, "per"},
		{"zero granularity", func(p *PricePlan) { p.Granularity = 0 }, "granularity"},
		{"series out of order", func(p *PricePlan) {
			t := time.Unix(100, 0)
			p.Series = []PricePoint{{At: t, Price: 1}, {At: t, Price: 2}}
		}, "series[1].at"},
		{"reclaim rate", func(p *PricePlan) { p.Reclaim = &ReclaimModel{MonthlyRateBP: 20000} }, "reclaim.monthly_rate"},
		{"no zone", func(p *PricePlan) { p.TimeOfUse = &TimeOfUse{} }, "time_of_use.timezone"},
		{"hour 25", func(p *PricePlan) {
			p.TimeOfUse = &TimeOfUse{Location: time.UTC, Windows: []Window{{Weekdays: []time.Weekday{1}, StartHour: 25, MultiplierBP: 1}}}
		}, "time_of_use.windows[0].start"},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good plan: %v", err)
	}
	for _, tc := range tests {
		p := good
		tc.mutate(&p)
		err := p.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.field)
		}
	}
}

func TestJobValidate(t *testing.T) {
	ok := Job{ID: "j", Tier: TierRegular, Request: Request{GPUs: 1, MilliPerGPU: 500}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.Request.GPUs = 2
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "gpu_milli") {
		t.Errorf("a shared 2-GPU job: %v", err)
	}
	bad = ok
	bad.Tier = "urgent"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `"urgent"`) {
		t.Errorf("bad tier: %v", err)
	}
}

func TestTimeOfUseRangeAndFloor(t *testing.T) {
	utc := time.UTC
	offPeak := &TimeOfUse{Location: utc, Windows: []Window{{Weekdays: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday}, StartHour: 22, EndHour: 6, MultiplierBP: 5000}}}
	allDayPremium := &TimeOfUse{Location: utc, Windows: []Window{{Weekdays: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday}, StartHour: 0, EndHour: 24, MultiplierBP: 12000}}}
	for _, tc := range []struct {
		name          string
		t             *TimeOfUse
		lo, hi, floor int64
	}{
		{"nil", nil, 10000, 10000, 10000},
		{"no windows", &TimeOfUse{Location: utc}, 10000, 10000, 10000},
		{"night at half price", offPeak, 5000, 10000, 5000},
		// Every hour at 1.2x: the week never goes below it, but the floor
		// a bound may use stays at 1x.
		{"every hour at a premium", allDayPremium, 12000, 12000, 10000},
	} {
		lo, hi := tc.t.WeekRangeBP()
		if lo != tc.lo || hi != tc.hi || tc.t.FloorBP() != tc.floor {
			t.Errorf("%s: range %d..%d floor %d, want %d..%d floor %d", tc.name, lo, hi, tc.t.FloorBP(), tc.lo, tc.hi, tc.floor)
		}
	}
}
