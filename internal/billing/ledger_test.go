package billing

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

func offer(provider, model string, gpus int) *core.Offer {
	return &core.Offer{ID: provider + "/r/" + model, Provider: provider, GPUModel: model, GPUs: gpus, Currency: "USD"}
}

func TestMeterDailyLinesSumToBill(t *testing.T) {
	l := &Ledger{Currency: "USD"}
	o := offer("idc", "V100", 8)
	p := plan(core.Monthly, "1800").per(core.Month).term(month).early(hour, "50").build(t)
	lease := &core.Lease{ID: "L1", OfferID: o.ID, Mode: core.Monthly}
	var cuts []time.Time
	for d := 1; d <= 40; d++ {
		cuts = append(cuts, time.Date(2026, 3, 2+d, 0, 0, 0, 0, time.UTC))
	}
	b, err := l.Meter(o, lease, p, Span{Start: t0, End: at(240 * time.Hour)}, cuts)
	if err != nil {
		t.Fatal(err)
	}
	if l.Total() != b.Amount || l.TotalOf(Fee) != money("50") {
		t.Fatalf("ledger total %s (fees %s), bill %s", l.Total(), l.TotalOf(Fee), b.Amount)
	}
	if n := len(l.Charges); n != 12 { // 11 days touched (10:00 Mon .. 10:00 +10 d) + fee
		t.Errorf("%d lines, want 12", n)
	}
	for _, c := range l.Charges {
		if c.To.Before(c.From) || c.LeaseID != "L1" || c.Provider != "idc" {
			t.Errorf("bad line %+v", c)
		}
	}
	if _, err := (&Ledger{Currency: "EUR"}).Meter(o, lease, p, Span{Start: t0, End: at(time.Hour)}, nil); err == nil {
		t.Error("a USD offer metered into a EUR ledger")
	}
}

func TestApplyVouchers(t *testing.T) {
	day1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	charges := []Charge{
		{LeaseID: "b", Provider: "idc", GPUModel: "V100", Mode: core.Weekly, Kind: Usage, From: day1.Add(24 * time.Hour), Amount: money("20")},
		{LeaseID: "a", Provider: "idc", GPUModel: "V100", Mode: core.Weekly, Kind: Usage, From: day1, Amount: money("20")},
		{LeaseID: "c", Provider: "aws", GPUModel: "A100", Mode: core.OnDemand, Kind: Usage, From: day1, Amount: money("100")},
		{LeaseID: "d", Provider: "idc", GPUModel: "V100", Mode: core.Weekly, Kind: Usage, From: day1.AddDate(0, 2, 0), Amount: money("100")},
	}
	vs := []core.Voucher{{ID: "v30", ShareBP: 3000, Cap: money("10"), ValidFrom: day1, ValidTo: day1.AddDate(0, 1, 0), Providers: []string{"idc"}}}
	l := &Ledger{Currency: "USD", Charges: append([]Charge(nil), charges...)}
	used := l.ApplyVouchers(vs)
	if used["v30"] != money("10") {
		t.Fatalf("voucher used %s, want its cap 10", used["v30"])
	}
	var credits []Charge
	for _, c := range l.Charges {
		if c.Kind == Credit {
			credits = append(credits, c)
		}
	}
	// The earliest eligible line (lease a) takes 30% = 6, the next the 4 left.
	want := []struct {
		lease  string
		amount core.Micros
	}{{"a", money("-6")}, {"b", money("-4")}}
	if len(credits) != len(want) {
		t.Fatalf("credits %+v", credits)
	}
	for i, w := range want {
		if credits[i].LeaseID != w.lease || credits[i].Amount != w.amount || credits[i].VoucherID != "v30" {
			t.Errorf("credit %d = %s %s, want %s %s", i, credits[i].LeaseID, credits[i].Amount, w.lease, w.amount)
		}
	}
	if got, wantTotal := l.Total(), money("230"); got != wantTotal {
		t.Errorf("total after vouchers %s, want %s", got, wantTotal)
	}
	// Stacked vouchers cover at most what is left of a line.
	l2 := &Ledger{Currency: "USD", Charges: []Charge{charges[2]}}
	big := []core.Voucher{
		{ID: "v80", ShareBP: 8000, Cap: money("1000"), ValidFrom: day1, ValidTo: day1.AddDate(1, 0, 0)},
		{ID: "v50", ShareBP: 5000, Cap: money("1000"), ValidFrom: day1, ValidTo: day1.AddDate(1, 0, 0)},
	}
	used = l2.ApplyVouchers(big)
	if diff := cmp.Diff(map[string]core.Micros{"v80": money("80"), "v50": money("20")}, used); diff != "" {
		t.Errorf("stacked (-want +got):\n%s", diff)
	}
	if l2.Total() != 0 {
		t.Errorf("stacked vouchers left %s, want 0 (never below zero)", l2.Total())
	}
}

func TestAllocate(t *testing.T) {
	p := plan(core.OnDemand, "8").gran(hour).build(t) // an 8-GPU machine at 8/h
	s := Span{Start: t0, End: at(time.Hour)}
	a, err := Allocate(p, 8, s, []Use{
		{Team: "vision", Milli: 4000, From: t0, To: at(time.Hour)},
		{Team: "nlp", Milli: 2000, From: t0, To: at(30 * time.Minute)},
		{Team: "nlp", Milli: 500, From: at(30 * time.Minute), To: at(2 * time.Hour)}, // clipped at the billed end
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Allocation{
		Bill: money("8"),
		Lines: []Line{
			{Team: "nlp", MilliSeconds: 2000*1800 + 500*1800, Amount: money("1.25")},
			{Team: "vision", MilliSeconds: 4000 * 3600, Amount: money("4")},
		},
		Idle: Line{Team: IdleTeam, MilliSeconds: 8000*3600 - 4000*3600 - 2500*1800, Amount: money("2.75")},
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Allocate (-want +got):\n%s", diff)
	}
}

func TestAllocatePeakHoursPayPeak(t *testing.T) {
	sh := loc("Asia/Shanghai")
	start := time.Date(2026, 3, 2, 20, 0, 0, 0, sh)
	p := plan(core.OnDemand, "1").gran(hour).tou(sh, core.Window{Weekdays: allDays, StartHour: 22, EndHour: 6, MultiplierBP: 5000}).build(t)
	// 1 GPU, 4 hours: 20-22 at 1, 22-24 at 0.5 → bill 3. "day" uses the
	// peak hours, "night" the off-peak hours: same GPU-time, not the same
	// cost.
	a, err := Allocate(p, 1, Span{Start: start, End: start.Add(4 * time.Hour)}, []Use{
		{Team: "day", Milli: 1000, From: start, To: start.Add(2 * time.Hour)},
		{Team: "night", Milli: 1000, From: start.Add(2 * time.Hour), To: start.Add(4 * time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Lines[0].Amount != money("2") || a.Lines[1].Amount != money("1") || a.Idle.Amount != 0 {
		t.Errorf("allocation %+v, want day 2, night 1, idle 0", a)
	}
}

func TestAllocateRejectsOverAllocation(t *testing.T) {
	p := plan(core.OnDemand, "1").build(t)
	_, err := Allocate(p, 1, Span{Start: t0, End: at(time.Hour)}, []Use{
		{Team: "a", Milli: 600, From: t0, To: at(time.Hour)},
		{Team: "b", Milli: 600, From: at(10 * time.Minute), To: at(20 * time.Minute)},
	})
	if err == nil {
		t.Fatal("1200 milli-GPUs on one GPU accepted")
	}
	// Back to back is fine.
	if _, err := Allocate(p, 1, Span{Start: t0, End: at(time.Hour)}, []Use{
		{Team: "a", Milli: 1000, From: t0, To: at(10 * time.Minute)},
		{Team: "b", Milli: 1000, From: at(10 * time.Minute), To: at(20 * time.Minute)},
	}); err != nil {
		t.Fatalf("back-to-back uses rejected: %v", err)
	}
}

func TestMerge(t *testing.T) {
	m := Merge([]Allocation{
		{Bill: 10, Lines: []Line{{Team: "a", Amount: 3}, {Team: "b", Amount: 2}}, Idle: Line{Team: IdleTeam, Amount: 5}},
		{Bill: 7, Lines: []Line{{Team: "b", Amount: 7}}, Idle: Line{Team: IdleTeam}},
	})
	want := Allocation{Bill: 17, Lines: []Line{{Team: "a", Amount: 3}, {Team: "b", Amount: 9}}, Idle: Line{Team: IdleTeam, Amount: 5}}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
}

func TestBudget(t *testing.T) {
	start, end := MonthBounds(time.Date(2026, 4, 11, 0, 0, 0, 0, time.UTC), time.UTC)
	if !start.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) || !end.Equal(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("MonthBounds = %v..%v", start, end)
	}
	team := core.Team{ID: "nlp", MonthlyBudget: money("1000")}
	now := start.Add(10 * 24 * time.Hour) // a third of April
	cases := []struct {
		spent            string
		alert, exhausted bool
		projected, burn  string
		exhaustsIn       time.Duration
	}{
		{"100", false, false, "300", "0.416667", 0},
		{"800", true, false, "2400", "3.333333", 60 * time.Hour}, // 200 left at 80/day
		{"1000", true, true, "3000", "4.166667", 0},
	}
	for _, c := range cases {
		st := Budget(team, money(c.spent), start, end, now)
		if st.Alert != c.alert || st.Exhausted != c.exhausted || st.Projected != money(c.projected) || st.BurnPerHour != money(c.burn) {
			t.Errorf("spent %s: %+v", c.spent, st)
		}
		switch {
		case c.exhausted && !st.ExhaustsAt.Equal(now):
			t.Errorf("spent %s: exhausts at %v, want now", c.spent, st.ExhaustsAt)
		case c.exhaustsIn > 0 && !st.ExhaustsAt.Equal(now.Add(c.exhaustsIn)):
			t.Errorf("spent %s: exhausts at %v, want %v", c.spent, st.ExhaustsAt, now.Add(c.exhaustsIn))
		case !c.exhausted && c.exhaustsIn == 0 && !st.ExhaustsAt.IsZero():
			t.Errorf("spent %s: exhausts at %v, want not this month", c.spent, st.ExhaustsAt)
		}
	}
	if st := Budget(core.Team{ID: "free"}, money("5000"), start, end, now); st.Alert || st.Exhausted {
		t.Errorf("no budget but alert: %+v", st)
	}
}
