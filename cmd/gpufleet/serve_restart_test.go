package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/reltest"
)

// restartBound is how long a job submitted after a restart may take to
// run: the loop ticks every 50 ms in these tests and the sim provider's
// machines are ready a second after launch, so a loop that works runs it
// in a few seconds; one that fails every tick never does.
const restartBound = 30 * time.Second

// TestServeRestartSchedules stops "gpufleet serve" on the default (sim)
// provider while jobs stream in and its loop rents machines for them, by
// kill -9 and by SIGTERM, starts it again on the same store, and checks
// that the control loop works after the restart: jobs submitted then run
// within restartBound, so do the jobs acknowledged before the stop, the
// loop counts no failure, /readyz is 200, and no two live leases share a
// machine. The simulated machines die with the process while the store
// keeps their leases, and the new process's machines must not collide
// with them. On SQLite and PostgreSQL.
func TestServeRestartSchedules(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, stop := range []string{"kill9", "sigterm"} {
			t.Run(backend+"/"+stop, func(t *testing.T) {
				db := "gpufleet.db"
				if backend == "postgres" {
					db, _ = pgServeURL(t, "restart_")
				}
				serveRestartSchedules(t, backend, stop, db)
			})
		}
	}
}

// jobState is what the test reads of a job.
type jobState struct {
	ID      string    `json:"id"`
	State   string    `json:"state"`
	StateAt time.Time `json:"state_at"`
	Submit  time.Time `json:"submit"`
}

func serveRestartSchedules(t *testing.T, backend, stop, db string) {
	dir := t.TempDir()
	args := []string{"--db", db, "--wait-target", "core=0s", "--sim-delay", "1s"}
	cmd, token, base := startChild(t, dir, args...)
	if token == "" {
		t.Fatal("no admin token")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(base, method, path, key, body string) (int, []byte, error) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, nil
	}
	submit := func(base, id string) (int, error) {
		code, _, err := call(base, "POST", "/api/v1/jobs", "k-"+id, fmt.Sprintf(`{"id":%q,"team":"ml","gpus":1,"tier":"core","est_duration_seconds":3600}`, id))
		return code, err
	}
	jobs := func(base string) map[string]jobState {
		t.Helper()
		code, b, err := call(base, "GET", "/api/v1/jobs?limit=1000", "", "")
		if err != nil || code != 200 {
			t.Fatalf("list jobs: %d %v %s", code, err, b)
		}
		var page struct {
			Jobs []jobState `json:"jobs"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		out := map[string]jobState{}
		for _, j := range page.Jobs {
			out[j.ID] = j
		}
		return out
	}
	if code, b, err := call(base, "POST", "/api/v1/teams", "", `{"id":"ml","name":"ML"}`); code != 201 {
		t.Fatalf("team: %d %v %s", code, err, b)
	}

	// Load: writers submit until the server stops; the stop comes once
	// the first process has rented machines, while jobs still stream in
	// and the machines provision. All the jobs fit on the sim provider's 16 machines of
	// the cheapest offer (past that it refuses with no capacity).
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	const writers, each = 4, 3
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("before-%d-%d", w, i)
				code, err := submit(base, id)
				if err != nil {
					return // the server is gone
				}
				if code == 201 {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
				time.Sleep(60 * time.Millisecond)
			}
		})
	}
	deadline := time.Now().Add(restartBound)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the first process rented no machine within %s", restartBound)
		}
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if code, b, _ := call(base, "GET", "/api/v1/leases", "", ""); n >= writers && code == 200 && strings.Contains(string(b), `"provider_id"`) {
			break
		}
	}
	switch stop {
	case "kill9":
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	case "sigterm":
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve after SIGTERM: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop within 20 s of SIGTERM")
		}
	}
	wg.Wait()
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	if before == writers*each {
		t.Log("every submission was acknowledged before the stop: none was in flight")
	}

	_, again, base2 := startChild(t, dir, args...)
	if again != "" {
		t.Error("a new admin token after the restart")
	}
	const after = 4
	for i := range after {
		id := fmt.Sprintf("after-%d", i)
		if code, err := submit(base2, id); code != 201 {
			t.Fatalf("submit %s after the restart: %d %v", id, code, err)
		}
		acked[id] = true
	}
	var got map[string]jobState
	deadline = time.Now().Add(restartBound)
	for {
		got = jobs(base2)
		waiting := 0
		for id := range acked {
			if s := got[id].State; s != "running" && s != "succeeded" {
				waiting++
			}
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			for id := range acked {
				if s := got[id].State; s != "running" && s != "succeeded" {
					t.Errorf("job %s %q %s after the restart", id, s, restartBound)
				}
			}
			code, b, _ := call(base2, "GET", "/readyz", "", "")
			t.Fatalf("%d of %d jobs not running %s after the restart (readyz %d %s)", waiting, len(acked), restartBound, code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var waits []time.Duration
	for i := range after {
		j := got[fmt.Sprintf("after-%d", i)]
		waits = append(waits, j.StateAt.Sub(j.Submit))
	}
	slices.Sort(waits)

	if code, b, err := call(base2, "GET", "/readyz", "", ""); code != 200 {
		t.Errorf("readyz after the restart: %d %v %s", code, err, b)
	}
	if code, b, err := call(base2, "GET", "/metrics", "", ""); code != 200 || !strings.Contains(string(b), "\ngpufleet_loop_failures_total 0\n") {
		i := strings.Index(string(b), "gpufleet_loop_failures_total ")
		t.Errorf("metrics after the restart: %d %v, want no loop failure; %.60s", code, err, string(b[max(i, 0):]))
	}
	code, b, err := call(base2, "GET", "/api/v1/leases?limit=1000", "", "")
	if err != nil || code != 200 {
		t.Fatalf("leases: %d %v %s", code, err, b)
	}
	var leases struct {
		Leases []struct {
			ID         string `json:"id"`
			State      string `json:"state"`
			ProviderID string `json:"provider_id"`
		} `json:"leases"`
	}
	if err := json.Unmarshal(b, &leases); err != nil {
		t.Fatal(err)
	}
	live := map[string]string{}
	for _, l := range leases.Leases {
		if l.ProviderID == "" || l.State == "released" || l.State == "failed" || l.State == "reclaimed" {
			continue
		}
		if other, dup := live[l.ProviderID]; dup {
			t.Errorf("leases %s and %s both live on machine %s", other, l.ID, l.ProviderID)
		}
		live[l.ProviderID] = l.ID
	}
	t.Logf("%s, %s: %d jobs acknowledged before the stop, %d after; after the restart a job ran %s after its submission (median), %s at most; %d leases",
		backend, stop, before, after, waits[len(waits)/2], waits[len(waits)-1], len(leases.Leases))
	reltest.Record(t, reltest.Entry{Area: "faults", Done: fmt.Sprintf("%s of gpufleet serve (%s, sim provider) while jobs stream in and machines are rented, then restart", stop, backend),
		Amount: fmt.Sprintf("%d jobs acknowledged before the stop, %d submitted after", before, after),
		Held: fmt.Sprintf("every job runs within %s of the restart (after-restart jobs: median %s, max %s), no loop failure, readyz 200, no machine on two live leases",
			restartBound, waits[len(waits)/2], waits[len(waits)-1])})
}

func TestServeSimDelayFlag(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errs := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--sim-delay", "-1s")
	if code != 2 || !strings.Contains(errs, `--sim-delay: invalid value "-1s": want a duration >= 0`) {
		t.Errorf("exit %d, %q", code, errs)
	}
	if strings.Contains(errs, "admin token") {
		t.Errorf("a refused start minted the admin token: %q", errs)
	}
}
