package ssh_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/ssh"
	"github.com/gpufleet/gpufleet/internal/provider/ssh/sshtest"
)

// fakeAgent writes a "gpufleet" that answers version and, as the agent,
// records its arguments and token in dir/agent.args, then sleeps.
func fakeAgent(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpufleet")
	script := `#!/bin/sh
case "$1" in
version) echo gpufleet-fake; exit 0 ;;
agent) printf '%s\n' "$*" "token=$GPUFLEET_TOKEN join=$GPUFLEET_JOIN_TOKEN" "pid=$$" >'` + dir + `/agent.args'; exec sleep 600 ;;
esac
exit 2
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func newProvider(t *testing.T, cfg ssh.Config) *ssh.Provider {
	t.Helper()
	if cfg.StateFile == "" {
		cfg.StateFile = filepath.Join(t.TempDir(), "state.json")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Millisecond
	}
	cfg.ConnectTimeout = 5 * time.Second
	cfg.StopGrace = 2 * time.Second
	cfg.Log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	if cfg.Join == nil {
		cfg.Join = func() (string, string, error) { return "http://127.0.0.1:1", "secret-join-token", nil }
	}
	p, err := ssh.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// waitFor polls p until the machine id's state is want, and returns the
// event.
func waitFor(t *testing.T, p *ssh.Provider, id string, want provider.State) provider.Event {
	t.Helper()
	// Generous: on a loaded machine copying the binary over ssh alone
	// has taken 16 s; this waits for an outcome, it times nothing.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := p.Poll(context.Background(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Machine.ProviderID != id {
				continue
			}
			if e.Machine.State != want {
				t.Fatalf("machine %s: %s, want %s (reason: %s)", id, e.Machine.State, want, p.Reason(id))
			}
			return e
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("machine %s not %s after 90 s", id, want)
	return provider.Event{}
}

func alive(pid int) bool {
	if syscall.Kill(-pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// TestAcquireStartsAgentReleaseStopsIt: over a real sshd on loopback,
// Acquire copies the binary, starts the agent with the lease's token
// (not on its command line), Poll reports it ready, a restarted provider
// still holds the host, and Release stops the agent's process group.
func TestAcquireStartsAgentReleaseStopsIt(t *testing.T) {
	srv := sshtest.Start(t)
	out := t.TempDir()
	remote := filepath.Join(t.TempDir(), "remote")
	state := filepath.Join(t.TempDir(), "state.json")
	host := ssh.Host{Name: "gpu1", Address: srv.Addr, User: srv.User, IdentityFile: srv.Key, KnownHosts: srv.KnownHosts,
		Offer: "lab/h100x1", FakeGPUs: 1, RemoteDir: remote}
	cfg := ssh.Config{Hosts: []ssh.Host{host}, StateFile: state, Binary: fakeAgent(t, out)}
	p := newProvider(t, cfg)
	ctx := context.Background()
	m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "lab/h100x1", Mode: core.OnDemand,
		Bootstrap: provider.Bootstrap{ServerURL: "http://10.9.9.9:8080", LeaseID: "L1", JoinToken: "jt-L1"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.State != provider.Provisioning || m.ProviderID != "gpu1/L1" {
		t.Fatalf("acquired %+v", m)
	}
	ev := waitFor(t, p, m.ProviderID, provider.Ready)
	if ev.Machine.ClientToken != "L1" || ev.Machine.ReadyAt.IsZero() {
		t.Errorf("ready event %+v", ev)
	}
	var args string
	for range 100 {
		b, _ := os.ReadFile(filepath.Join(out, "agent.args"))
		if args = string(b); strings.Contains(args, "pid=") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"agent --server http://10.9.9.9:8080 --lease L1 --offer lab/h100x1 --agent-id gpu1-L1 --gpu-source fake --fake-gpus 1 --data-dir " + remote + "/agents/L1", "token= join=jt-L1"} {
		if !strings.Contains(args, want) {
			t.Errorf("agent args %q lack %q", args, want)
		}
	}
	if strings.Contains(strings.Split(args, "\n")[0], "jt-L1") {
		t.Errorf("the token is on the agent's command line: %q", args)
	}
	if b, err := os.ReadFile(filepath.Join(remote, "bin", "gpufleet")); err != nil || !strings.Contains(string(b), "gpufleet-fake") {
		t.Errorf("binary not copied: %v", err)
	}
	pidText, _ := os.ReadFile(filepath.Join(remote, "agents", "L1.pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil || !alive(pid) {
		t.Fatalf("agent pid %q: %v, alive %v", pidText, err, err == nil && alive(pid))
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })

	// Idempotent by token; the one host is taken.
	if again, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "lab/h100x1"}); err != nil || again.ProviderID != m.ProviderID || again.State != provider.Ready {
		t.Errorf("acquire again: %+v %v", again, err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "lab/h100x1"}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("a second lease on the one host: %v, want ErrCapacity", err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L3", OfferID: "other"}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("an offer no host is: %v, want ErrCapacity", err)
	}

	// A restarted provider holds the host from the state file.
	_ = p.Close()
	p = newProvider(t, cfg)
	ms, err := p.List(ctx)
	if err != nil || len(ms) != 1 || ms[0].ProviderID != m.ProviderID || ms[0].State != provider.Ready {
		t.Fatalf("list after restart: %+v %v", ms, err)
	}
	if evs, err := p.Poll(ctx, time.Now()); err != nil || len(evs) != 0 {
		t.Errorf("poll after restart: %+v %v, want nothing new", evs, err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "lab/h100x1"}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("after restart, a second lease: %v, want ErrCapacity", err)
	}

	// Release stops the agent (SIGTERM to its group) and frees the host.
	if err := p.Release(ctx, m.ProviderID); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Error("the agent runs after release")
	}
	if ms, _ := p.List(ctx); len(ms) != 0 {
		t.Errorf("listed after release: %+v", ms)
	}
	if err := p.Release(ctx, m.ProviderID); err != nil {
		t.Errorf("second release: %v", err)
	}
	if err := p.Release(ctx, "nope"); err != nil {
		t.Errorf("unknown release: %v", err)
	}
	m2, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "lab/h100x1", Bootstrap: provider.Bootstrap{ServerURL: "http://x", JoinToken: "jt-L2"}})
	if err != nil || m2.ProviderID != "gpu1/L2" {
		t.Fatalf("the freed host: %+v %v", m2, err)
	}
	waitFor(t, p, m2.ProviderID, provider.Ready)
	if err := p.Release(ctx, m2.ProviderID); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v %v", st, err)
	}
}

// TestHostFailures: each way a host can fail its start is a failed
// machine whose reason names the host and the cause; it stays listed
// until released, and the release needs no host.
func TestHostFailures(t *testing.T) {
	srv := sshtest.Start(t)
	out := t.TempDir()
	base := ssh.Host{Address: srv.Addr, User: srv.User, IdentityFile: srv.Key, KnownHosts: srv.KnownHosts, Offer: "o", FakeGPUs: 1, RemoteDir: filepath.Join(t.TempDir(), "r")}
	const down = "127.0.0.1:1" // a port nobody listens on
	_, smiErr := exec.LookPath("nvidia-smi")
	cases := []struct {
		name string
		edit func(h *ssh.Host)
		want []string
		is   error
	}{
		{"wrong host key", func(h *ssh.Host) { h.KnownHosts = srv.WrongKnownHosts }, []string{"key mismatch", "wrong_known_hosts:1"}, ssh.ErrHostKey},
		{"unknown host key", func(h *ssh.Host) { h.KnownHosts = srv.EmptyKnownHosts }, []string{"holds no key", "ssh-keyscan"}, ssh.ErrHostKey},
		{"auth refused", func(h *ssh.Host) { h.IdentityFile = srv.OtherKey }, []string{"authentication refused for user " + srv.User, "other_id_ed25519"}, ssh.ErrAuth},
		{"host down", func(h *ssh.Host) { h.Address = down }, []string{"unreachable", "connection refused"}, ssh.ErrUnreachable},
	}
	if smiErr != nil {
		cases = append(cases, struct {
			name string
			edit func(h *ssh.Host)
			want []string
			is   error
		}{"no GPU", func(h *ssh.Host) { h.FakeGPUs = 0 }, []string{"no GPU", "nvidia-smi not found"}, ssh.ErrNoGPU})
	}
	var hosts []ssh.Host
	for _, tc := range cases {
		h := base
		h.Name = strings.ReplaceAll(tc.name, " ", "-")
		h.Offer = h.Name
		tc.edit(&h)
		hosts = append(hosts, h)
	}
	p := newProvider(t, ssh.Config{Hosts: hosts, Binary: fakeAgent(t, out)})
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L-" + name, OfferID: name})
			if err != nil {
				t.Fatal(err)
			}
			ev := waitFor(t, p, m.ProviderID, provider.Failed)
			if ev.Machine.EndedAt.IsZero() {
				t.Errorf("failed without an end: %+v", ev.Machine)
			}
			reason := p.Reason(m.ProviderID)
			for _, w := range append([]string{"host " + name + " (", tc.is.Error()[len("ssh provider: "):]}, tc.want...) {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q lacks %q", reason, w)
				}
			}
			ms, _ := p.List(ctx)
			found := false
			for _, lm := range ms {
				found = found || (lm.ProviderID == m.ProviderID && lm.State == provider.Failed)
			}
			if !found {
				t.Errorf("the failed machine is not listed: %+v", ms)
			}
			// The host is passed over for a while: no second lease fails on it.
			if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "again-" + name, OfferID: name}); !errors.Is(err, provider.ErrCapacity) {
				t.Errorf("acquire on the failed host: %v, want ErrCapacity", err)
			}
			if err := p.Release(ctx, m.ProviderID); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "agent.args")); err == nil {
		t.Error("an agent started on a failed host")
	}
}

// TestProbeNoGPU: a host without an offer is probed with
// nvidia-smi; one without it matches no offer and is passed over.
func TestProbeNoGPU(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this machine has nvidia-smi")
	}
	srv := sshtest.Start(t)
	p := newProvider(t, ssh.Config{Hosts: []ssh.Host{{Name: "plain", Address: srv.Addr, User: srv.User, IdentityFile: srv.Key, KnownHosts: srv.KnownHosts}},
		Offers: []core.Offer{{ID: "lab/t4", GPUModel: "NVIDIA T4", GPUs: 1}}})
	if _, err := p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "L1", OfferID: "lab/t4"}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("acquire on a host without GPUs: %v, want ErrCapacity", err)
	}
}

// TestHostGoesDown: a ready machine whose host stops answering is failed
// with the reason; its release cannot reach the host, so the machine is
// kept stopping (the host held, not free for another lease) and not
// forgotten, and the release fails with the host's name.
func TestHostGoesDown(t *testing.T) {
	srv := sshtest.Start(t)
	out := t.TempDir()
	remote := filepath.Join(t.TempDir(), "remote")
	p := newProvider(t, ssh.Config{UnreachableAfter: time.Millisecond, Binary: fakeAgent(t, out),
		Hosts: []ssh.Host{{Name: "gone", Address: srv.Addr, User: srv.User, IdentityFile: srv.Key, KnownHosts: srv.KnownHosts, Offer: "o", FakeGPUs: 1, RemoteDir: remote}}})
	ctx := context.Background()
	m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "o"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, m.ProviderID, provider.Ready)
	pidText, _ := os.ReadFile(filepath.Join(remote, "agents", "L1.pid"))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(pidText))); err == nil {
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	}
	srv.Stop()
	waitFor(t, p, m.ProviderID, provider.Failed)
	if r := p.Reason(m.ProviderID); !strings.Contains(r, "host gone (") || !strings.Contains(r, "unreachable since") {
		t.Errorf("reason %q", r)
	}
	if err := p.Release(ctx, m.ProviderID); err == nil || !strings.Contains(err.Error(), "host gone") {
		t.Errorf("release with the host down: %v, want an error naming it", err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "o"}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("the host is free while its agent may run: %v", err)
	}
	if ms, _ := p.List(ctx); len(ms) != 0 {
		t.Errorf("listed after the caller's release: %+v", ms)
	}
}
