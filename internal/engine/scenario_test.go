package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// The seed's live-streaming platform: 3 GPUs by day, 15 in the evening
// peak, 1 at night. Renting by the hour as demand comes and releasing on
// the boundary against a fleet sized for the peak all day (the source
// reports −60% daily cost).
func TestLiveStreamingDay(t *testing.T) {
	h := newHarness(t, []core.Offer{hourlyOffer("gpu1", "T4", 1, "1")}, Config{})
	h.onTick = func(h *harness) {
		switch h.now.Sub(t0) {
		case 0:
			h.submit(job("base", core.TierCore, 1, 24*time.Hour), 24*time.Hour)
		case 8 * time.Hour:
			for _, id := range []string{"day1", "day2"} {
				h.submit(job(id, core.TierCore, 1, 10*time.Hour), 10*time.Hour)
			}
		case 18 * time.Hour:
			for i := 0; i < 12; i++ {
				h.submit(job("eve"+string(rune('a'+i)), core.TierCore, 1, 5*time.Hour), 5*time.Hour)
			}
		}
	}
	end := t0.Add(26 * time.Hour)
	h.runUntil(end)
	for _, u := range h.st.Units {
		if u.State != core.JobSucceeded {
			t.Fatalf("unit %s ended %s", u.Key(), u.State)
		}
	}
	cost, paid := h.bill(end)
	// Work: 24 + 2×10 + 12×5 = 104 GPU-hours at 1/h. The peak fleet pays
	// 15 GPUs × 24 h = 360.
	peak := mustMoney("360")
	saving := 10000 - int64(cost)*10000/int64(peak)
	t.Logf("cost %s for 104 GPU-hours of work (paid %d milli-GPU-hours), peak-sized fleet %s: saving %d.%02d%%", cost, paid, peak, saving/100, saving%100)
	if cost < mustMoney("104") || cost > mustMoney("125") {
		t.Errorf("cost %s, want between the work's 104 and 125 (boundary rounding and provisioning only)", cost)
	}
	if saving < 6000 {
		t.Errorf("saving %d bp against the peak-sized fleet, want at least the seed's 60%%", saving)
	}
	for _, l := range h.st.Leases {
		if !l.State.Final() {
			t.Errorf("lease %s still %s after all work ended", l.ID, l.State)
		}
	}
}

// An hourly-billed machine whose job ends at minute 10 is kept (paid
// time stays available) and released just before minute 60, not before
// and not after.
func TestReleaseJustBeforeBoundary(t *testing.T) {
	h := newHarness(t, []core.Offer{hourlyOffer("gpu1", "A100", 1, "4")}, Config{})
	h.delay = 0
	h.submit(job("short", core.TierCore, 1, 8*time.Minute), 8*time.Minute)
	h.runUntil(t0.Add(3 * time.Hour))
	if len(h.st.Leases) != 1 {
		t.Fatalf("%d leases, want 1", len(h.st.Leases))
	}
	l := h.st.Leases[0]
	if got := l.End.Sub(l.Start); got != 58*time.Minute {
		t.Errorf("released %s after launch, want 58m (2 minutes before the hourly boundary)", got)
	}
	if cost, _ := h.bill(h.now); cost != mustMoney("4") {
		t.Errorf("cost %s, want one hour: 4", cost)
	}
	rel := h.eventsOf("release")
	if len(rel) != 1 || !strings.Contains(rel[0].Reason, "hour boundary") {
		t.Errorf("release events %+v", rel)
	}
}

// A GPU at 10% utilization raises the idle alert at minute 30, not before.
func TestIdleAlertAtThirtyMinutes(t *testing.T) {
	h := newHarness(t, []core.Offer{hourlyOffer("gpu1", "A100", 1, "4")}, Config{})
	h.delay = 0
	h.submit(job("notebook", core.TierRegular, 1, 4*time.Hour), 4*time.Hour)
	var firstLow time.Time
	h.onTick = func(h *harness) {
		h.st.Readings = nil
		for _, u := range h.st.Units {
			if u.State == core.JobRunning {
				if firstLow.IsZero() {
					firstLow = h.now
				}
				h.st.Readings = append(h.st.Readings, fleet.GPUReading{LeaseID: u.Parts[0].LeaseID, GPU: 0, Unit: u.Key(), Team: "t", UtilPct: 10, At: h.now})
			}
		}
	}
	h.runUntil(t0.Add(2 * time.Hour))
	alerts := h.eventsOf("idle-alert")
	if len(alerts) != 1 {
		t.Fatalf("%d idle alerts, want 1: %+v", len(alerts), alerts)
	}
	if got := alerts[0].At.Sub(firstLow); got != 30*time.Minute {
		t.Errorf("alert %s after utilization went low, want 30m", got)
	}
	if n := len(h.eventsOf("idle-notify")); n != 1 {
		t.Errorf("%d notifications, want 1 (at 45 minutes)", n)
	}
}

// A spot reclaim with a 2-minute notice loses at most the work since the
// last checkpoint, and the job still completes elsewhere.
func TestSpotReclaimLosesAtMostSinceCheckpoint(t *testing.T) {
	spot := hourlyOffer("spot1", "A100", 1, "1")
	spot.Plans[0].Mode = core.Spot
	spot.Plans[0].Reclaim = &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}
	od := hourlyOffer("od1", "A100", 1, "3")
	h := newHarness(t, []core.Offer{spot, od}, Config{})
	h.delay = time.Minute
	j := job("train", core.TierRegular, 1, 2*time.Hour)
	j.Interruptible, j.CheckpointInterval = true, 10*time.Minute
	h.submit(j, 2*time.Hour)
	var noticed bool
	var reclaimAt time.Time
	h.onTick = func(h *harness) {
		for _, l := range h.st.Leases {
			if l.Mode == core.Spot && l.State == core.LeaseReady && !noticed && h.now.Sub(l.ReadyAt) >= 47*time.Minute {
				noticed, reclaimAt = true, h.now.Add(2*time.Minute)
				OnReclaimNotice(h.st, l.ID, h.now, reclaimAt, h.cfg)
			}
			if l.ID == h.st.Leases[0].ID && noticed && !h.now.Before(reclaimAt) && !l.State.Final() {
				OnReclaimed(h.st, l.ID, h.now)
			}
		}
	}
	h.runUntil(t0.Add(6 * time.Hour))
	u := h.st.Units[0]
	if u.State != core.JobSucceeded {
		t.Fatalf("job %s", u.State)
	}
	if u.Reclaims != 1 {
		t.Errorf("%d reclaims, want 1", u.Reclaims)
	}
	if lost := time.Duration(u.LostMilliSeconds/1000) * time.Second; lost > j.CheckpointInterval || lost <= 0 {
		t.Errorf("lost %s of work, want (0, %s]", lost, j.CheckpointInterval)
	}
	if u.Done < 2*time.Hour {
		t.Errorf("done %s of 2h", u.Done)
	}
}

// The seed's mix: 4 machines on monthly terms as the base, 8 on-demand
// for one burst week, released after it.
func TestReservedBasePlusBurst(t *testing.T) {
	o := hourlyOffer("v100", "V100", 1, "1")
	o.Plans = append(o.Plans, core.PricePlan{Mode: core.Monthly, Price: mustMoney("400"), Per: core.Month, Granularity: core.Month.Seconds(), Term: core.Month.Seconds()})
	h := newHarness(t, []core.Offer{o}, Config{Fleet: fleet.Config{Reserved: map[string]int{"V100": 4}}})
	h.tick = 5 * time.Minute
	h.onTick = func(h *harness) {
		switch h.now.Sub(t0) {
		case 10 * time.Minute:
			for i := 0; i < 4; i++ {
				h.submit(job("base"+string(rune('a'+i)), core.TierRegular, 1, 20*24*time.Hour), 20*24*time.Hour)
			}
		case 3 * 24 * time.Hour:
			for i := 0; i < 8; i++ {
				h.submit(job("burst"+string(rune('a'+i)), core.TierRegular, 1, 7*24*time.Hour), 7*24*time.Hour)
			}
		}
	}
	h.runUntil(t0.Add(12 * 24 * time.Hour))
	var monthly, burst int
	for _, l := range h.st.Leases {
		switch l.Mode {
		case core.Monthly:
			monthly++
			if l.State.Final() {
				t.Errorf("monthly lease %s released inside its term", l.ID)
			}
		default:
			burst++
			if !l.State.Final() {
				t.Errorf("burst lease %s still held after the burst", l.ID)
			} else if over := l.End.Sub(t0.Add(10*24*time.Hour + 10*time.Minute)); over > time.Hour {
				t.Errorf("burst lease %s released %s after the burst ended", l.ID, over)
			}
		}
	}
	if monthly != 4 || burst != 8 {
		t.Errorf("%d monthly + %d on-demand leases, want 4 + 8", monthly, burst)
	}
}

// Consolidation: two long interruptible jobs left alone on two 4-GPU
// machines after their neighbours finish: one moves, the emptied machine
// is released at its boundary instead of running for hours at 25%.
func TestConsolidationEmptiesSparseMachine(t *testing.T) {
	h := newHarness(t, []core.Offer{hourlyOffer("a100x4", "A100", 4, "8")}, Config{})
	h.delay = 0
	for i, d := range []time.Duration{6 * time.Hour, 20 * time.Minute, 20 * time.Minute, 20 * time.Minute, 6 * time.Hour, 20 * time.Minute, 20 * time.Minute, 20 * time.Minute} {
		j := job("j"+string(rune('a'+i)), core.TierOffline, 1, d)
		j.Interruptible = true
		h.submit(j, d)
	}
	h.runUntil(t0.Add(8 * time.Hour))
	if n := len(h.eventsOf("move")); n != 1 {
		t.Fatalf("%d moves, want 1: %+v", n, h.eventsOf("move"))
	}
	cost, _ := h.bill(h.now)
	// Without the move: 2 machines × 7 billed hours × 8 = 112.
	if cost >= mustMoney("112") {
		t.Errorf("cost %s, want less than 112 without consolidation", cost)
	}
	for _, u := range h.st.Units {
		if u.State != core.JobSucceeded || u.LostMilliSeconds != 0 {
			t.Errorf("%s %s lost %d", u.Key(), u.State, u.LostMilliSeconds)
		}
	}
}

// Work started on on-demand machines while the monthly base was full
// moves onto the base once it has stood spare for a whole day, and the
// on-demand machines go at their next boundary; not before the day's
// peak has passed, when the spare base could still be needed.
func TestLongWorkMovesOntoSpareCommittedTime(t *testing.T) {
	o := hourlyOffer("v100", "V100", 1, "3")
	o.Plans = append(o.Plans, core.PricePlan{Mode: core.Monthly, Price: mustMoney("400"), Per: core.Month, Granularity: core.Month.Seconds(), Term: core.Month.Seconds()})
	h := newHarness(t, []core.Offer{o}, Config{Fleet: fleet.Config{Reserved: map[string]int{"V100": 2}}})
	h.tick = 5 * time.Minute
	long := 4 * 24 * time.Hour
	h.onTick = func(h *harness) {
		switch h.now.Sub(t0) {
		case 10 * time.Minute: // fills the base
			for _, id := range []string{"base-a", "base-b"} {
				h.submit(job(id, core.TierRegular, 1, 30*time.Hour), 30*time.Hour)
			}
		case 20 * time.Minute: // waits, and is rented for on demand
			for _, id := range []string{"long-a", "long-b"} {
				j := job(id, core.TierRegular, 1, long)
				j.Interruptible = true
				h.submit(j, long)
			}
		}
	}
	h.runUntil(t0.Add(5 * 24 * time.Hour))
	moves := h.eventsOf("move")
	if len(moves) != 2 {
		t.Fatalf("%d moves, want the 2 long units onto the spare base: %+v", len(moves), moves)
	}
	// The base empties at 30 h 10 min; the day's peak (4 GPUs) stands
	// above it until a day later.
	spareFrom := t0.Add(30*time.Hour + 10*time.Minute)
	for _, m := range moves {
		if m.At.Before(spareFrom.Add(24 * time.Hour)) {
			t.Errorf("%s moved at %s, within a day of the peak", m.Subject, m.At.Sub(t0))
		}
	}
	for _, l := range h.st.Leases {
		switch {
		case l.Mode == core.Monthly && l.State.Final():
			t.Errorf("monthly lease %s released inside its term", l.ID)
		case l.Mode == core.OnDemand && (!l.State.Final() || l.End.After(spareFrom.Add(26*time.Hour))):
			t.Errorf("on-demand lease %s %s, ended %s: want released within the hour after the move", l.ID, l.State, l.End.Sub(t0))
		}
	}
	for _, u := range h.st.Units {
		if u.State != core.JobSucceeded {
			t.Errorf("%s %s", u.Key(), u.State)
		}
	}
}

// A long job that arrives as a short one leaves its on-demand machine
// empty does not take that machine for days at the hourly price: it
// waits a few minutes for a committed term, and the on-demand machine
// goes (sched.State.RentCost, fleet.RentCost) — also when its run is long
// enough for a weekly term to be cheaper still than daily ones.
func TestLongWorkWaitsForATermNotAFreeOnDemandMachine(t *testing.T) {
	weekly := core.PricePlan{Mode: core.Weekly, Price: mustMoney("500"), Per: core.Week, Granularity: core.Week.Seconds(), Term: core.Week.Seconds()}
	for _, tc := range []struct {
		name  string
		long  time.Duration
		week  bool
		under string // the bill's limit: the terms', far below on demand
	}{
		// Four days of the daily term (320) and the short job's minutes
		// on demand, against 72 hours on demand (1,728).
		{"three days, daily terms", 3 * 24 * time.Hour, false, "400"},
		// Three weeks less an hour (so that the run ends inside the third
		// week): 1,500 in weekly terms, 1,680 in daily ones, against
		// 12,072 on demand.
		{"three weeks, a weekly term cheaper still", 21*24*time.Hour - time.Hour, true, "1800"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := v100x8Daily()
			if tc.week {
				o.Plans = append(o.Plans, weekly)
			}
			h := newHarness(t, []core.Offer{o}, Config{})
			var longAt time.Time
			h.onTick = func(h *harness) {
				switch {
				case h.now.Equal(t0.Add(time.Minute)):
					h.submit(job("short", core.TierCore, 8, 20*time.Minute), 20*time.Minute)
				case longAt.IsZero() && len(h.eventsOf("place")) == 1 && h.st.Units[0].State == core.JobSucceeded:
					longAt = h.now // the short job's machine has just emptied
					h.submit(job("long", core.TierCore, 8, tc.long), tc.long)
				}
			}
			h.runUntil(t0.Add(tc.long + 6*time.Hour))
			if longAt.IsZero() {
				t.Fatal("the short job never finished")
			}
			modeOf := map[string]core.BillingMode{}
			for _, l := range h.st.Leases {
				modeOf[l.ID] = l.Mode
				if l.Mode == core.OnDemand && (!l.State.Final() || l.End.After(longAt.Add(10*time.Minute))) {
					t.Errorf("on-demand lease %s %s, ended %s after the long job came: want it gone within minutes", l.ID, l.State, l.End.Sub(longAt))
				}
			}
			for _, e := range h.eventsOf("place") {
				if e.Subject != "long" {
					continue
				}
				for id, m := range modeOf {
					if strings.Contains(e.Reason, "on "+id+":") && m == core.OnDemand {
						t.Errorf("long placed on %s (%s): %s", id, m, e.Reason)
					}
				}
				if e.At.Sub(longAt) > 5*time.Minute {
					t.Errorf("long placed %s after it came, want within a few minutes", e.At.Sub(longAt))
				}
			}
			for _, u := range h.st.Units {
				if u.State != core.JobSucceeded {
					t.Errorf("%s %s", u.Key(), u.State)
				}
			}
			if total, _ := h.bill(h.now); total > mustMoney(tc.under) {
				t.Errorf("bill %s, want the terms' (under %s)", total, tc.under)
			}
		})
	}
}

// A committed machine whose place the last day needed too seldom to pay
// for its renewal is drained onto the other committed machines' free GPUs
// before its boundary and goes, though the day's peak stood above the
// committed machines: renting on demand for the rare climb costs less.
// Needed for longer than the break-even share (here a daily term at 0.42
// per GPU-hour against 3.00 on demand: 13.9% of the day, 3 h 20 min), it
// is renewed.
func TestRenewalPaysOrTheMachineGoes(t *testing.T) {
	o := v100x8Daily()
	for _, tc := range []struct {
		name    string
		busyFor time.Duration // how long the 16 GPUs stay needed
		drained bool
	}{
		{"needed 2 h of the day: goes", 2 * time.Hour, true},
		{"needed 5 h of the day: renewed", 5 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []core.Offer{o}, Config{})
			h.tick = 5 * time.Minute
			h.onTick = func(h *harness) {
				switch h.now.Sub(t0) {
				case 5 * time.Minute:
					// 16 one-GPU units on two daily machines; every other one
					// ends early, leaving each machine half used.
					for i := range 16 {
						j := job(fmt.Sprintf("u%02d", i), core.TierRegular, 1, 40*time.Hour)
						j.Interruptible = true
						actual := 40 * time.Hour
						if i%2 == 1 {
							actual = tc.busyFor
						}
						h.submit(j, actual)
					}
				case 30 * time.Minute: // a brief climb above them
					for i := range 4 {
						h.submit(job(fmt.Sprintf("burst%d", i), core.TierRegular, 1, 10*time.Minute), 10*time.Minute)
					}
				}
			}
			h.runUntil(t0.Add(30 * time.Hour))
			var daily, open int
			for _, l := range h.st.Leases {
				if l.Mode == core.Daily {
					daily++
					if !l.State.Final() {
						open++
					}
				}
			}
			if daily != 2 {
				t.Fatalf("%d daily leases, want the 2 the long units were rented", daily)
			}
			want := 2
			if tc.drained {
				want = 1
			}
			if open != want {
				t.Errorf("%d daily leases open after 30 h, want %d (moves %d)", open, want, len(h.eventsOf("move")))
			}
			for _, u := range h.st.Units {
				if u.State == core.JobFailed {
					t.Errorf("%s failed", u.Key())
				}
			}
		})
	}
}

// v100x8Daily is an 8-V100 offer at 24 an hour on demand (3.00 per
// GPU-hour, per second) or 80 a day (0.42 per GPU-hour in full).
func v100x8Daily() core.Offer {
	return core.Offer{ID: "v100x8", Provider: "test", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "USD", Plans: []core.PricePlan{
		{Mode: core.OnDemand, Price: mustMoney("24"), Per: core.Hour, Granularity: 1},
		{Mode: core.Daily, Price: mustMoney("80"), Per: core.Day, Granularity: core.Day.Seconds(), Term: core.Day.Seconds()},
	}}
}
