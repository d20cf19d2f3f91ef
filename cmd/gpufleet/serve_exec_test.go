package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
)

// TestServeExecProvider runs "gpufleet serve --provider exec" over the
// example script: a submitted job makes the loop acquire a machine
// through the script (a file in its state directory), and the job runs
// on it to the end.
func TestServeExecProvider(t *testing.T) {
	t.Chdir(t.TempDir())
	state := t.TempDir()
	t.Cleanup(func() { stopExecAgents(t, state) })
	cfg := writeFile(t, "exec.yaml", "script: "+exampleScript(t)+"\ntimeout: 20s\npoll_interval: 1s\nenv:\n  GPUFLEET_EXEC_STATE: "+state+
		"\n  GPUFLEET_EXEC_AGENT: "+cliBinary(t)+"\n")
	token, base, _ := serveWith(t, "--provider", "exec", "--provider-config", cfg, "--tick", "200ms", "--wait-target", "core=0s")
	c, err := client.New(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateTeam(ctx, api.TeamRequest{ID: "ml", Name: "ML"}); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	if _, _, err := c.SubmitJob(ctx, api.JobRequest{ID: "j1", Team: "ml", Tier: "core", GPUs: 1, EstDurationSeconds: 2,
		Command: []string{"sh", "-c", "echo $CUDA_VISIBLE_DEVICES > " + marker}}, ""); err != nil {
		t.Fatal(err)
	}
	// With --wait-target core=0s the fleet rents at once, and the
	// script's machine is ready at once.
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := c.GetJob(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		if j.State == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s after 60 s", j.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The job ran as a process of the machine's agent, which the script
	// started with the server's bootstrap.
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("the job's process did not run on GPU 0: %q %v", b, err)
	}
	leases, err := c.ListLeases(ctx, client.PageFilter{})
	if err != nil || len(leases.Leases) == 0 {
		t.Fatalf("leases: %+v %v", leases, err)
	}
	files, _ := filepath.Glob(filepath.Join(state, "machines", "m-*"))
	if len(files) != len(leases.Leases) {
		t.Errorf("%d machine files for %d leases", len(files), len(leases.Leases))
	}
	for _, l := range leases.Leases {
		if !strings.HasPrefix(l.ProviderID, "m-") {
			t.Errorf("lease %s has machine %q, not one of the script's", l.ID, l.ProviderID)
		}
		if _, err := os.Stat(filepath.Join(state, "machines", l.ProviderID)); err != nil {
			t.Errorf("lease %s: %v", l.ID, err)
		}
	}
}

// stopExecAgents stops the agents the example script started in state
// (each leads its own session).
func stopExecAgents(t *testing.T, state string) {
	files, _ := filepath.Glob(filepath.Join(state, "machines", "m-*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			if pid, ok := strings.CutPrefix(line, "agent_pid="); ok && pid != "" && pid != "''" {
				if n, err := strconv.Atoi(pid); err == nil {
					_ = syscall.Kill(-n, syscall.SIGKILL)
				}
			}
		}
	}
}

// exampleScript is the absolute path of examples/exec-provider/provider.sh.
func exampleScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(repoRoot, "examples", "exec-provider", "provider.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// repoRoot is set before any test changes directory.
var repoRoot = func() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}()

func TestLoadExecConfig(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("script: provider.sh\ntimeout: 5s\npoll_interval: 2s\nmax_output_bytes: 4096\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadExecConfig(ok)
	if err != nil || cfg.Script != filepath.Join(dir, "provider.sh") || cfg.Timeout != 5*time.Second || cfg.PollInterval != 2*time.Second || cfg.MaxOutput != 4096 {
		t.Errorf("config: %+v %v", cfg, err)
	}
	for text, want := range map[string]string{"script: x\ntimout: 5s\n": "timout", "script: x\ntimeout: soon\n": "timeout", "script: x\npoll_interval: -1s\n": "poll_interval"} {
		p := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadExecConfig(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", text, err, want)
		}
	}
	if _, err := newExecProvider(context.Background(), ok, nil, nil, nil, ""); err == nil || !strings.Contains(err.Error(), "script") {
		t.Errorf("a missing script: %v", err)
	}
}
