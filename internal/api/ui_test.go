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
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/readmodel/readmodeltest"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// uiServer serves st as of readmodeltest.Now and returns it with a member token of
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
	must(st.Users().CreateUser(ctx, store.User{ID: "m", Team: "a", Role: store.RoleMember, Created: readmodeltest.Now}))
	must(st.Tokens().CreateToken(ctx, store.Token{ID: "tm", Hash: hash, User: "m", Team: "a", Role: store.RoleMember, Name: "m", Created: readmodeltest.Now}))
	ts := httptest.NewServer(New(readmodeltest.Catalog(), clock.NewManual(readmodeltest.Now), slog.New(slog.NewTextHandler(io.Discard, nil)), WithStore(st), WithRateLimit(httpapi.RateLimit{})))
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
	st := readmodeltest.Store(t)
	ts, secret := uiServer(t, st)
	var ov readmodel.Overview
	if code := uiGet(t, ts, secret, "/api/v1/overview", &ov); code != 200 {
		t.Fatal(code)
	}
	want, err := readmodel.BuildOverview(context.Background(), st, readmodeltest.Catalog(), readmodeltest.Now, "a", policy.Default().Idle)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(ov)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || ov.Team != "a" {
		t.Errorf("GET /api/v1/overview\n%s\nwant readmodel.BuildOverview's\n%s", gotJSON, wantJSON)
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
			if !l.NextBoundary.Equal(readmodeltest.Now) || l.SecondsLeft != 0 || l.Busy {
				t.Errorf("L1: %+v", l)
			}
		default:
			t.Errorf("not a live lease: %s", l.Lease.ID)
		}
	}

	var hm readmodel.Heatmap
	if code := uiGet(t, ts, secret, "/api/v1/overview/heatmap?hours=1", &hm); code != 200 || hm.BucketSeconds != 75 || hm.Buckets != readmodel.HeatmapBuckets || len(hm.GPUs) != 3 {
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
	ts := httptest.NewServer(New(readmodeltest.Catalog(), clock.NewManual(readmodeltest.Now), slog.New(slog.NewTextHandler(io.Discard, nil))))
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
	readmodeltest.Fill(t, st)
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
		{"r1", "a", []int{1}, readmodeltest.Now.Add(-11 * time.Hour), readmodeltest.Now.Add(-9*time.Hour - 30*time.Minute)},
		{"r2", "b", []int{0, 1}, readmodeltest.Now.Add(-9 * time.Hour), readmodeltest.Now.Add(-6*time.Hour - 42*time.Minute - 31*time.Second)},
	} {
		_, _, err := st.Jobs().SubmitJob(ctx, core.Job{ID: r.job, Team: r.team, Tier: core.TierRegular, Request: core.Request{GPUs: len(r.gpus), MilliPerGPU: core.WholeGPU}, Submit: r.start}, "")
		must(err)
		must(st.Units().SaveUnits(ctx, store.Unit{JobID: r.job, State: core.JobRunning, Parts: []store.Part{{LeaseID: "L1", GPUs: r.gpus}}, Start: r.start}))
		must(st.Units().SaveUnits(ctx, store.Unit{JobID: r.job, State: core.JobSucceeded, Start: r.start, End: r.end}))
	}
	admin, err := EnsureAdminToken(ctx, st, clock.NewManual(readmodeltest.Now))
	must(err)
	ts, _ := uiServer(t, st)

	var ov readmodel.Overview
	if code := uiGet(t, ts, admin, "/api/v1/overview", &ov); code != 200 {
		t.Fatalf("overview: %d", code)
	}
	report := func(from time.Time) UsageReportView {
		var v UsageReportView
		if code := uiGet(t, ts, admin, "/api/v1/reports/usage?from="+from.Format(time.RFC3339)+"&to="+readmodeltest.Now.Format(time.RFC3339), &v); code != 200 || v.Idle == nil {
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
		return string(readmodel.Amount(ms))
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
	st := readmodeltest.Store(t)
	for _, tc := range []struct {
		name     string
		idleFor  time.Duration
		lowSince time.Time
	}{
		{"defaults: idle for 30m", 0, readmodeltest.Now.Add(-40 * time.Minute)},
		{"idle for 20m", 20 * time.Minute, readmodeltest.Now.Add(-30 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			if tc.idleFor > 0 {
				p.Idle.For = policy.Duration(tc.idleFor)
			}
			ts := httptest.NewServer(New(readmodeltest.Catalog(), clock.NewManual(readmodeltest.Now), slog.New(slog.NewTextHandler(io.Discard, nil)),
				WithStore(st), WithRateLimit(httpapi.RateLimit{}), WithPolicy(p)))
			defer ts.Close()
			var ov readmodel.Overview
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
	if err := st.Users().CreateUser(context.Background(), store.User{ID: id, Role: store.RoleAdmin, Created: readmodeltest.Now}); err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().CreateToken(context.Background(), store.Token{ID: "t" + id, Hash: hash, User: id, Role: store.RoleAdmin, Name: id, Created: readmodeltest.Now}); err != nil {
		t.Fatal(err)
	}
	return secret
}
