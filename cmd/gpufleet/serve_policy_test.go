package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// serveCall is an authenticated request to a test server.
func serveCall(t *testing.T, base, token, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServePolicyFile: serve --policy F runs the file's policy, GET
// /api/v1/policy shows its values (with --wait-target over them), and a
// file that stops renting rents nothing for a waiting job.
func TestServePolicyFile(t *testing.T) {
	t.Chdir(t.TempDir())
	const file = `name: frugal
base: gpufleet
wait_targets:
  core: 0s
billing_modes: [on-demand, monthly]
idle:
  util_pct: 35
  for: 45m
renting:
  enabled: false
`
	if err := os.WriteFile("frugal.yaml", []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	token, base, stop := serveWith(t, "--policy", "frugal.yaml", "--wait-target", "offline=2h", "--tick", "100ms", "--sim-delay", "0s")
	defer stop()
	code, b := serveCall(t, base, token, "GET", "/api/v1/policy", "")
	if code != 200 {
		t.Fatalf("GET /api/v1/policy: %d %s", code, b)
	}
	var got struct {
		Policy struct {
			Name         string            `json:"name"`
			Source       string            `json:"source"`
			WaitTargets  map[string]string `json:"wait_targets"`
			BillingModes []string          `json:"billing_modes"`
			Idle         struct {
				UtilPct int    `json:"util_pct"`
				For     string `json:"for"`
			} `json:"idle"`
			Renting struct {
				Enabled bool `json:"enabled"`
			} `json:"renting"`
		} `json:"policy"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(b), &got); err != nil {
		t.Fatal(err)
	}
	want := got
	want.Policy.Name, want.Policy.Source = "frugal", "frugal.yaml"
	want.Policy.WaitTargets = map[string]string{"core": "0s", "regular": "10m0s", "offline": "2h0m0s"}
	want.Policy.BillingModes = []string{"on-demand", "monthly"}
	want.Policy.Idle.UtilPct, want.Policy.Idle.For = 35, "45m0s"
	want.Policy.Renting.Enabled = false
	if diff := cmp.Diff(want, got); diff != "" || !strings.HasPrefix(got.Hash, "sha256:") {
		t.Errorf("GET /api/v1/policy (-want +got):\n%s\nhash %q", diff, got.Hash)
	}
	// The loop runs it: renting off, a core job waits and nothing is rented.
	if code, b := serveCall(t, base, token, "POST", "/api/v1/teams", `{"id":"ml","name":"ML"}`); code != 201 {
		t.Fatalf("create team: %d %s", code, b)
	}
	if code, b := serveCall(t, base, token, "POST", "/api/v1/jobs", `{"id":"j1","team":"ml","tier":"core","gpus":1,"est_duration_seconds":600}`); code != 201 {
		t.Fatalf("submit: %d %s", code, b)
	}
	time.Sleep(time.Second) // ten ticks
	if code, b := serveCall(t, base, token, "GET", "/api/v1/leases", ""); code != 200 || strings.Contains(b, `"id"`) {
		t.Errorf("renting.enabled false, yet leases: %d %s", code, b)
	}
}

// TestServePolicyRefused: a bad --policy stops serve before it starts,
// with an error naming the file, line, field and what is allowed.
func TestServePolicyRefused(t *testing.T) {
	v100, err := filepath.Abs(v100Catalog) // monthly and on-demand only
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if err := os.WriteFile("typo.yaml", []byte("name: x\nidle:\n  utilpct: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("peak.yaml", []byte("base: static-peak\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("up.yaml", []byte("spot:\n  rule: uniform-progress\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("weekly.yaml", []byte("billing_modes: [weekly]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("tpu.yaml", []byte("reserved:\n  gpus:\n    TPU9: 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "typo.yaml"}, `typo.yaml:3: idle.utilpct: unknown key in idle "utilpct": want one of util_pct,`},
		{[]string{"--policy", "fastest"}, `--policy: invalid value "fastest": want a preset (gpufleet, static-peak, reactive, autostop) or a policy file (.yaml)`},
		{[]string{"--policy", "static-peak"}, `reserved.peak_sized: invalid value "true": want false for serve`},
		{[]string{"--policy", "peak.yaml"}, `reserved.peak_sized: invalid value "true": want false for serve`},
		{[]string{"--policy", "up.yaml"}, `--policy up.yaml: spot.rule: invalid value "uniform-progress": want fallback for serve (uniform-progress is a simulator baseline`},
		{[]string{"--policy", filepath.Join("no", "such.yaml")}, `load policy: open no/such.yaml`},
		{[]string{"--policy", "weekly.yaml", "--catalog", v100}, `--policy weekly.yaml: billing_modes: invalid value "[weekly]": want modes some offer of the catalog is sold in`},
		{[]string{"--policy", "tpu.yaml"}, `reserved.gpus.TPU9: invalid value "4": want a GPU model with a monthly plan in the catalog (`},
	} {
		code, _, errs := runCLI(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "admin token") {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.args, code, errs, tc.want)
		}
	}
}
