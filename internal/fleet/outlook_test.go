package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

func TestOutlookAbove(t *testing.T) {
	h := time.Hour
	// 8 GPUs for 6 hours, 16 for 2, then 4 until now (4 hours).
	pts := []DemandPoint{{At: now.Add(-12 * h), Milli: 8000}, {At: now.Add(-6 * h), Milli: 16000}, {At: now.Add(-4 * h), Milli: 4000}}
	o := NewOutlook(now, pts, nil)
	for _, tc := range []struct {
		level       int64
		window      time.Duration
		above, span time.Duration
	}{
		{4000, 24 * h, 12 * h, 12 * h}, // the history is 12 hours
		{4001, 24 * h, 8 * h, 12 * h},
		{8000, 24 * h, 8 * h, 12 * h},
		{12000, 24 * h, 2 * h, 12 * h},
		{16001, 24 * h, 0, 12 * h},
		{8000, 5 * h, 1 * h, 5 * h}, // the last 5 hours: 1 at 16, 4 at 4
		{0, 5 * h, 5 * h, 5 * h},
	} {
		above, span := o.Above(tc.level, tc.window)
		if above != tc.above || span != tc.span {
			t.Errorf("Above(%d, %s) = %s of %s, want %s of %s", tc.level, tc.window, above, span, tc.above, tc.span)
		}
	}
	if above, span := (*Outlook)(nil).Above(0, h); above != 0 || span != 0 {
		t.Errorf("a nil outlook forecasts %s of %s", above, span)
	}
	if NewOutlook(now, nil, nil) != nil {
		t.Error("an outlook without history")
	}
}

// A short job rents on-demand when the daily term would serve only it,
// and the daily term when demand has stood above the committed capacity:
// the machine will be backfilled. Committed capacity already there, or a
// negative horizon, takes that away.
func TestAcquirePricesTermsOnRecentDemand(t *testing.T) {
	day := int64(86400)
	os := []core.Offer{
		{ID: "od", GPUModel: "T4", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 8_000_000, Per: core.Hour, Granularity: 1}}},
		{ID: "idc", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: day, Term: day}}},
	}
	d := demandFor("burst", core.TierCore, 30*time.Minute, false)
	d.Unit.Job.Request.GPUs = 8
	busy := NewOutlook(now, []DemandPoint{{At: now.Add(-24 * time.Hour), Milli: 20000}}, nil)
	pick := func(out *Outlook, machines []Machine, cfg Config) Acquisition {
		t.Helper()
		acq := Acquire(now, []Demand{d}, machines, os, nil, 0, out, nil, cfg)
		if len(acq) != 1 {
			t.Fatalf("acquired %+v, want one machine", acq)
		}
		return acq[0]
	}
	if a := pick(nil, nil, Config{}); a.Offer.ID != "od" {
		t.Errorf("no history: rented %s %s, want on-demand", a.Offer.ID, a.Mode)
	}
	if a := pick(busy, nil, Config{}); a.Offer.ID != "idc" || !strings.Contains(a.Reason, "expected to give it") {
		t.Errorf("demand of 20 GPUs for a day: rented %s %s (%s), want the daily term", a.Offer.ID, a.Mode, a.Reason)
	}
	if a := pick(busy, nil, Config{OutlookHorizon: -1}); a.Offer.ID != "od" {
		t.Errorf("outlook off: rented %s %s, want on-demand", a.Offer.ID, a.Mode)
	}
	// 24 committed GPUs already cover the 20 GPUs of demand.
	o := os[1]
	var have []Machine
	for i := range 3 {
		have = append(have, Machine{Lease: &core.Lease{ID: string(rune('a' + i)), Mode: core.Daily, State: core.LeaseReady}, Offer: &o, Plan: &o.Plans[0], ReadyAt: now, AllocMilli: 8000})
	}
	if a := pick(busy, have, Config{}); a.Offer.ID != "od" {
		t.Errorf("demand already under the committed capacity: rented %s %s, want on-demand", a.Offer.ID, a.Mode)
	}
}

// TestPropertyAboveWindow: Above agrees with summing, over every point of
// the history, the time inside the window it stood at or above the level
// (the curve starts from the point in force at the window's start), for
// every question asked of one Outlook.
func TestPropertyAboveWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		var pts []DemandPoint
		at := t0
		for i, n := 0, rapid.IntRange(1, 40).Draw(t, "points"); i < n; i++ {
			at = at.Add(time.Duration(rapid.Int64Range(0, 12*3600).Draw(t, "gap")) * time.Second)
			pts = append(pts, DemandPoint{At: at, Milli: rapid.Int64Range(0, 8).Draw(t, "milli") * 1000})
		}
		now := at.Add(time.Duration(rapid.Int64Range(0, 12*3600).Draw(t, "tail")) * time.Second)
		o := NewOutlook(now, pts, nil)
		// Windows from a few, asked often.
		windows := []time.Duration{time.Duration(rapid.Int64Range(1, 10*86400).Draw(t, "w0")) * time.Second,
			time.Duration(rapid.Int64Range(1, 10*86400).Draw(t, "w1")) * time.Second}
		for range 24 {
			window := windows[rapid.IntRange(0, 1).Draw(t, "window")]
			level := rapid.Int64Range(0, 9).Draw(t, "level") * 1000
			var want, wantSpan time.Duration
			from := now.Add(-window)
			for i, p := range pts {
				end := now
				if i+1 < len(pts) {
					end = pts[i+1].At
				}
				start := p.At
				if start.Before(from) {
					start = from
				}
				if end.After(start) {
					wantSpan += end.Sub(start)
					if p.Milli >= level {
						want += end.Sub(start)
					}
				}
			}
			got, span := o.Above(level, window)
			if got != want || span != wantSpan {
				t.Fatalf("Above(%d, %s) = %s of %s, want %s of %s", level, window, got, span, want, wantSpan)
			}
		}
	})
}
