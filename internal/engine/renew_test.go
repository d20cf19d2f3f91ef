package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/plan"
)

func TestTimeAbove(t *testing.T) {
	at := func(h float64, milli int64) fleet.DemandPoint {
		return fleet.DemandPoint{At: t0.Add(time.Duration(h * float64(time.Hour))), Milli: milli}
	}
	pts := []fleet.DemandPoint{at(0, 5000), at(2, 20000), at(3, 8000), at(10, 12000)}
	now := t0.Add(12 * time.Hour)
	var ix plan.DemandIndex // one index for every question, as a State keeps it
	for _, tc := range []struct {
		name  string
		from  time.Time
		level int64
		want  time.Duration
	}{
		{"above 10 GPUs: 2-3 h and 10-12 h", t0, 10000, 3 * time.Hour},
		{"above 6 GPUs: from 2 h on", t0, 6000, 10 * time.Hour},
		{"the window starts inside a point", t0.Add(150 * time.Minute), 10000, 30*time.Minute + 2*time.Hour},
		{"above every point", t0, 20000, 0},
		{"below every point, window before the first", t0.Add(-time.Hour), 0, 12 * time.Hour},
	} {
		if got := timeAbove(&ix, pts, tc.from, now, tc.level); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRenewalOnTheTermItsWorkPays: a daily machine whose core job runs
// on for nine days renews at its first boundary on a week (500 against
// ten days' 800), and at the week's end, two days of work left, on days
// again — 820 in all, where renewing by the day pays 880. The bill is
// each term's, billed whole.
func TestRenewalOnTheTermItsWorkPays(t *testing.T) {
	h := newHarness(t, []core.Offer{v100DailyWeekly(7 * 86400)}, Config{})
	h.tick = 5 * time.Minute
	const run = 10 * 24 * time.Hour
	h.submit(job("long", core.TierCore, 8, run), run)
	h.runUntil(t0.Add(12 * 24 * time.Hour))
	if len(h.st.Leases) != 1 {
		t.Fatalf("%d leases, want the one machine", len(h.st.Leases))
	}
	l := h.st.Leases[0]
	day, s := 24*time.Hour, l.FirstStart()
	wantTerms := []core.Term{{Mode: core.Daily, Start: s}, {Mode: core.Weekly, Start: s.Add(day)}}
	if len(l.Earlier) != len(wantTerms) || l.Mode != core.Daily || !l.Start.Equal(s.Add(8*day)) {
		t.Fatalf("terms %v then %s from %s, want %v then daily from %s", l.Earlier, l.Mode, l.Start, wantTerms, s.Add(8*day))
	}
	for i, w := range wantTerms {
		if l.Earlier[i].Mode != w.Mode || !l.Earlier[i].Start.Equal(w.Start) {
			t.Errorf("earlier term %d: %s from %s, want %s from %s", i, l.Earlier[i].Mode, l.Earlier[i].Start, w.Mode, w.Start)
		}
	}
	if got := len(h.eventsOf("renewed")); got != 2 {
		t.Errorf("%d renewal events, want 2", got)
	}
	if total, _ := h.bill(h.now); total != 820_000_000 {
		t.Errorf("bill %s, want 820 (80 + 500 + three days; by the day 880)", total)
	}
}

// TestNoRenewalWithinTheTerm: a week billed by the day after its term
// has daily boundaries inside the term too; none of them is a renewal.
// A job of six and a half days rents the week (500 against seven days'
// 560) and keeps it to its end: 500, not the week and the days after a
// switch.
func TestNoRenewalWithinTheTerm(t *testing.T) {
	h := newHarness(t, []core.Offer{v100DailyWeekly(86400)}, Config{})
	h.tick = 5 * time.Minute
	const run = 156 * time.Hour
	h.submit(job("long", core.TierCore, 8, run), run)
	h.runUntil(t0.Add(9 * 24 * time.Hour))
	if len(h.st.Leases) != 1 || h.st.Leases[0].Mode != core.Weekly || len(h.st.Leases[0].Earlier) != 0 {
		t.Fatalf("leases %v, want one weekly lease never renewed", h.st.Leases)
	}
	if n := len(h.eventsOf("renewed")); n != 0 {
		t.Errorf("%d renewal events within the term, want none", n)
	}
	if total, _ := h.bill(h.now); total != 500_000_000 {
		t.Errorf("bill %s, want the week's 500", total)
	}
}

// v100DailyWeekly is the IDC V100 machine by the day (80) and the week
// (500), its week billed past the term by weekGran seconds.
func v100DailyWeekly(weekGran int64) core.Offer {
	return core.Offer{ID: "idc/v100x8", Provider: "idc", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "USD",
		Plans: []core.PricePlan{
			{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: 86400, Term: 86400},
			{Mode: core.Weekly, Price: 500_000_000, Per: core.Week, Granularity: weekGran, Term: 7 * 86400},
		}}
}
