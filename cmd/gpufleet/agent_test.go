package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// TestAgentFlags: bad flags are usage errors (status 2) that name the
// flag, its value and what is allowed.
func TestAgentFlags(t *testing.T) {
	t.Setenv("GPUFLEET_TOKEN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--token", "t"}, "server"},
		{[]string{"agent", "--server", "ftp://x", "--token", "t"}, `server: invalid value "ftp://x"`},
		{[]string{"agent", "--server", "http://x"}, "token"},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "magic"}, `gpu-source: invalid value "magic": want auto, nvml, nvidia-smi, dcgm, fake`},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "fake", "--data-dir", ""}, "data-dir"},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "fake", "--checkpoint-signal", "KILL"}, "checkpoint-signal"},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "fake", "--offer", "nope/x/y"}, `offer: invalid value "nope/x/y": want an offer of the catalog`},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "fake", "--log-level", "loud"}, `log-level: invalid value "loud"`},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "fake", "--fake-gpus", "0"}, `fake-gpus: invalid value "0": want 1..64 GPUs`},
		{[]string{"agent", "--server", "http://x", "--token", "t", "--gpu-source", "fake", "--fake-gpu-mem-mib", "-1"}, `fake-gpu-mem-mib: invalid value "-1"`},
	} {
		var out, errb bytes.Buffer
		// A flag that should have been refused starts the agent, which
		// then runs until this deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code := run(ctx, tc.args, &out, &errb)
		cancel()
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: status %d, stderr %q, want 2 naming %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestStaticProviderConfig: the static provider's file is checked field
// by field.
func TestStaticProviderConfig(t *testing.T) {
	c, err := loadCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	offer := c.Offers[0].ID
	for _, tc := range []struct{ file, want string }{
		{"suspect_after: soon\n", `suspect_after: invalid value "soon"`},
		{"suspect_after: 10s\ndown_after: 5s\n", "down_after"},
		{"checkpoint_root: relative/dir\n", "checkpoint_root"},
		{"machines:\n  - {agent: n1, offer: nope}\n", `machines[n1].offer: invalid value "nope"`},
		{"machines:\n  - {agent: n1, offer: " + offer + "}\n  - {agent: n1, offer: " + offer + "}\n", "machines[1].agent"},
		{"surprise: 1\n", "field surprise not found"},
	} {
		path := filepath.Join(t.TempDir(), "static.yaml")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := newStaticProvider(context.Background(), path, c, st, clock.Real{}, log)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.file, err, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "static.yaml")
	good := "suspect_after: 5s\ndown_after: 20s\ncheckpoint_root: /srv/ckpt\nmachines:\n  - {agent: n1, offer: " + offer + "}\n"
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newStaticProvider(context.Background(), path, c, st, clock.Real{}, log); err != nil {
		t.Errorf("good config: %v", err)
	}
}

const staticChildEnv = "GPUFLEET_TEST_STATIC_CHILD"

// TestStaticChild is a process of TestServeStaticWithAgent (serve or
// agent, its arguments in the environment); it does nothing in a normal
// run.
func TestStaticChild(t *testing.T) {
	args := os.Getenv(staticChildEnv)
	if args == "" {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	os.Exit(run(ctx, strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

func startStaticChild(t *testing.T, dir string, args ...string) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStaticChild$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), staticChildEnv+"="+strings.Join(args, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stderr
}

// TestServeStaticWithAgent runs "gpufleet serve --provider static" and a
// "gpufleet agent" process with the fake GPU source: the agent joins
// with its offer and GPUs and shows as an ok node; killed, it goes
// suspect and then down on the thresholds of the provider's file.
func TestServeStaticWithAgent(t *testing.T) {
	dir := t.TempDir()
	c, err := loadCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	offer := c.Offers[0].ID
	cfg := filepath.Join(dir, "static.yaml")
	if err := os.WriteFile(cfg, []byte("suspect_after: 500ms\ndown_after: 1s\ncheckpoint_root: "+dir+"/ckpt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := startStaticChild(t, dir, "serve", "--addr", "127.0.0.1:0", "--tick", "50ms", "--provider", "static", "--provider-config", cfg)
	var token, base string
	sc := bufio.NewScanner(stderr)
	for base == "" && sc.Scan() {
		line := sc.Text()
		if _, tok, ok := strings.Cut(line, "admin token (shown once, store it now): "); ok {
			token = tok
		}
		if _, rest, ok := strings.Cut(line, "addr=http://"); ok {
			base = "http://" + strings.Fields(rest)[0]
		}
	}
	if base == "" || token == "" {
		t.Fatal("server printed no address or token")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	call := func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil {
			_ = json.Unmarshal(b, out)
		}
		return resp.StatusCode
	}
	var tok struct {
		Secret string `json:"secret"`
	}
	if code := call("POST", "/api/v1/tokens", `{"role":"agent","name":"fleet"}`, &tok); code != 201 || tok.Secret == "" {
		t.Fatalf("agent token: %d", code)
	}
	agent, agentErr := startStaticChild(t, dir, "agent", "--server", base, "--token", tok.Secret, "--gpu-source", "fake",
		"--data-dir", filepath.Join(dir, "agent"), "--agent-id", "box-1", "--offer", offer,
		"--sample-interval", "50ms", "--heartbeat-interval", "100ms")
	go func() { _, _ = io.Copy(io.Discard, agentErr) }()
	type node struct {
		ID, State, Offer string
		GPUs             []json.RawMessage
	}
	nodes := func() []node {
		var p struct{ Nodes []node }
		call("GET", "/api/v1/nodes", "", &p)
		return p.Nodes
	}
	wait := func(what string, cond func([]node) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ns := nodes()
			if cond(ns) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v", what, ns)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("box-1 ok with its offer's GPUs", func(ns []node) bool {
		return len(ns) == 1 && ns[0].ID == "box-1" && ns[0].State == "ok" && ns[0].Offer == offer && len(ns[0].GPUs) == c.Offers[0].GPUs
	})
	if err := agent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wait("box-1 down", func(ns []node) bool { return len(ns) == 1 && ns[0].State == "down" })
	var evs struct {
		Events []struct{ Kind, Subject, Reason string }
	}
	call("GET", "/api/v1/events?subject=box-1", "", &evs)
	kinds := map[string]bool{}
	for _, e := range evs.Events {
		kinds[e.Kind] = true
		if want := fmt.Sprintf(", %d GPUs,", c.Offers[0].GPUs); e.Kind == "agent.joined" && !strings.Contains(e.Reason, want) {
			t.Errorf("agent.joined says %q, want %q: the GPUs nodes shows", e.Reason, want)
		}
	}
	for _, k := range []string{"agent.joined", "agent.suspect", "agent.down"} {
		if !kinds[k] {
			t.Errorf("no %s event for box-1: %v", k, kinds)
		}
	}

	// An agent given a token that is not an agent token (the admin's)
	// gets 403s: it exits with status 1 saying so, instead of retrying.
	wrong, wrongErr := startStaticChild(t, dir, "agent", "--server", base, "--token", token, "--gpu-source", "fake",
		"--data-dir", filepath.Join(dir, "agent-2"), "--agent-id", "box-2", "--heartbeat-interval", "100ms")
	exited := make(chan error, 1)
	var msg []byte
	go func() {
		msg, _ = io.ReadAll(wrongErr) // to EOF: the process has exited
		exited <- wrong.Wait()
	}()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(msg), "rejects this agent's token") {
			t.Errorf("agent with the admin token: %v, stderr %s; want status 1 saying the token is rejected", err, msg)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an agent with the admin token still runs after 20 s")
	}
}
