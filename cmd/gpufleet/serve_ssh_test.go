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
	"github.com/gpufleet/gpufleet/internal/provider/ssh/sshtest"
)

// sshCatalog is one offer of the demo catalog, so that the loop rents
// the one the SSH host is and the agent's fake GPUs (sized from the
// embedded demo catalog) match it.
const sshCatalog = `currency: USD
offers:
  - id: aws/us-east-1/g5.xlarge
    provider: aws
    region: us-east-1
    instance_type: g5.xlarge
    gpu_model: NVIDIA A10G
    gpus: 1
    gpu_memory_gib: 24
    vcpus: 4
    memory_gib: 16
    plans:
      - mode: on-demand
        price: 1.006
        per: hour
        granularity: 1 second
        min_charge: 1 minute
`

// TestServeSSHProvider runs "gpufleet serve --provider ssh" against
// Debian's sshd on loopback: a submitted job makes the loop acquire the
// host; the provider copies gpufleet there and starts its agent, which
// joins with its token and lease; the job runs and exits 0; the idle
// machine is released, which stops the agent's process group.
func TestServeSSHProvider(t *testing.T) {
	srv := sshtest.Start(t)
	t.Chdir(t.TempDir())
	remote := filepath.Join(t.TempDir(), "remote")
	t.Cleanup(func() { killAgents(remote) })
	cfg := writeFile(t, "ssh.yaml", `poll_interval: 500ms
stop_grace: 5s
binary: `+cliBinary(t)+`
agent_args: [--heartbeat-interval, 1s, --sample-interval, 1s]
hosts:
  - name: loop1
    address: `+srv.Addr+`
    user: `+srv.User+`
    identity_file: `+srv.Key+`
    known_hosts: `+srv.KnownHosts+`
    offer: aws/us-east-1/g5.xlarge
    fake_gpus: 1
    remote_dir: `+remote+`
`)
	cat := writeFile(t, "catalog.yaml", sshCatalog)
	pol := writeFile(t, "quick.yaml", "name: quick\nbase: reactive\nrelease:\n  min_idle: 1s\n  min_hold: 1s\n")
	token, base, stop := serveWith(t, "--provider", "ssh", "--provider-config", cfg, "--catalog", cat, "--policy", pol,
		"--tick", "200ms", "--wait-target", "core=0s")
	defer stop()
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
	waitUntil(t, 60*time.Second, "job j1 succeeded", func() (bool, string) {
		j, err := c.GetJob(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		return j.State == "succeeded", j.State
	})
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("the job's process did not run on GPU 0: %q %v", b, err)
	}
	leases, err := c.ListLeases(ctx, client.PageFilter{})
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases: %+v %v", leases, err)
	}
	l := leases.Leases[0]
	if l.ProviderID != "loop1/"+l.ID {
		t.Errorf("lease %s has machine %q, want loop1/%s", l.ID, l.ProviderID, l.ID)
	}
	pid := agentPID(t, remote, l.ID)
	if pid == 0 {
		t.Fatalf("no agent pid file for lease %s under %s", l.ID, remote)
	}
	// Idle past min_idle, the machine is released and its agent stopped.
	waitUntil(t, 30*time.Second, "lease released and agent stopped", func() (bool, string) {
		leases, err := c.ListLeases(ctx, client.PageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		st := leases.Leases[0].State
		return st == "released" && syscall.Kill(-pid, 0) != nil, st
	})
	if _, err := os.Stat(filepath.Join(remote, "agents", l.ID+".pid")); err == nil {
		t.Error("the pid file outlived the release")
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := f()
		if ok {
			return
		}
		last = state
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("not %s after %s (last: %s)", what, d, last)
}

func agentPID(t *testing.T, remote, lease string) int {
	b, err := os.ReadFile(filepath.Join(remote, "agents", lease+".pid"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// killAgents kills what agents a failed test left under remote.
func killAgents(remote string) {
	files, _ := filepath.Glob(filepath.Join(remote, "agents", "*.pid"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			_ = syscall.Kill(-n, syscall.SIGKILL)
		}
	}
}

// TestServeSSHConfig: a missing config, or a host whose offer the
// catalog lacks, stops serve with an error that names it.
func TestServeSSHConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	if code, _, stderr := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--provider", "ssh"); code == 0 || !strings.Contains(stderr, "--provider-config") {
		t.Errorf("no config: exit %d, %s", code, stderr)
	}
	cfg := writeFile(t, "ssh.yaml", "hosts: [{address: 10.0.0.1, user: u, known_hosts: k, offer: nope/none}]\n")
	if code, _, stderr := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--provider", "ssh", "--provider-config", cfg); code == 0 || !strings.Contains(stderr, "hosts[0].offer") {
		t.Errorf("unknown offer: exit %d, %s", code, stderr)
	}
	cfg = writeFile(t, "ssh.yaml", "hosts: [{address: 10.0.0.1, user: u, offer: nope/none}]\n")
	if code, _, stderr := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--provider", "ssh", "--provider-config", cfg); code == 0 || !strings.Contains(stderr, "known_hosts") {
		t.Errorf("no known_hosts: exit %d, %s", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "gpufleet ") {
		t.Errorf("version: exit %d, %q %q", code, stdout, stderr)
	}
}
