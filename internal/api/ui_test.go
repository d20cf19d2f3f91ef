package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// uiNow is a Monday 10:00, the second day of March.
var uiNow = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func uiCatalog() *pricing.Catalog {
	off := func(id string, price core.Micros, gran int64) core.Offer {
		return core.Offer{ID: id, Provider: "t", Region: "r", InstanceType: id, GPUModel: "A100", GPUs: 2, GPUMemMiB: 40960, VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
			Plans: []core.PricePlan{{Mode: core.OnDemand, Price: price, Per: core.Hour, Granularity: gran}}}
	}
	// s2: 3.6 an hour per second (0.001 a second); h2: 2 an hour per
	// started hour.
	return &pricing.Catalog{Currency: "USD", Offers: []core.Offer{off("t/r/s2", 3_600_000, 1), off("t/r/h2", 2_000_000, 3600)}}
}

// uiStore holds, as of uiNow:
//
//   - L1 (s2, ready) launched yesterday 22:00, idle since 09:30, never
//     used: 10 h today (36), 12 h this month (43.2), all idle;
//   - L2 (h2, released) from Feb 28 23:30 to Mar 1 00:10, billed to 00:30:
//     its started hour was incurred in February, nothing this month;
//   - L3 (h2, ready) launched today 09:20, running j1 (team a) at 500
//     milli on GPU 0 since 09:21: its started hour (2) is incurred at
//     launch, 20 min to its boundary; a holds 39 min × 0.5 GPU of its 2
//     GPU-hours, 0.325 of the 2;
//   - j2 (team b, core, 2 GPUs) and j3 (team a, offline, 1 GPU) queued;
//   - samples: L1 GPU 0 at 10% for 40 min (idle), L1 GPU 1 at 50%, L3 GPU 0
//     last heard 10 min ago (stale);
//   - team a's budget 100; the loop's own record of its spend (25) is not
//     what the dashboard shows; open alerts of teams a and b.
func uiStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/ui.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fillUIStore(t, st)
	return st
}

// fillUIStore writes uiStore's rows to st.
func fillUIStore(t testing.TB, st store.Store) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Teams().CreateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1, MonthlyBudget: 100_000_000}))
	must(st.Teams().CreateTeam(ctx, core.Team{ID: "b", Name: "b", Weight: 1}))
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		must(err)
		return v
	}
	lease := func(id, offer string, state core.LeaseState, start, end, idle string) {
		l := store.Lease{Lease: core.Lease{ID: id, OfferID: offer, Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: id}, Requested: at(start)}
		must(st.Leases().CreateLease(ctx, l))
		l.State, l.ProviderID, l.Start, l.ReadyAt = state, "p-"+id, at(start), at(start)
		if end != "" {
			l.End = at(end)
		}
		if idle != "" {
			l.IdleSince = at(idle)
		}
		must(st.Leases().UpdateLease(ctx, l))
	}
	lease("L1", "t/r/s2", core.LeaseReady, "2026-03-01T22:00:00Z", "", "2026-03-02T09:30:00Z")
	lease("L2", "t/r/h2", core.LeaseReleased, "2026-02-28T23:30:00Z", "2026-03-01T00:10:00Z", "2026-03-01T00:00:00Z")
	lease("L3", "t/r/h2", core.LeaseReady, "2026-03-02T09:20:00Z", "", "")
	job := func(id, team string, tier core.Tier, gpus int, milli core.Milli) {
		_, _, err := st.Jobs().SubmitJob(ctx, core.Job{ID: id, Team: team, Tier: tier, Request: core.Request{GPUs: gpus, MilliPerGPU: milli}, Submit: at("2026-03-02T09:00:00Z")}, "")
		must(err)
	}
	job("j1", "a", core.TierRegular, 1, 500)
	job("j2", "b", core.TierCore, 2, 1000)
	job("j3", "a", core.TierOffline, 1, 1000)
	must(st.Units().SaveUnits(ctx, store.Unit{JobID: "j1", State: core.JobRunning, Parts: []store.Part{{LeaseID: "L3", GPUs: []int{0}}}, Start: at("2026-03-02T09:21:00Z")}))
	var samples []core.Sample
	for m := 40; m >= 0; m -= 10 {
		ts := uiNow.Add(-time.Duration(m) * time.Minute)
		samples = append(samples, core.Sample{LeaseID: "L1", GPU: 0, At: ts, UtilPct: 10}, core.Sample{LeaseID: "L1", GPU: 1, At: ts, UtilPct: 50})
	}
	samples = append(samples, core.Sample{LeaseID: "L3", GPU: 0, At: uiNow.Add(-10 * time.Minute), UtilPct: 90})
	must(st.Samples().InsertSamples(ctx, samples...))
	_, err := st.Loop().SaveLoop(ctx, store.LoopState{Spent: map[string]core.Micros{"a": 25_000_000}})
	must(err)
	for _, team := range []string{"a", "b"} {
		_, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "budget", Team: team, Reason: "test", Raised: uiNow.Add(-time.Hour)})
		must(err)
	}
	// The loop's first idle rung on L1's GPU 0, raised 10 minutes ago
	// (low for idle.for, 30 minutes, by then), and one on GPU 1 that it
	// resolved: GPU 1 works again.
	_, _, err = st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "idle-alert", LeaseID: "L1", GPU: 0, Reason: "GPU 0 of L1 under 20% utilization for 30m", Raised: uiNow.Add(-10 * time.Minute)})
	must(err)
	gone, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "idle-alert", LeaseID: "L1", GPU: 1, Reason: "GPU 1 of L1 under 20% utilization for 30m", Raised: uiNow.Add(-20 * time.Minute)})
	must(err)
	must(st.Alerts().ResolveAlert(ctx, gone.ID, uiNow.Add(-5*time.Minute)))
}

func TestBuildOverviewFigures(t *testing.T) {
	st := uiStore(t)
	ov, err := BuildOverview(context.Background(), st, uiCatalog(), uiNow, "", policy.Default().Idle)
	if err != nil {
		t.Fatal(err)
	}
	u := ov.Utilization
	for _, c := range []struct{ name, got, want string }{
		{"spend_today", string(ov.SpendToday), "38"},
		{"spend_month", string(ov.SpendMonth), "45.2"},
		{"idle_spend_today", string(ov.IdleSpendToday), "37.675"},
		{"idle_spend_month", string(ov.IdleSpendMonth), "44.875"},
		{"allocated_pct", string(u.AllocatedPct), "12.5"},
		// L3's GPU 0 is allocated but its reading is stale; L1's GPUs
		// report but hold nothing: no measured utilization of allocated
		// GPUs to show.
		{"allocated_util_pct", string(u.AllocatedUtilPct), ""},
		{"busy_milli", string(u.BusyMilli), "0"},
		// Today: L1 20 GPU-hours, L3 its paid hour of 2 GPUs.
		{"paid_gpu_hours_today", string(u.PaidGPUHoursToday), "22"},
		{"allocated_gpu_hours_today", string(u.AllocatedGPUHoursToday), "0.325"},
		{"idle_gpu_hours_today", string(u.IdleGPUHoursToday), "21.675"},
		{"allocated_pct_today", string(u.AllocatedPctToday), "1.48"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if u.PaidGPUs != 4 || u.ReadyGPUs != 4 || u.AllocatedMilli != 500 || u.ReportingGPUs != 2 || u.SampledAllocatedGPUs != 0 || u.SampleWindowS != 300 {
		t.Errorf("utilization: %+v", u)
	}
	if len(ov.Fleet) != 1 || ov.Fleet[0] != (FleetModeView{Mode: "on-demand", Leases: 2, GPUs: 4, Ready: 2}) {
		t.Errorf("fleet: %+v", ov.Fleet)
	}
	if d := cmp.Diff([]QueueView{{Tier: "core", Team: "b", Units: 1, GPUMilli: 2000}, {Tier: "offline", Team: "a", Units: 1, GPUMilli: 1000}}, ov.Queue); d != "" {
		t.Errorf("queue (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"core": 1, "regular": 0, "offline": 1}, ov.QueueByTier); d != "" {
		t.Errorf("queue by tier (-want +got):\n%s", d)
	}
	if len(ov.IdleGPUs) != 1 || ov.IdleGPUs[0].Lease != "L1" || ov.IdleGPUs[0].GPU != 0 || ov.IdleGPUs[0].MaxUtilPct != 10 || !ov.IdleGPUs[0].LowSince.Equal(uiNow.Add(-40*time.Minute)) {
		t.Errorf("idle GPUs: %+v", ov.IdleGPUs)
	}
	wantJobs := map[string]int{"pending": 3, "admitted": 0, "running": 0, "checkpointing": 0, "preempted": 0, "succeeded": 0, "failed": 0, "cancelled": 0}
	if d := cmp.Diff(wantJobs, ov.Jobs); len(ov.Alerts) != 3 || d != "" {
		t.Errorf("alerts %d, jobs (-want +got):\n%s", len(ov.Alerts), d)
	}
	// Team a: 0.325 of 100 spent over 34 hours of March (744 hours).
	var a *BudgetView
	for i := range ov.Budgets {
		if ov.Budgets[i].Team == "a" {
			a = &ov.Budgets[i]
		}
	}
	if a == nil || a.Budget != "100" || a.Spent != "0.325" || a.Remaining != "99.675" || a.BurnPerHour != "0.009559" || a.Projected != "7.111765" ||
		a.SpentPct != "0.32" || a.Alert || a.Exhausted || a.ExhaustsAt != nil {
		t.Errorf("budget a: %+v", a)
	}

	// A reading of L3's GPU 0 now, at 80%: the allocated half GPU is
	// measured, busy 400 milli-GPUs.
	if err := st.Samples().InsertSamples(context.Background(), core.Sample{LeaseID: "L3", GPU: 0, At: uiNow.Add(-time.Minute), UtilPct: 80}); err != nil {
		t.Fatal(err)
	}
	if ov, err = BuildOverview(context.Background(), st, uiCatalog(), uiNow, "", policy.Default().Idle); err != nil {
		t.Fatal(err)
	}
	if u := ov.Utilization; u.AllocatedUtilPct != "80" || u.BusyMilli != "400" || u.SampledAllocatedGPUs != 1 || u.SampledAllocatedMilli != 500 || u.ReportingGPUs != 3 {
		t.Errorf("utilization with L3 reporting: %+v", u)
	}

	// A team's view: its queue, budget, alerts and jobs; the fleet's spend.
	ta, err := BuildOverview(context.Background(), st, uiCatalog(), uiNow, "a", policy.Default().Idle)
	if err != nil {
		t.Fatal(err)
	}
	if ta.SpendMonth != ov.SpendMonth || len(ta.Queue) != 1 || ta.Queue[0].Team != "a" || len(ta.Budgets) != 1 || ta.Budgets[0].Team != "a" ||
		len(ta.Alerts) != 1 || ta.Alerts[0].Team != "a" || len(ta.IdleGPUs) != 0 || ta.Jobs["pending"] != 2 || ta.QueueByTier["core"] != 0 {
		t.Errorf("team a's overview: %+v", ta)
	}
}

// uiServer serves st as of uiNow and returns it with a member token of
// team a.
func uiServer(t *testing.T, st store.Store) (*httptest.Server, string) {
	t.Helper()
	ctx := context.Background()
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Users().CreateUser(ctx, store.User{ID: "m", Team: "a", Role: store.RoleMember, Created: uiNow}))
	must(st.Tokens().CreateToken(ctx, store.Token{ID: "tm", Hash: hash, User: "m", Team: "a", Role: store.RoleMember, Name: "m", Created: uiNow}))
	ts := httptest.NewServer(New(uiCatalog(), clock.NewManual(uiNow), slog.New(slog.NewTextHandler(io.Discard, nil)), WithStore(st), WithRateLimit(RateLimit{})))
	t.Cleanup(ts.Close)
	return ts, secret
}

func uiGet(t *testing.T, ts *httptest.Server, secret, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestOverviewRoutes checks that the routes answer what the builders
// compute, scoped to the member's team, and the boundary and heatmap.
func TestOverviewRoutes(t *testing.T) {
	st := uiStore(t)
	ts, secret := uiServer(t, st)
	var ov Overview
	if code := uiGet(t, ts, secret, "/api/v1/overview", &ov); code != 200 {
		t.Fatal(code)
	}
	want, err := BuildOverview(context.Background(), st, uiCatalog(), uiNow, "a", policy.Default().Idle)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(ov)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || ov.Team != "a" {
		t.Errorf("GET /api/v1/overview\n%s\nwant BuildOverview's\n%s", gotJSON, wantJSON)
	}

	var bl BoundaryLeases
	if code := uiGet(t, ts, secret, "/api/v1/overview/leases", &bl); code != 200 || len(bl.Leases) != 2 {
		t.Fatalf("leases: %d %+v", code, bl)
	}
	for _, l := range bl.Leases {
		switch l.Lease.ID {
		case "L3":
			if !l.NextBoundary.Equal(time.Date(2026, 3, 2, 10, 20, 0, 0, time.UTC)) || l.SecondsLeft != 1200 || !l.Busy || l.GPUs != 2 || l.Committed {
				t.Errorf("L3: %+v", l)
			}
		case "L1": // per-second billing: the boundary is now
			if !l.NextBoundary.Equal(uiNow) || l.SecondsLeft != 0 || l.Busy {
				t.Errorf("L1: %+v", l)
			}
		default:
			t.Errorf("not a live lease: %s", l.Lease.ID)
		}
	}

	var hm Heatmap
	if code := uiGet(t, ts, secret, "/api/v1/overview/heatmap?hours=1", &hm); code != 200 || hm.BucketSeconds != 75 || hm.Buckets != HeatmapBuckets || len(hm.GPUs) != 3 {
		t.Fatalf("heatmap: %d %+v", code, hm)
	}
	row := hm.GPUs[0] // L1 GPU 0: readings at -40, -30, -20, -10, 0 min
	filled := 0
	for i, c := range row.Cells {
		if c != nil {
			filled++
			if *c != 10 {
				t.Errorf("L1/0 bucket %d: %d", i, *c)
			}
		}
	}
	if row.Lease != "L1" || row.GPU != 0 || filled != 5 || row.Cells[16] == nil || row.Cells[47] == nil {
		t.Errorf("L1/0 row: %+v (%d filled)", row, filled)
	}
	for _, bad := range []string{"0", "169", "x"} {
		if code := uiGet(t, ts, secret, "/api/v1/overview/heatmap?hours="+bad, nil); code != 400 {
			t.Errorf("hours=%s: %d", bad, code)
		}
	}
}

// TestDashboardMounted checks the page and its assets: types, CSP, cache
// validation, and a 404 for what is not an asset.
func TestDashboardMounted(t *testing.T) {
	ts := httptest.NewServer(New(uiCatalog(), clock.NewManual(uiNow), slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer ts.Close()
	for _, c := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<script src="/ui/app.js" defer></script>`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/api/v1/overview"},
		{"/ui/style.css", "text/css; charset=utf-8", "font-family"},
	} {
		resp, err := http.Get(ts.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("Content-Type") != c.ctype || !strings.Contains(string(b), c.contains) ||
			!strings.HasPrefix(h.Get("Content-Security-Policy"), "default-src 'self'") || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("Cache-Control") != "no-cache" || h.Get("ETag") == "" {
			t.Errorf("GET %s: %d %v", c.path, resp.StatusCode, h)
			continue
		}
		req, _ := http.NewRequest("GET", ts.URL+c.path, nil)
		req.Header.Set("If-None-Match", h.Get("ETag"))
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", c.path, resp.StatusCode)
		}
	}
	for _, p := range []string{"/ui/nope.js", "/ui/", "/index.html", "/ui/../go.mod"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	// The page makes no request to another origin: no http(s) URL in it.
	for _, p := range []string{"/", "/ui/app.js", "/ui/style.css"} {
		resp, _ := http.Get(ts.URL + p)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range []string{"http://", "https://", "@import", "url("} {
			if strings.Contains(string(b), s) && !(s == "http://" && strings.Contains(string(b), `"http://www.w3.org/2000/svg"`) && strings.Count(string(b), s) == 1) {
				t.Errorf("%s refers to %q", p, s)
			}
		}
	}
}

// TestOverviewEqualsUsageReport: the dashboard's spend, idle spend,
// budgets' spent and today's GPU-hours equal GET /api/v1/reports/usage
// over the same ranges, to the micro-unit, on uiStore's leases and units
// plus two finished runs (one across midnight).
func TestOverviewEqualsUsageReport(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/ui.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testOverviewEqualsUsageReport(t, st)
}

// TestOverviewEqualsUsageReportPostgres is TestOverviewEqualsUsageReport
// on PostgreSQL, where the runs come from the PL/pgSQL trigger.
func TestOverviewEqualsUsageReportPostgres(t *testing.T) {
	testOverviewEqualsUsageReport(t, pgStore(t))
}

func testOverviewEqualsUsageReport(t *testing.T, st store.Store) {
	ctx := context.Background()
	t.Cleanup(func() { st.Close() })
	fillUIStore(t, st)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Team a on L1's GPU 1 from 23:00 yesterday to 00:30 today; team b on
	// both of L1's GPUs from 01:00 to 03:17:29.
	for _, r := range []struct {
		job, team  string
		gpus       []int
		start, end time.Time
	}{
		{"r1", "a", []int{1}, uiNow.Add(-11 * time.Hour), uiNow.Add(-9*time.Hour - 30*time.Minute)},
		{"r2", "b", []int{0, 1}, uiNow.Add(-9 * time.Hour), uiNow.Add(-6*time.Hour - 42*time.Minute - 31*time.Second)},
	} {
		_, _, err := st.Jobs().SubmitJob(ctx, core.Job{ID: r.job, Team: r.team, Tier: core.TierRegular, Request: core.Request{GPUs: len(r.gpus), MilliPerGPU: core.WholeGPU}, Submit: r.start}, "")
		must(err)
		must(st.Units().SaveUnits(ctx, store.Unit{JobID: r.job, State: core.JobRunning, Parts: []store.Part{{LeaseID: "L1", GPUs: r.gpus}}, Start: r.start}))
		must(st.Units().SaveUnits(ctx, store.Unit{JobID: r.job, State: core.JobSucceeded, Start: r.start, End: r.end}))
	}
	admin, err := EnsureAdminToken(ctx, st, clock.NewManual(uiNow))
	must(err)
	ts, _ := uiServer(t, st)

	var ov Overview
	if code := uiGet(t, ts, admin, "/api/v1/overview", &ov); code != 200 {
		t.Fatalf("overview: %d", code)
	}
	report := func(from time.Time) UsageReportView {
		var v UsageReportView
		if code := uiGet(t, ts, admin, "/api/v1/reports/usage?from="+from.Format(time.RFC3339)+"&to="+uiNow.Format(time.RFC3339), &v); code != 200 || v.Idle == nil {
			t.Fatalf("report from %s: %d %+v", from, code, v)
		}
		return v
	}
	month, today := report(ov.MonthStart), report(ov.DayStart)
	teamCost := func(v UsageReportView, team string) string {
		for _, l := range v.Teams {
			if l.Team == team {
				return string(l.Cost)
			}
		}
		return "0"
	}
	sumHours := func(ls []UsageLineView) string {
		var ms core.Micros
		for _, l := range ls {
			m, err := core.ParseMicros(string(l.AllocatedGPUHours))
			must(err)
			ms += m
		}
		return string(Amount(ms))
	}
	got := map[string]string{"spend_month": string(ov.SpendMonth), "idle_spend_month": string(ov.IdleSpendMonth),
		"spend_today": string(ov.SpendToday), "idle_spend_today": string(ov.IdleSpendToday),
		"paid_gpu_hours_today": string(ov.Utilization.PaidGPUHoursToday), "allocated_gpu_hours_today": string(ov.Utilization.AllocatedGPUHoursToday),
		"idle_gpu_hours_today": string(ov.Utilization.IdleGPUHoursToday)}
	want := map[string]string{"spend_month": string(month.Bill), "idle_spend_month": string(month.Idle.Cost),
		"spend_today": string(today.Bill), "idle_spend_today": string(today.Idle.Cost),
		"paid_gpu_hours_today": string(today.PaidGPUHours), "allocated_gpu_hours_today": sumHours(today.Teams),
		"idle_gpu_hours_today": string(today.Idle.AllocatedGPUHours)}
	for _, b := range ov.Budgets {
		got["spent."+b.Team], want["spent."+b.Team] = string(b.Spent), teamCost(month, b.Team)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("overview against the usage report (-report +overview):\n%s", d)
	}
	// Not trivially equal: both teams spent, and not in round figures.
	if got["spent.a"] == "0" || got["spent.b"] == "0" || got["spend_today"] == got["spend_month"] {
		t.Errorf("figures: %v", got)
	}
	t.Logf("overview = report: %v", got)
}

// TestOverviewIdleGPUsAreTheLoopsAlerts: the overview's idle GPUs are
// the loop's open idle-alerts (L1's GPU 0; GPU 1's alert was resolved),
// dated by the server's policy's idle.for, not by a rule of the page's.
func TestOverviewIdleGPUsAreTheLoopsAlerts(t *testing.T) {
	st := uiStore(t)
	for _, tc := range []struct {
		name     string
		idleFor  time.Duration
		lowSince time.Time
	}{
		{"defaults: idle for 30m", 0, uiNow.Add(-40 * time.Minute)},
		{"idle for 20m", 20 * time.Minute, uiNow.Add(-30 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			if tc.idleFor > 0 {
				p.Idle.For = policy.Duration(tc.idleFor)
			}
			ts := httptest.NewServer(New(uiCatalog(), clock.NewManual(uiNow), slog.New(slog.NewTextHandler(io.Discard, nil)),
				WithStore(st), WithRateLimit(RateLimit{}), WithPolicy(p)))
			defer ts.Close()
			var ov Overview
			if code := uiGet(t, ts, uiAdmin(t, st), "/api/v1/overview", &ov); code != 200 {
				t.Fatal(code)
			}
			if len(ov.IdleGPUs) != 1 {
				t.Fatalf("idle GPUs: %+v, want L1's GPU 0 alone", ov.IdleGPUs)
			}
			g := ov.IdleGPUs[0]
			if g.Lease != "L1" || g.GPU != 0 || g.Alert == 0 || !g.LowSince.Equal(tc.lowSince) || g.MaxUtilPct != 10 || !strings.Contains(g.Reason, "under 20%") {
				t.Errorf("idle GPU %+v: want L1/0 low since %s at most 10%%, with its alert's id and reason", g, tc.lowSince)
			}
		})
	}
}

// uiAdmin adds an admin token to st and returns its secret.
func uiAdmin(t *testing.T, st store.Store) string {
	t.Helper()
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("admin%d", time.Now().UnixNano())
	if err := st.Users().CreateUser(context.Background(), store.User{ID: id, Role: store.RoleAdmin, Created: uiNow}); err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().CreateToken(context.Background(), store.Token{ID: "t" + id, Hash: hash, User: id, Role: store.RoleAdmin, Name: id, Created: uiNow}); err != nil {
		t.Fatal(err)
	}
	return secret
}
