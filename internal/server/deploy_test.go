package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

// metricName matches the series the deploy files read: gpufleet's own
// and DCGM exporter's.
var metricName = regexp.MustCompile(`\b(gpufleet_[a-z0-9_]+|DCGM_[A-Z0-9_]+)\b`)

// TestDeployMetricsExist: every metric the alert rules and the Grafana
// dashboard in deploy/ read is one serve's /metrics exports (gpufleet_*)
// or one the agent reads from DCGM exporter (DCGM_*), so that renaming
// a metric breaks this test, not an operator's pager.
func TestDeployMetricsExist(t *testing.T) {
	exported := scrapeNames(t)
	dcgm := []string{gpu.MetricGPUUtil, gpu.MetricFBUsed, gpu.MetricFBFree, gpu.MetricFBReserved, gpu.MetricPowerUsage, gpu.MetricGPUTemp, gpu.MetricGREngineActive}
	for _, f := range []string{"../../deploy/prometheus/rules.yaml", "../../deploy/prometheus/rules_test.yaml", "../../deploy/grafana/gpufleet.json"} {
		used := usedNames(t, f)
		if len(used) == 0 {
			t.Errorf("%s names no metric", f)
		}
		for _, n := range used {
			if strings.HasPrefix(n, "DCGM_") {
				if !slices.Contains(dcgm, n) {
					t.Errorf("%s: %s is not a DCGM exporter metric the agent knows (%v)", f, n, dcgm)
				}
				continue
			}
			if !exported[n] {
				t.Errorf("%s: %s is not in serve's /metrics", f, n)
			}
		}
	}
}

// usedNames are the metric names in file: for the dashboard, in its
// panels' queries; for rule files, anywhere.
func usedNames(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.HasSuffix(file, ".json") {
		var d struct {
			Panels []struct {
				Type    string `json:"type"`
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var exprs []string
		for _, p := range d.Panels {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
		text = strings.Join(exprs, "\n")
	}
	var out []string
	for _, n := range metricName.FindAllString(text, -1) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// scrapeNames runs serve's API and loop through a job's life (a team
// with a budget, a job running, then its machine idle) and returns every
// series name /metrics showed, histograms' _bucket, _sum and _count
// included.
func scrapeNames(t *testing.T) map[string]bool {
	t.Helper()
	w := newWorld(t)
	secret, err := api.EnsureAdminToken(context.Background(), w.st, w.clk)
	if err != nil {
		t.Fatal(err)
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: hourly()}
	ts := httptest.NewServer(api.New(cat, w.clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(w.st), api.WithCollectors(w.loop.Collectors()...)))
	defer ts.Close()
	post := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	post("/api/v1/teams", `{"id":"ml","name":"ML","monthly_budget":"100"}`)
	post("/api/v1/jobs", `{"id":"train","team":"ml","user":"alice","tier":"core","gpus":1,"est_duration_seconds":1200}`)
	names := map[string]bool{}
	scrape := func() {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") || line == "" {
				continue
			}
			names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
	}
	w.run(10 * time.Minute) // running
	scrape()
	w.runEvery(30*time.Minute, 30*time.Second) // done, its machine idle
	scrape()
	return names
}
