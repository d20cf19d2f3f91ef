package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

// TestHTTPEndToEnd drives the whole system through real HTTP: the
// bootstrap admin makes a team and a member token, the member submits,
// the loop (on the manual clock) rents, places and finishes the job, and
// the member sees it succeed and the lease released.
func TestHTTPEndToEnd(t *testing.T) {
	w := newWorld(t)
	secret, err := api.EnsureAdminToken(context.Background(), w.st, w.clk)
	if err != nil {
		t.Fatal(err)
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: hourly()}
	ts := httptest.NewServer(api.New(cat, w.clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(w.st), api.WithCollectors(w.loop.Collectors()...)))
	defer ts.Close()
	call := func(token, method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
		return resp.StatusCode
	}
	if code := call(secret, "POST", "/api/v1/teams", `{"id":"ml","name":"ML"}`, nil); code != 201 {
		t.Fatalf("team: %d", code)
	}
	var tok api.TokenView
	if code := call(secret, "POST", "/api/v1/tokens", `{"user":"alice","team":"ml","role":"member"}`, &tok); code != 201 {
		t.Fatalf("token: %d", code)
	}
	var job api.JobView
	// The admin names the job for alice (a member's jobs are named by the server).
	if code := call(secret, "POST", "/api/v1/jobs", `{"id":"train","team":"ml","user":"alice","tier":"core","gpus":1,"est_duration_seconds":1200}`, &job); code != 201 || job.State != "pending" {
		t.Fatalf("submit: %d %+v", code, job)
	}
	w.run(10 * time.Minute)
	call(tok.Secret, "GET", "/api/v1/jobs/train", "", &job)
	if job.State != string(core.JobRunning) {
		t.Fatalf("after 10 min: %s", job.State)
	}
	metrics := func(when string, wants ...string) {
		t.Helper()
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range wants {
			if !strings.Contains(string(m), want+"\n") {
				t.Errorf("%s: metrics lack %q", when, want)
			}
		}
	}
	metrics("running", "gpufleet_gpus_paid 1", `gpufleet_fleet_leases{mode="on-demand"} 1`, `gpufleet_queue_depth{tier="core"} 0`, "gpufleet_gpus_allocated_milli 1000",
		"gpufleet_gpus_idle_leases 0", "gpufleet_jobs_submitted_total 1")
	// The job's 20 minutes are done by minute 40, and the machine is kept,
	// idle, until just before its hour ends: idle spend at its hourly rate.
	w.runEvery(30*time.Minute, 30*time.Second)
	metrics("idle", "gpufleet_gpus_paid 1", "gpufleet_gpus_allocated_milli 0", "gpufleet_gpus_idle_leases 1", `gpufleet_idle_spend_per_hour{currency="USD"} 2`)
	w.runEvery(90*time.Minute, 30*time.Second)
	metrics("released", "gpufleet_gpus_paid 0", "gpufleet_gpus_idle_leases 0")
	call(tok.Secret, "GET", "/api/v1/jobs/train", "", &job)
	if job.State != string(core.JobSucceeded) {
		t.Fatalf("after 2 h: %s", job.State)
	}
	var leases api.LeasesPage
	if code := call(tok.Secret, "GET", "/api/v1/leases", "", &leases); code != 200 || len(leases.Leases) != 1 || leases.Leases[0].State != "released" {
		t.Fatalf("leases: %d %+v", code, leases)
	}
	var evs api.EventsPage
	call(secret, "GET", "/api/v1/events?subject=train", "", &evs)
	kinds := map[string]bool{}
	for _, e := range evs.Events {
		if e.Reason == "" {
			t.Errorf("event %s without a reason", e.Kind)
		}
		kinds[e.Kind] = true
	}
	if !kinds["unit.succeeded"] || len(kinds) < 2 {
		t.Errorf("decisions about the job: %v", kinds)
	}
}
