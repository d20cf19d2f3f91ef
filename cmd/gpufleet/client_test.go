package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// apiServer runs the real API on a SQLite store in t.TempDir() and
// returns its URL and the bootstrap admin token. The user's own client
// config is kept out of the way.
func apiServer(t *testing.T) (string, string) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv(envURL, "")
	t.Setenv(envToken, "")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cli.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	admin, err := api.EnsureAdminToken(ctx, st, clk)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.New(pricing.Demo(), clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(st), api.WithRateLimit(httpapi.RateLimit{})))
	t.Cleanup(ts.Close)
	return ts.URL, admin
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClientConfigPrecedence: a flag beats the environment, which beats
// the config file, for the server and the token each.
func TestClientConfigPrecedence(t *testing.T) {
	base, admin := apiServer(t)
	// The config file alone (the default path).
	dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "gpufleet")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("server: "+base+"\ntoken: "+admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, "teams"); code != 0 || !strings.Contains(out, "ID") {
		t.Fatalf("config file: %d %q %q", code, out, errs)
	}
	// The environment beats the file: a bad token in the environment.
	t.Setenv(envToken, "gpf_wrong")
	if code, _, errs := runCLI(t, "teams"); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("env token over the file: %d %q", code, errs)
	}
	// The flag beats the environment.
	if code, _, errs := runCLI(t, "teams", "--token", admin); code != 0 {
		t.Errorf("flag token over env: %d %q", code, errs)
	}
	t.Setenv(envURL, "http://127.0.0.1:1")
	if code, _, errs := runCLI(t, "teams", "--token", admin); code != 1 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("env server over the file: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "teams", "--token", admin, "--server", base); code != 0 {
		t.Errorf("flag server over env: %d %q", code, errs)
	}
	// An explicit --config that is missing or wrong is a usage error.
	t.Setenv(envURL, "")
	t.Setenv(envToken, "")
	if code, _, errs := runCLI(t, "teams", "--config", "/nope.yaml"); code != 2 || !strings.Contains(errs, "/nope.yaml") {
		t.Errorf("missing --config: %d %q", code, errs)
	}
	bad := writeFile(t, "c.yaml", "server: "+base+"\ntokn: x\n")
	if code, _, errs := runCLI(t, "teams", "--config", bad); code != 2 || !strings.Contains(errs, "unknown field tokn") {
		t.Errorf("bad config: %d %q", code, errs)
	}
	if err := os.Remove(filepath.Join(dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "teams"); code != 2 || !strings.Contains(errs, "no server") || !strings.Contains(errs, envURL) {
		t.Errorf("nothing configured: %d %q", code, errs)
	}
}

// TestClientCommands drives every client command against the real API.
func TestClientCommands(t *testing.T) {
	base, admin := apiServer(t)
	as := func(token string, args ...string) (int, string, string) {
		t.Helper()
		flags := []string{"--server", base, "--token", token}
		for i, a := range args {
			if a == "--" { // the flags go before a job's command
				return runCLI(t, append(append(append([]string{}, args[:i]...), flags...), args[i:]...)...)
			}
		}
		return runCLI(t, append(args, flags...)...)
	}
	must := func(token string, args ...string) string {
		t.Helper()
		code, out, errs := as(token, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	must(admin, "teams", "create", "ml", "--name", "Machine learning", "--monthly-budget", "5000")
	must(admin, "teams", "create", "web")
	if out := must(admin, "teams"); !strings.Contains(out, "Machine learning") || !strings.Contains(out, "5000") || !strings.Contains(out, "web") {
		t.Errorf("teams: %s", out)
	}
	secret := strings.TrimSpace(must(admin, "tokens", "create", "--user", "alice", "--team", "ml", "--role", "member", "--name", "laptop"))
	if !strings.HasPrefix(secret, "gpf_") {
		t.Fatalf("token create printed %q", secret)
	}

	// submit from flags, with a command after --.
	var j api.JobView
	if err := json.Unmarshal([]byte(must(secret, "submit", "--gpus", "2", "--duration", "90m", "--json", "--", "python", "train.py", "--epochs=3")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Team != "ml" || j.GPUs != 2 || j.EstDurationSeconds != 5400 || strings.Join(j.Command, " ") != "python train.py --epochs=3" || !strings.HasPrefix(j.ID, "job-") {
		t.Errorf("submitted %+v", j)
	}
	train := j.ID // the server names a team token's jobs
	if code, _, errs := as(secret, "submit", "--id", "train", "--gpus", "1"); code != 1 || !strings.Contains(errs, "field id") {
		t.Errorf("a member chooses an id: %d %q", code, errs)
	}
	// submit from a file, with an idempotency key in it; a flag overrides.
	job := writeFile(t, "job.yaml", `tier: offline
gpus: 1
gpu_milli: 250
est_duration: 2h
checkpoint_interval: 10m
deadline: 2026-03-03T00:00:00Z
models: [NVIDIA A100, NVIDIA H100]
command: [python, eval.py]
idempotency_key: eval-1
`)
	var ev api.JobView
	if err := json.Unmarshal([]byte(must(secret, "submit", "-f", job, "--tier", "regular", "--json")), &ev); err != nil || ev.Tier != "regular" {
		t.Errorf("submit -f: %+v %v", ev, err)
	}
	eval := ev.ID
	if out := must(secret, "submit", "-f", job, "--tier", "regular"); !strings.Contains(out, "already submitted") {
		t.Errorf("submit -f again: %s", out)
	}
	for text, want := range map[string]string{
		"gpus: 1\ngpu: 2\n":                "unknown field gpu",
		"gpus: two\n":                      "gpus",
		"gpus: 1\nest_duration: 2 hours\n": `est_duration`,
		"gpus: 1\ndeadline: tomorrow\n":    "deadline",
	} {
		code, _, errs := as(secret, "submit", "-f", writeFile(t, "bad.yaml", text))
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("job file %q: exit %d %q, want 2 naming %s", text, code, errs, want)
		}
	}
	if code, _, errs := as(secret, "submit", "--gpus", "1", "--tier", "gold"); code != 1 || !strings.Contains(errs, "tier") {
		t.Errorf("bad tier: %d %q", code, errs)
	}
	// What the job does and is built for: flags, and a file the flags override.
	if err := json.Unmarshal([]byte(must(secret, "submit", "--gpus", "1", "--workload", "inference", "--accelerators", "aws-inferentia,nvidia", "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Workload != core.Inference || len(j.Accelerators) != 2 || j.Accelerators[0] != core.AWSInferentia {
		t.Errorf("submitted inference job %+v", j)
	}
	serve := writeFile(t, "serve.yaml", "gpus: 1\ngpu_milli: 125\nworkload: inference\naccelerators: [nvidia]\n")
	if out := must(secret, "submit", "-f", serve, "--accelerators", "nvidia,amd"); !strings.Contains(out, "inference on nvidia,amd") {
		t.Errorf("submit -f with --accelerators: %s", out)
	}
	for _, tc := range []struct{ args, want []string }{
		{[]string{"--workload", "serving"}, []string{"--workload", `"serving"`, "training, inference"}},
		{[]string{"--accelerators", "nvidia,tpu"}, []string{"--accelerators", `"tpu"`, "aws-inferentia"}},
		{[]string{"-f", writeFile(t, "bad.yaml", "gpus: 1\naccelerators: [cuda]\n")}, []string{"accelerators[0]", `"cuda"`}},
	} {
		code, _, errs := as(secret, append([]string{"submit", "--gpus", "1"}, tc.args...)...)
		for _, w := range tc.want {
			if code != 2 || !strings.Contains(errs, w) {
				t.Errorf("submit %v: exit %d %q, want 2 naming %s", tc.args, code, errs, w)
			}
		}
	}

	out := must(secret, "jobs")
	if !strings.Contains(out, train) || !strings.Contains(out, eval) || !strings.Contains(out, "0.25") || !strings.HasPrefix(out, "ID") {
		t.Errorf("jobs: %s", out)
	}
	code, out, errs := as(secret, "jobs", "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(errs, "more: --cursor") {
		t.Errorf("jobs --limit 1: %d %q %q", code, out, errs)
	}
	var page api.JobsPage
	if err := json.Unmarshal([]byte(must(secret, "jobs", "--limit", "1", "--all", "--json")), &page); err != nil || len(page.Jobs) != 4 || page.Next != "" {
		t.Errorf("jobs --all --json: %+v %v", page, err)
	}
	if out := must(secret, "jobs", "--state", "cancelled"); strings.Contains(out, train) {
		t.Errorf("no job is cancelled yet: %s", out)
	}
	if out := must(secret, "job", eval); !strings.Contains(out, "NVIDIA A100,NVIDIA H100") || !strings.Contains(out, "python eval.py") || !strings.Contains(out, "2026-03-03T00:00:00Z") {
		t.Errorf("job: %s", out)
	}
	if out := must(secret, "cancel", train); !strings.Contains(out, "job "+train+":") {
		t.Errorf("cancel: %s", out)
	}
	if code, _, errs := as(secret, "job"); code != 2 || !strings.Contains(errs, "accepts 1 arg") {
		t.Errorf("job without id: %d %q", code, errs)
	}
	// Another team's job is a 404 for alice, as a missing one.
	must(admin, "submit", "--id", "site", "--team", "web", "--gpus", "1")
	if code, _, errs := as(secret, "job", "site"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("another team's job: %d %q", code, errs)
	}
	if code, out, errs := as(secret, "logs", eval, "--tail", "100"); code != 0 || out != "" {
		t.Errorf("logs of a job that never ran: %d %q %q", code, out, errs)
	}
	if out := must(admin, "leases"); !strings.HasPrefix(out, "ID") {
		t.Errorf("leases: %q", out)
	}
	if out := must(admin, "nodes"); !strings.HasPrefix(out, "ID") {
		t.Errorf("nodes: %q", out)
	}
	if out := must(admin, "report", "usage", "--from", "2026-03-01T00:00:00Z", "--to", "2026-03-02T00:00:00Z"); !strings.Contains(out, "(idle)") || !strings.Contains(out, "total") {
		t.Errorf("report usage as admin: %s", out)
	}
	var rep api.UsageReportView
	if err := json.Unmarshal([]byte(must(secret, "report", "usage", "--json")), &rep); err != nil || len(rep.Teams) != 1 || rep.Teams[0].Team != "ml" || rep.Idle != nil {
		t.Errorf("report usage as alice: %+v %v", rep, err)
	}
	if code, _, errs := as(admin, "report", "usage", "--from", "March"); code != 2 || !strings.Contains(errs, "--from") {
		t.Errorf("bad --from: %d %q", code, errs)
	}

	out = must(admin, "tokens", "--team", "ml")
	if !strings.Contains(out, "alice") || !strings.Contains(out, secret[:10]) || strings.Contains(out, secret) || !strings.Contains(out, "active") {
		t.Errorf("tokens: %s", out)
	}
	var toks api.TokensPage
	if err := json.Unmarshal([]byte(must(admin, "tokens", "--team", "ml", "--json")), &toks); err != nil || len(toks.Tokens) != 1 {
		t.Fatalf("tokens --json: %+v %v", toks, err)
	}
	if out := must(admin, "tokens", "revoke", toks.Tokens[0].ID); !strings.Contains(out, "revoked") {
		t.Errorf("revoke: %s", out)
	}
	if code, _, errs := as(secret, "jobs"); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("a revoked token: %d %q", code, errs)
	}
	if out := must(admin, "tokens", "--team", "ml"); !strings.Contains(out, "revoked") {
		t.Errorf("tokens after revoke: %s", out)
	}
}

// TestLogsTailCountsLines: "logs ID --tail N" asks the server for the
// last N lines (?lines=N), not N bytes, and prints them as they come.
func TestLogsTailCountsLines(t *testing.T) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"job":"j1","start":7,"end":21,"text":"line 2\nline 3\n"}`)
	}))
	defer srv.Close()
	code, out, errs := runCLI(t, "logs", "j1", "--tail", "2", "--server", srv.URL, "--token", "gpf_x")
	if code != 0 || out != "line 2\nline 3\n" || errs != "" {
		t.Errorf("logs --tail 2: %d %q %q", code, out, errs)
	}
	if d := cmp.Diff([]string{"lines=2"}, queries); d != "" {
		t.Errorf("queries (-want +got)\n%s", d)
	}
	if code, _, errs := runCLI(t, "logs", "j1", "--tail", "-1", "--server", srv.URL, "--token", "gpf_x"); code != 2 || !strings.Contains(errs, `tail: invalid value "-1"`) {
		t.Errorf("--tail -1: %d %q", code, errs)
	}
}
