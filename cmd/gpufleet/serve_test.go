package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

func TestServeUntilDone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(pricing.Demo(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil))).HTTPServer(ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntilDone(ctx, srv, ln, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
}

func TestServeBadAddr(t *testing.T) {
	code, _, errs := runCLI(t, "serve", "--addr", "256.0.0.1:99999")
	if code != 1 || !strings.Contains(errs, "serve:") {
		t.Errorf("exit %d, %q", code, errs)
	}
}

// TestServeRefusedKeepsTheToken: a start refused for a bad provider or
// wait target stores no admin token, so the next good start prints one.
func TestServeRefusedKeepsTheToken(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--provider", "nope"},
		{"serve", "--addr", "127.0.0.1:0", "--wait-target", "core=soon"},
		{"serve", "--addr", "127.0.0.1:0", "--provider", "static", "--provider-config", "missing.yaml"},
	} {
		code, _, errs := runCLI(t, args...)
		if code == 0 || strings.Contains(errs, "admin token") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
	token, _, stop := serveWith(t)
	defer stop()
	if !strings.HasPrefix(token, "gpf_") {
		t.Errorf("no admin token printed on the first good start: %q", token)
	}
}

// TestLogLevel: --log-level sets the least level logged; a bad one is a
// usage error naming the flag.
func TestLogLevel(t *testing.T) {
	code, _, errs := runCLI(t, "serve", "--log-level", "loud")
	if code != 2 || !strings.Contains(errs, `log-level: invalid value "loud": want debug, info, warn or error`) {
		t.Errorf("serve --log-level loud: exit %d, %q", code, errs)
	}
	for level, want := range map[string]bool{"debug": true, "DEBUG": true, "info": false} {
		var b strings.Builder
		log, err := newLogger(&b, false, level)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("x")
		if got := b.Len() > 0; got != want {
			t.Errorf("level %s: debug logged %v, want %v", level, got, want)
		}
	}
}

// TestServeEndToEnd starts "gpufleet serve" with no store flag in a
// temporary working directory, reads the admin token it prints, submits a
// job over HTTP and finds it in the job list; a second start prints no
// token and still has the job.
func TestServeEndToEnd(t *testing.T) {
	t.Chdir(t.TempDir())
	token, base, stop := serveWith(t)
	if !strings.HasPrefix(token, "gpf_") {
		t.Fatalf("no admin token printed: %q", token)
	}
	call := func(base, method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := call(base, "POST", "/api/v1/teams", `{"id":"ml","name":"ML"}`); code != 201 {
		t.Fatalf("create team: %d %s", code, b)
	}
	if code, b := call(base, "POST", "/api/v1/jobs", `{"id":"train-1","team":"ml","gpus":1,"est_duration_seconds":600}`); code != 201 {
		t.Fatalf("submit: %d %s", code, b)
	}
	if code, b := call(base, "GET", "/api/v1/jobs", ""); code != 200 || !strings.Contains(b, `"train-1"`) {
		t.Fatalf("list: %d %s", code, b)
	}
	if code, b := call(base, "GET", "/readyz", ""); code != 200 {
		t.Errorf("readyz: %d %s", code, b)
	}
	if code, b := call(base, "GET", "/metrics", ""); code != 200 || !strings.Contains(b, "gpufleet_loop_tick_seconds") {
		t.Errorf("metrics without the loop's: %d", code)
	}
	stop()
	if _, err := os.Stat("gpufleet.db"); err != nil {
		t.Errorf("no gpufleet.db in the working directory: %v", err)
	}
	again, base2, _ := serveWith(t)
	if again != "" {
		t.Errorf("admin token printed again on the second start")
	}
	if code, b := call(base2, "GET", "/api/v1/jobs/train-1", ""); code != 200 {
		t.Errorf("job after restart: %d %s", code, b)
	}
}

// TestServeRunsJobsForReal: under the default serve (sim provider, its
// hosted agents, the default tick and boot delay) a job runs as a real
// process within 30 s of its submission; a command that exits 7 fails
// its job with exit status 7, and a job without a command runs sleep for
// its estimated duration and says so.
func TestServeRunsJobsForReal(t *testing.T) {
	t.Chdir(t.TempDir())
	token, base, _ := serveWith(t)
	c, err := client.New(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateTeam(ctx, api.TeamRequest{ID: "ml", Name: "ML"}); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	submitted := time.Now()
	for _, j := range []api.JobRequest{
		{ID: "seven", Team: "ml", GPUs: 1, EstDurationSeconds: 60, Command: []string{"sh", "-c", "echo $CUDA_VISIBLE_DEVICES > " + marker + "; exit 7"}},
		{ID: "nap", Team: "ml", GPUs: 1, EstDurationSeconds: 2},
	} {
		if _, _, err := c.SubmitJob(ctx, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	events := func(q string) []api.EventView {
		var page api.EventsPage
		code, b := httpGet(t, base+"/api/v1/events?"+q, token)
		if code != 200 || json.Unmarshal(b, &page) != nil {
			t.Fatalf("events?%s: %d %s", q, code, b)
		}
		return page.Events
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		seven, err := c.GetJob(ctx, "seven")
		if err != nil {
			t.Fatal(err)
		}
		nap, err := c.GetJob(ctx, "nap")
		if err != nil {
			t.Fatal(err)
		}
		if seven.State == "failed" && nap.State == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s: seven %s, nap %s", seven.State, nap.State)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("the command did not run on GPU 0: %q %v", b, err)
	}
	failed := events("kind=unit.failed&subject=seven")
	if len(failed) != 1 || failed[0].Attrs["exit_code"] != "7" {
		t.Errorf("unit.failed events of seven: %+v", failed)
	}
	for _, id := range []string{"seven", "nap"} {
		started := events("kind=agent.job-started&subject=" + id)
		if len(started) == 0 {
			t.Fatalf("%s: no agent.job-started event", id)
		}
		if d := started[0].At.Sub(submitted); d > 30*time.Second {
			t.Errorf("%s: its process started %s after submission, want within 30 s", id, d)
		}
	}
	sleep := events("kind=unit.sleep&subject=nap")
	if len(sleep) != 1 || !strings.Contains(sleep[0].Reason, `"sleep 2"`) {
		t.Errorf("unit.sleep events of nap: %+v", sleep)
	}
	if ok := events("kind=unit.succeeded&subject=nap"); len(ok) != 1 || ok[0].Attrs["exit_code"] != "0" {
		t.Errorf("unit.succeeded events of nap: %+v", ok)
	}
}

func httpGet(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
