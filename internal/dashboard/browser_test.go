package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/browsertest"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/server"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// t0 is a Monday morning; the month and the day have begun, so today's and
// this month's spend differ only by what the test runs.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// offers: one two-GPU machine billed per started hour, so that a machine
// kept after its job is idle until its hour ends and the idle spend and
// time to the billing boundary are visible.
func offers() []core.Offer {
	return []core.Offer{{ID: "test/r1/a100x2", Provider: "test", Region: "r1", InstanceType: "a100x2", GPUModel: "A100", GPUs: 2, GPUMemMiB: 40960,
		VCPUs: 16, MemoryMiB: 131072, Currency: "USD",
		Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 3_456_789, Per: core.Hour, Granularity: 3600}}}}
}

// system is the real API and control loop on a SQLite store, the sim
// provider and a manual clock that a driver advances while running is set.
type system struct {
	t       *testing.T
	st      store.Store
	clk     *clock.Manual
	ts      *httptest.Server
	running atomic.Bool
	admin   string
}

func startSystem(t *testing.T) *system {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ui.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(t0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cloud, err := sim.New(sim.Config{Offers: offers(), Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := server.NewLoop(server.Config{Store: st, Provider: cloud, Offers: offers(), Engine: engine.Config{}, Executor: server.VirtualTime{}, Clock: clk, Log: log, Tick: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := api.EnsureAdminToken(ctx, st, clk)
	if err != nil {
		t.Fatal(err)
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: offers()}
	s := &system{t: t, st: st, clk: clk, admin: secret}
	// No rate limit: the limiter runs on the manual clock, which stands
	// still while the test compares figures.
	s.ts = httptest.NewServer(api.New(cat, clk, log, api.WithStore(st), api.WithRateLimit(httpapi.RateLimit{}), api.WithCollectors(loop.Collectors()...)))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := loop.Run(ctx); err != nil {
			t.Errorf("loop: %v", err)
		}
	})
	// The driver: 5 s of loop time every 20 ms while running.
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			if s.running.Load() {
				clk.Advance(5 * time.Second)
			}
		}
	})
	t.Cleanup(func() {
		s.ts.Close()
		cancel()
		clk.Advance(time.Hour) // wake the loop so that it sees ctx end
		wg.Wait()
		st.Close()
	})
	return s
}

// pause stops the clock and waits until the loop is idle, waiting for its
// next tick: from then on the store and every figure stand still.
func (s *system) pause() {
	s.t.Helper()
	s.running.Store(false)
	time.Sleep(50 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); s.clk.Pending() == 0; {
		if time.Now().After(deadline) {
			s.t.Fatal("the loop did not go idle")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a tick in flight has written by now
}

// call sends a request with token and decodes the JSON answer with
// json.Number, so that decimals keep their exact text.
func (s *system) call(token, method, path, body string, out any) int {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// artifacts is where screenshots go: $GPUFLEET_ARTIFACTS, or a temporary
// directory of the test.
func artifacts(t *testing.T) string {
	dir := os.Getenv("GPUFLEET_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if !filepath.IsAbs(dir) {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type page struct {
	t   *testing.T
	ctx context.Context
	dir string
	n   int
	mu  sync.Mutex
	// problems are console errors and uncaught exceptions.
	problems []string
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		p.t.Fatalf("%s: %v", what, err)
	}
}

// wait polls a JavaScript predicate until it holds.
func (p *page) wait(what, predicate string, timeout time.Duration) {
	p.t.Helper()
	p.do(what, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
}

func eval[T any](p *page, expr string, opts ...chromedp.EvaluateOption) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// shot writes a full-page PNG screenshot and logs its path.
func (p *page) shot(name string) {
	p.n++
	b, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(p.dir, fmt.Sprintf("dashboard-%02d-%s.png", p.n, name))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

func (p *page) login(base, token string) { p.loginPolling(base, token, 150*time.Millisecond) }

// loginPolling logs in with the page refreshing itself every poll.
func (p *page) loginPolling(base, token string, poll time.Duration) {
	p.t.Helper()
	p.do("open the dashboard", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem("gpufleet.poll_ms", "%d")`, poll.Milliseconds())),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS(`#login-form button`)))
	p.wait("the overview after login", `document.getElementById("page").dataset.page === "overview"`, 10*time.Second)
}

func (p *page) open(name string) {
	p.t.Helper()
	p.do("open "+name, chromedp.Evaluate[chromedp.Void](`location.hash = "#/`+name+`"`))
	p.wait(name+" page", `document.getElementById("page").dataset.page === "`+name+`"`, 10*time.Second)
	p.accessible(name)
}

// accessible checks the page's basics: every form control has a label,
// every button a name, the one h1 and a level-2 title, the current page
// marked in the navigation.
func (p *page) accessible(name string) {
	p.t.Helper()
	bad := eval[[]string](p, `(() => {
		const out = [];
		for (const e of document.querySelectorAll("input, select, textarea"))
			if (e.type !== "hidden" && !e.closest("[hidden]") && !e.labels.length && !e.getAttribute("aria-label")) out.push("unlabelled " + (e.id || e.name || e.type));
		for (const b of document.querySelectorAll("button"))
			if (!b.closest("[hidden]") && !(b.getAttribute("aria-label") || b.textContent.trim())) out.push("nameless button");
		if (document.querySelectorAll("h1").length !== 1) out.push("h1 count " + document.querySelectorAll("h1").length);
		if (!document.querySelector("#page h2")) out.push("no h2");
		const cur = document.querySelector('nav a[aria-current="page"]');
		if (!cur || cur.getAttribute("href") !== "#/`+name+`") out.push("current page not marked");
		if (document.documentElement.lang !== "en") out.push("no lang");
		return out;
	})()`)
	for _, b := range bad {
		p.t.Errorf("%s page: %s", name, b)
	}
}

// TestDashboardInBrowser drives the dashboard in headless chromium against
// the real API and control loop: login, the overview's figures against the
// API's JSON, a job submitted through the page running to success, an idle
// GPU shown as an alert, and a member who cannot see another team's jobs.
func TestDashboardInBrowser(t *testing.T) {
	s := startSystem(t)
	ctx := browsertest.Start(t, 1440, 1000, 3*time.Minute)
	p := &page{t: t, ctx: ctx, dir: artifacts(t)}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			// The browser logs every 4xx as "Failed to load resource"
			// (the test provokes a 401 and 404s on purpose) and the
			// script of a report it kept from running in its sandboxed
			// frame. Other errors and uncaught exceptions are failures.
			expected := strings.HasPrefix(m.Text, "Failed to load resource") || strings.HasPrefix(m.Text, "Blocked script execution in 'about:srcdoc'")
			if (m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException) && !expected {
				p.mu.Lock()
				p.problems = append(p.problems, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text))
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.problems {
			t.Errorf("browser console: %s", pr)
		}
	})

	// Two teams; a member of ml; a job of vision that ml must not see.
	for _, team := range []string{"ml", "vision"} {
		if code := s.call(s.admin, "POST", "/api/v1/teams", `{"id":"`+team+`","name":"`+team+`","monthly_budget":"500"}`, nil); code != 201 {
			t.Fatalf("team %s: %d", team, code)
		}
	}
	var member api.TokenView
	if code := s.call(s.admin, "POST", "/api/v1/tokens", `{"user":"alice","team":"ml","role":"member"}`, &member); code != 201 {
		t.Fatalf("member token: %d", code)
	}
	// A job no offer can run (81920 MiB on 40960 MiB GPUs), so that it
	// stays pending: the API refuses such a job (422), so it goes in
	// through the store, as one accepted under another catalog would be.
	secretJob := core.Job{ID: "vision-secret", Team: "vision", Tier: core.TierOffline, EstDuration: 10 * time.Hour, Submit: s.clk.Now(),
		Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU, MemPerGPUMiB: 81920}}
	if _, _, err := s.st.Jobs().SubmitJob(context.Background(), secretJob, ""); err != nil {
		t.Fatalf("vision job: %v", err)
	}

	// Log in as the admin; a bad token first.
	p.do("open the dashboard", chromedp.Navigate(s.ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "gpf_wrong"), chromedp.Click(chromedp.CSS(`#login-form button`)))
	p.wait("the refused login", `document.getElementById("login-error").textContent.includes("401")`, 10*time.Second)
	p.login(s.ts.URL, s.admin)
	if who := eval[string](p, `document.getElementById("who-text").textContent`); who != "whole fleet (admin)" {
		t.Errorf("logged in as %q", who)
	}
	p.shot("login-overview-empty")

	// Submit a job through the page and watch it run and succeed.
	p.open("jobs")
	p.do("fill the job form",
		chromedp.SendKeys(chromedp.ID("job-id"), "ui-train"), chromedp.SendKeys(chromedp.ID("job-team"), "ml"),
		chromedp.SetValue(chromedp.ID("job-est"), "1800"), chromedp.Click(chromedp.ID("job-submit")))
	p.wait("the submission", `document.getElementById("submit-msg").textContent.startsWith("Submitted job ui-train")`, 10*time.Second)
	var job api.JobView
	if code := s.call(s.admin, "GET", "/api/v1/jobs/ui-train", "", &job); code != 200 || job.Team != "ml" || job.State != "pending" || job.EstDurationSeconds != 1800 {
		t.Fatalf("the page's job in the API: %d %+v", code, job)
	}
	s.running.Store(true)
	p.wait("ui-train running", `document.querySelector('[data-job-state="ui-train"]')?.textContent === "running"`, 30*time.Second)
	p.shot("job-running")
	p.wait("ui-train succeeded", `document.querySelector('[data-job-state="ui-train"]')?.textContent === "succeeded"`, 60*time.Second)
	time.Sleep(300 * time.Millisecond) // a minute or so of the machine idle
	s.pause()
	if code := s.call(s.admin, "GET", "/api/v1/jobs/ui-train", "", &job); code != 200 || job.State != "succeeded" {
		t.Fatalf("after the page showed it succeeded: %d %s", code, job.State)
	}
	p.shot("job-succeeded")

	// The machine is idle now, still within its paid hour. Its agent's
	// samples (made here through the store) say GPU 0 has been under 20%
	// for 40 minutes, and the store holds the loop's open idle alert for
	// it (the page lists the loop's alerts; it judges nothing itself).
	var leases api.BoundaryLeases
	if code := s.call(s.admin, "GET", "/api/v1/overview/leases", "", &leases); code != 200 || len(leases.Leases) != 1 {
		t.Fatalf("live leases: %d %+v", code, leases)
	}
	lease := leases.Leases[0].Lease.ID
	now := s.clk.Now()
	var samples []core.Sample
	for m := 40; m >= 0; m-- {
		samples = append(samples, core.Sample{LeaseID: lease, GPU: 0, At: now.Add(-time.Duration(m) * time.Minute), UtilPct: 3 + m%5, MemTotalMiB: 40960},
			core.Sample{LeaseID: lease, GPU: 1, At: now.Add(-time.Duration(m) * time.Minute), UtilPct: 60 + m%30, MemTotalMiB: 40960})
	}
	if err := s.st.Samples().InsertSamples(context.Background(), samples...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.st.Alerts().RaiseAlert(context.Background(), store.Alert{Kind: "idle-alert", LeaseID: lease, GPU: 0, Team: "ml", Action: "notify",
		Reason: "GPU 0 under 20% for 30 minutes", Raised: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}

	// The overview's figures are the API's, exactly.
	p.open("overview")
	p.do("refresh", chromedp.Click(chromedp.ID("refresh")))
	p.wait("the overview with samples", `document.querySelector('[data-field="utilization.reporting_gpus"]')?.textContent === "2"`, 10*time.Second)
	var raw map[string]any
	if code := s.call(s.admin, "GET", "/api/v1/overview", "", &raw); code != 200 {
		t.Fatalf("overview: %d", code)
	}
	shown := eval[map[string]string](p, `Object.fromEntries([...document.querySelectorAll("[data-field]")].map(e => [e.dataset.field, (e.querySelector("data") || e).textContent]))`)
	want := flatten(raw)
	checked := 0
	for _, f := range []string{"spend_today", "spend_month", "idle_spend_today", "idle_spend_month", "utilization.paid_gpus", "utilization.ready_gpus",
		"utilization.allocated_milli", "utilization.allocated_pct", "utilization.reporting_gpus", "utilization.sampled_allocated_gpus",
		"utilization.busy_milli", "utilization.paid_gpu_hours_today", "utilization.allocated_gpu_hours_today", "utilization.idle_gpu_hours_today",
		"utilization.allocated_pct_today",
		"queue_by_tier.core", "queue_by_tier.regular", "queue_by_tier.offline", "jobs.succeeded", "jobs.pending", "alerts.length", "idle_gpus.length"} {
		w, ok := want[f]
		if !ok {
			t.Errorf("the API's overview has no %s", f)
			continue
		}
		if got, ok := shown[f]; !ok || got != w {
			t.Errorf("%s: the page shows %q, the API says %q", f, got, w)
		}
		checked++
	}
	// The figures are not trivially equal: money was spent, some of it idle.
	for _, f := range []string{"spend_today", "spend_month", "idle_spend_today"} {
		if want[f] == "0" {
			t.Errorf("%s is 0 after an hour-billed machine ran a job", f)
		}
	}
	if want["spend_today"] != want["spend_month"] || want["queue_by_tier.offline"] != "1" || want["idle_gpus.length"] != "1" || want["alerts.length"] != "1" {
		t.Errorf("overview: %v", want)
	}
	// The machine is idle: its GPUs report, but no reading is of an
	// allocated GPU, so no measured utilization stands beside
	// "allocated 0".
	if want["utilization.allocated_milli"] != "0" || want["utilization.sampled_allocated_gpus"] != "0" {
		t.Errorf("utilization of an idle machine: %v", want)
	}
	if got := shown["utilization.allocated_util_pct"]; got != "nothing allocated" {
		t.Errorf("measured utilization beside allocated 0: the page shows %q", got)
	}
	// Spend and the budget's spent are the usage report's.
	var usage api.UsageReportView
	if code := s.call(s.admin, "GET", "/api/v1/reports/usage?from="+fmt.Sprint(raw["month_start"])+"&to="+fmt.Sprint(raw["as_of"]), "", &usage); code != 200 {
		t.Fatalf("usage report: %d", code)
	}
	spentML := eval[string](p, `document.querySelector('#ov-budgets tr[data-team="ml"] td:nth-child(3) data').textContent`)
	if len(usage.Teams) != 1 || usage.Teams[0].Team != "ml" || string(usage.Teams[0].Cost) != spentML || spentML == "0" || string(usage.Bill) != want["spend_month"] {
		t.Errorf("the page's month spend %s and ml's spent %s, the usage report %+v", want["spend_month"], spentML, usage)
	}
	fleetRow := eval[[]string](p, `[...document.querySelectorAll('#ov-fleet tr[data-mode="on-demand"] td')].map(td => td.textContent)`)
	if len(fleetRow) != 5 || fleetRow[1] != "1" || fleetRow[2] != "2" {
		t.Errorf("fleet row: %q", fleetRow)
	}
	t.Logf("overview: %d figures equal to the API's; spend today %s, idle %s, allocated %s%%", checked, want["spend_today"], want["idle_spend_today"], want["utilization.allocated_pct"])
	p.shot("overview")

	// The idle GPU and the store's alert on the alerts page.
	p.open("alerts")
	p.wait("the idle GPU", `!!document.querySelector('[data-idle-gpu="`+lease+`/0"]')`, 10*time.Second)
	p.wait("the store's alert", `!!document.querySelector('[data-alert="idle-alert:`+lease+`:0"]')`, 10*time.Second)
	if n := eval[int](p, `document.querySelectorAll('[data-idle-gpu]').length`); n != 1 {
		t.Errorf("idle GPUs shown: %d, want 1 (GPU 1 is busy at 60-89%%)", n)
	}
	p.shot("alerts")

	// The heatmap draws the samples; the leases page the boundary.
	p.open("heatmap")
	p.wait("heatmap cells", `document.querySelectorAll('#heatmap-svg rect[data-lease="`+lease+`"]').length === 96`, 10*time.Second)
	p.shot("heatmap")
	p.open("leases")
	p.wait("the lease", `!!document.querySelector('[data-seconds-left="`+lease+`"]')`, 10*time.Second)
	if code := s.call(s.admin, "GET", "/api/v1/overview/leases", "", &leases); code != 200 {
		t.Fatal(code)
	}
	left := eval[string](p, `document.querySelector('[data-seconds-left="`+lease+`"]').dataset.value`)
	if got := fmt.Sprint(leases.Leases[0].SecondsLeft); left != got || leases.Leases[0].SecondsLeft <= 0 || leases.Leases[0].SecondsLeft >= 3600 {
		t.Errorf("seconds left: the page %s, the API %s", left, got)
	}
	p.shot("leases")
	p.open("queue")
	p.wait("the queue", `!!document.querySelector('tr[data-tier="offline"]')`, 10*time.Second)
	p.shot("queue")

	// Logs and cancel on the jobs page. The clock stands still, so a job
	// submitted now stays pending until the page cancels it.
	p.open("jobs")
	p.do("show ui-train's logs", chromedp.Click(chromedp.CSS(`[data-logs="ui-train"]`)))
	p.wait("the logs", `document.getElementById("logs-text").textContent !== ""`, 10*time.Second)
	if logs := eval[string](p, `document.getElementById("logs-text").textContent`); strings.HasPrefix(logs, "4") || strings.HasPrefix(logs, "5") || strings.HasPrefix(logs, "HTTP") {
		t.Errorf("logs of ui-train: %q", logs)
	}
	if code := s.call(s.admin, "POST", "/api/v1/jobs", `{"id":"ui-cancel","team":"ml","gpus":1,"est_duration_seconds":600}`, nil); code != 201 {
		t.Fatalf("ui-cancel: %d", code)
	}
	p.wait("ui-cancel listed", `!!document.querySelector('[data-cancel="ui-cancel"]')`, 10*time.Second)
	p.do("cancel ui-cancel", chromedp.Click(chromedp.CSS(`[data-cancel="ui-cancel"]`)))
	p.wait("ui-cancel cancelled", `document.querySelector('[data-job-state="ui-cancel"]')?.textContent === "cancelled"`, 10*time.Second)
	if code := s.call(s.admin, "GET", "/api/v1/jobs/ui-cancel", "", &job); code != 200 || job.State != "cancelled" {
		t.Errorf("cancelled through the page: %d %s", code, job.State)
	}
	p.shot("jobs-logs-cancel")

	// The audit page: the report in a frame, or word that the server has
	// none yet.
	p.open("audit")
	p.do("ask for the audit report", chromedp.Click(chromedp.CSS(`#audit-form button`)))
	var doc struct {
		Paths map[string]any `json:"paths"`
	}
	s.call(s.admin, "GET", "/api/v1/openapi.json", "", &doc)
	if _, ok := doc.Paths["/api/v1/reports/audit"]; ok {
		p.wait("the audit report", `!!document.querySelector('#audit-out iframe.report[sandbox="allow-same-origin"]')?.contentDocument?.body?.textContent`, 20*time.Second)
		t.Logf("audit frame: %.300q", eval[string](p, `document.querySelector("#audit-out iframe.report").contentDocument.body.innerText`))
	} else {
		p.wait("word of no audit route", `document.getElementById("audit-out").textContent.includes("no audit reports yet")`, 10*time.Second)
	}
	p.shot("audit")

	// Simulator reports are read in the browser: a JSON one as a table,
	// an HTML one in a sandboxed frame.
	dir := t.TempDir()
	simJSON := filepath.Join(dir, "whatif.json")
	if err := os.WriteFile(simJSON, []byte(`{"trace":"helios-excerpt","currency":"USD","seed":42,
		"policies":[{"policy":"gpufleet","cost":1234.567891,"idle_cost":12.5,"idle_share":0.0101,"paid_gpu_hours":100,"allocated_gpu_hours":98.99,"wait_p50_s":30,"wait_p95_s":600,"deadline_misses":0,"preemptions":3,"reclaims":1,"unfinished":0,"vs_lower_bound":1.05},
		{"policy":"fifo-ondemand","cost":2345.1,"idle_cost":400,"idle_share":0.2,"paid_gpu_hours":180,"allocated_gpu_hours":144,"wait_p50_s":0,"wait_p95_s":0,"deadline_misses":2,"preemptions":0,"reclaims":0,"unfinished":0,"vs_lower_bound":2}],
		"lower_bound":{"cost":1175.8,"method":"lp"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.open("sim")
	p.do("open the JSON report", chromedp.SetUploadFiles(chromedp.ID("sim-file"), []string{simJSON}))
	p.wait("the policies table", `document.querySelectorAll("#sim-report tr[data-policy]").length === 2`, 10*time.Second)
	if cost := eval[string](p, `document.querySelector('#sim-report tr[data-policy="gpufleet"] td:nth-child(2)').textContent`); cost != "1234.567891" {
		t.Errorf("sim report cost: %q, want the file's 1234.567891", cost)
	}
	p.shot("sim-json")
	simHTML := filepath.Join(dir, "whatif.html")
	if err := os.WriteFile(simHTML, []byte(`<!doctype html><html><head><style>h1{color:#333}</style></head><body><h1 id="marker">what-if report</h1><script>document.title="ran"</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.do("open the HTML report", chromedp.SetUploadFiles(chromedp.ID("sim-file"), []string{simHTML}))
	// The report shows, styled, and its script does not run.
	p.wait("the report frame", `document.querySelector('#sim-out iframe.report[sandbox="allow-same-origin"]')?.contentDocument?.getElementById("marker")?.textContent === "what-if report"`, 10*time.Second)
	if got := eval[[]string](p, `(() => { const d = document.querySelector("#sim-out iframe.report").contentDocument; return [d.title, getComputedStyle(d.getElementById("marker")).color]; })()`); got[0] == "ran" || got[1] != "rgb(51, 51, 51)" {
		t.Errorf("sim HTML frame: title %q (its script must not run), h1 colour %q (its style must apply)", got[0], got[1])
	}
	p.shot("sim-html")

	// A member of ml sees ml's jobs only; the API hides vision's.
	p.do("log out", chromedp.Click(chromedp.ID("logout")))
	p.wait("the login form", `!document.getElementById("login").hidden`, 10*time.Second)
	p.login(s.ts.URL, member.Secret)
	if who := eval[string](p, `document.getElementById("who-text").textContent`); who != "team ml" {
		t.Errorf("member logged in as %q", who)
	}
	p.open("jobs")
	p.wait("ml's job", `!!document.querySelector('[data-job="ui-train"]')`, 10*time.Second)
	if ids := eval[[]string](p, `[...document.querySelectorAll("[data-job]")].map(r => r.dataset.job)`); strings.Join(ids, " ") != "ui-cancel ui-train" {
		t.Errorf("the member's jobs page lists %q, want ml's ui-cancel and ui-train only", ids)
	}
	if code := s.call(member.Secret, "GET", "/api/v1/jobs/vision-secret", "", nil); code != 404 {
		t.Errorf("member GET vision's job: %d, want 404", code)
	}
	if code := s.call(s.admin, "GET", "/api/v1/jobs/vision-secret", "", nil); code != 200 {
		t.Errorf("admin GET vision's job: %d, want 200", code)
	}
	status := eval[int](p, `fetch("/api/v1/jobs/vision-secret", {headers: {Authorization: "Bearer " + sessionStorage.getItem("gpufleet.token")}}).then(r => r.status)`, chromedp.EvalAwaitPromise)
	if status != 404 {
		t.Errorf("the member's browser GET vision's job: %d, want 404", status)
	}
	p.open("overview")
	mq := eval[string](p, `document.querySelector('[data-field="queue_by_tier.offline"] data').textContent`)
	if mq != "0" {
		t.Errorf("the member's overview counts vision's queued job: offline %s", mq)
	}
	p.shot("member-jobs-overview")
}

// TestJobsFirstView: the Jobs page lists the jobs the first time it is
// shown, before any refresh. Polling is set to ten minutes, so the list
// the test sees is the one the page drew when it opened.
func TestJobsFirstView(t *testing.T) {
	s := startSystem(t)
	ctx := browsertest.Start(t, 1280, 900, time.Minute)
	p := &page{t: t, ctx: ctx, dir: artifacts(t)}
	if code := s.call(s.admin, "POST", "/api/v1/teams", `{"id":"ml","name":"ml"}`, nil); code != 201 {
		t.Fatalf("team: %d", code)
	}
	for _, id := range []string{"first-a", "first-b"} {
		if code := s.call(s.admin, "POST", "/api/v1/jobs", `{"id":"`+id+`","team":"ml","gpus":1}`, nil); code != 201 {
			t.Fatalf("job %s: %d", id, code)
		}
	}
	p.loginPolling(s.ts.URL, s.admin, 10*time.Minute)
	p.open("jobs")
	ids := eval[[]string](p, `[...document.querySelectorAll("#jobs-list [data-job]")].map(r => r.dataset.job)`)
	if d := cmp.Diff([]string{"first-b", "first-a"}, ids); d != "" {
		p.shot("jobs-first-view")
		t.Errorf("jobs listed on first view (-want +got):\n%s", d)
	}
}

// flatten renders the overview's figures as the page labels them: nested
// fields joined by dots, lists by their length.
func flatten(v map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(strings.TrimPrefix(prefix+"."+k, "."), e)
			}
		case []any:
			out[prefix+".length"] = fmt.Sprint(len(x))
		default:
			out[prefix] = fmt.Sprint(x)
		}
	}
	walk("", v)
	return out
}
