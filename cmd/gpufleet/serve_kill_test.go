package main

import (
	"bufio"
	"fmt"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

const serveChildEnv = "GPUFLEET_TEST_SERVE_CHILD"

// TestServeChild is the server process of TestServeKill9 and the other
// tests that stop a server (kill -9, SIGTERM) and start it again; it does
// nothing in a normal run.
func TestServeChild(t *testing.T) {
	if os.Getenv(serveChildEnv) == "" {
		return
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--tick", "50ms"}
	if extra := os.Getenv(serveArgsEnv); extra != "" {
		args = append(args, strings.Split(extra, "\n")...)
	}
	os.Exit(mainArgs(args, os.Stdout, os.Stderr))
}

// serveArgsEnv passes TestServeChild more serve flags, one per line.
const serveArgsEnv = "GPUFLEET_TEST_SERVE_ARGS"

// startChild starts the server process in dir and returns it with the
// admin token it printed (empty on a later start) and its base URL.
func startChild(t *testing.T, dir string, args ...string) (cmd *exec.Cmd, token, base string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestServeChild$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), serveChildEnv+"=1", serveArgsEnv+"="+strings.Join(args, "\n"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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
	if base == "" {
		t.Fatal("server printed no address")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return cmd, token, base
}

// TestServeKill9 kills the server with SIGKILL in the middle of a stream
// of submissions and restarts it: every submission it acknowledged is
// there, and retrying the unacknowledged ones with their idempotency keys
// creates each job once.
func TestServeKill9(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { serveKill9(t, "SQLite", "--db", "gpufleet.db") })
	t.Run("postgres", func(t *testing.T) {
		db, _ := pgServeURL(t, "kill9_")
		serveKill9(t, "PostgreSQL", "--db", db)
	})
}

func serveKill9(t *testing.T, backend string, args ...string) {
	dir := t.TempDir()
	cmd, token, base := startChild(t, dir, args...)
	if token == "" {
		t.Fatal("no admin token")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(base, path, key, body string) (int, error) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(base, "/api/v1/teams", "", `{"id":"ml","name":"ML"}`); code != 201 {
		t.Fatalf("team: %d %v", code, err)
	}
	var mu sync.Mutex
	acked := map[int]bool{}
	var wg sync.WaitGroup
	// Within the admin token's burst of the default rate limit.
	const writers, each, killAt = 4, 20, 30
	killed := make(chan struct{})
	var once sync.Once
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				code, err := post(base, "/api/v1/jobs", fmt.Sprintf("k%d", n), fmt.Sprintf(`{"id":"j%d","team":"ml","gpus":1,"tier":"core","est_duration_seconds":60}`, n))
				if err != nil {
					return // the server is gone
				}
				if code == 201 {
					mu.Lock()
					acked[n] = true
					if len(acked) == killAt {
						once.Do(func() { close(killed) })
					}
					mu.Unlock()
				}
			}
		})
	}
	go func() { wg.Wait(); once.Do(func() { close(killed) }) }()
	<-killed
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	wg.Wait()
	_, again, base2 := startChild(t, dir, args...)
	if again != "" {
		t.Error("a new admin token after the restart")
	}
	req := func(path string) int {
		r, _ := http.NewRequest("GET", base2+path, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mu.Lock()
	defer mu.Unlock()
	for n := range acked {
		if code := req(fmt.Sprintf("/api/v1/jobs/j%d", n)); code != 200 {
			t.Errorf("acknowledged job j%d: %d after the restart", n, code)
		}
	}
	// Every submission retried with its key: acknowledged ones replay
	// (200), lost ones are created now (201), none conflicts.
	for n := range writers * each {
		code, err := post(base2, "/api/v1/jobs", fmt.Sprintf("k%d", n), fmt.Sprintf(`{"id":"j%d","team":"ml","gpus":1,"tier":"core","est_duration_seconds":60}`, n))
		if err != nil || (acked[n] && code != 200) || (code != 200 && code != 201) {
			t.Fatalf("retry of j%d (acknowledged %v): %d %v", n, acked[n], code, err)
		}
	}
	t.Logf("%d of %d submissions acknowledged before the kill", len(acked), writers*each)
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "kill -9 of gpufleet serve (" + backend + ") during a stream of job submissions, then restart",
		Amount: fmt.Sprintf("%d of %d submissions acknowledged before the kill, all %d retried after", len(acked), writers*each, writers*each),
		Held:   "every acknowledged job there; retries with their keys replay (200) or create (201), none conflicts"})
}
