package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/reltest"
)

// TestServeKill9DuringAcquisitions kills the server with SIGKILL while its
// loop is renting machines through the exec provider (whose machines
// outlive the server: they are files in the script's state directory,
// like a cloud's machines), then starts it again on the same store. After
// the restart has settled, the store and the provider agree: every
// machine the script holds is one live lease (none forgotten), no client
// token rented two machines and no two leases share one (none
// duplicated), and no acknowledged job is lost. On SQLite and PostgreSQL.
func TestServeKill9DuringAcquisitions(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { killDuringAcquisitions(t, "gpufleet.db", false) })
	t.Run("postgres", func(t *testing.T) {
		db, _ := pgServeURL(t, "kill_")
		killDuringAcquisitions(t, db, false)
	})
}

// TestServeKill9MachinesReadyDuringReconcile is the window the test above
// hit only when the machine was busy, made certain: the restarted
// server's first call, the reconciliation's list, answers with the
// machines still provisioning and returns only once they are all ready,
// so each of them turns ready between the reconciliation and the first
// poll. Their leases must become ready all the same (they stayed
// provisioning for good when the exec provider's first poll took what it
// listed as already seen).
func TestServeKill9MachinesReadyDuringReconcile(t *testing.T) {
	killDuringAcquisitions(t, "gpufleet.db", true)
}

// killDuringAcquisitions runs the kill and the restart on db; with
// slowReconcile, the restarted server's first list is answered with what
// the script saw and returned only after every machine has turned ready.
func killDuringAcquisitions(t *testing.T, db string, slowReconcile bool) {
	dir, state := outlivedDir(t), outlivedDir(t)
	// The script takes a while per call, so that the kill lands among
	// acquisitions; machines are ready two seconds after launch (eight
	// with slowReconcile, so that they are still provisioning when the
	// restarted server lists them).
	cfg := filepath.Join(dir, "exec.yaml")
	script := exampleScript(t)
	readyAfter := "2"
	slowFlag := filepath.Join(dir, "slow-next-list")
	if slowReconcile {
		readyAfter = "8"
		wrapper := filepath.Join(dir, "slow-list.sh")
		body := "#!/usr/bin/env bash\n" +
			"if [ \"$1\" = list ] && rm " + slowFlag + " 2>/dev/null; then\n" +
			"\tout=$(" + script + " list) || exit\n\tsleep 10\n\tprintf '%s\\n' \"$out\"\n\texit 0\nfi\n" +
			"exec " + script + " \"$@\"\n"
		if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		script = wrapper
	}
	if err := os.WriteFile(cfg, []byte("script: "+script+"\ntimeout: 20s\npoll_interval: 500ms\nenv:\n  GPUFLEET_EXEC_STATE: "+state+"\n  EXEC_READY_AFTER: \""+readyAfter+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--db", db, "--provider", "exec", "--provider-config", cfg, "--wait-target", "core=0s"}
	cmd, token, base := startChild(t, dir, args...)
	if token == "" {
		t.Fatal("no admin token")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(base, method, path, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := call(base, "POST", "/api/v1/teams", "", `{"id":"ml","name":"ML"}`); code != 201 {
		t.Fatalf("team: %d %s", code, b)
	}
	const jobs = 40
	acked := map[int]bool{}
	for n := range jobs {
		body := fmt.Sprintf(`{"id":"j%d","team":"ml","gpus":1,"tier":"core","est_duration_seconds":3600}`, n)
		if code, _ := call(base, "POST", "/api/v1/jobs", fmt.Sprintf("k%d", n), body); code == 201 {
			acked[n] = true
		}
	}
	// Kill once some machines exist and before all are rented.
	machines := func() []map[string]string {
		files, _ := filepath.Glob(filepath.Join(state, "machines", "m-*"))
		var out []map[string]string
		for _, f := range files {
			if strings.HasSuffix(f, ".tmp") {
				continue
			}
			out = append(out, readMachine(t, f))
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(machines()) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no machines rented within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	atKill := len(machines())
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if slowReconcile {
		// The script turns a machine ready when a call finds it old
		// enough, so its file may say provisioning after that time:
		// count by launch time, leaving the restart two seconds to list.
		young := 0
		for _, m := range machines() {
			if at, err := strconv.ParseInt(m["launched_epoch"], 10, 64); err == nil && time.Now().Unix()-at < 6 {
				young++
			}
		}
		if young == 0 {
			t.Fatal("no machine young enough to be provisioning when the restarted server lists: the test would prove nothing")
		}
		if err := os.WriteFile(slowFlag, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	_, again, base2 := startChild(t, dir, args...)
	if again != "" {
		t.Error("a new admin token after the restart")
	}
	// Let the restarted loop reconcile and finish renting: settled when
	// no lease is still requested and the machine count is stable.
	type lease struct {
		ID          string `json:"id"`
		State       string `json:"state"`
		ProviderID  string `json:"provider_id"`
		ClientToken string `json:"client_token"`
	}
	var leases []lease
	settled := time.Now().Add(90 * time.Second)
	for stable := 0; stable < 5; {
		if time.Now().After(settled) {
			t.Fatalf("did not settle within 90 s: %+v", leases)
		}
		time.Sleep(300 * time.Millisecond)
		code, b := call(base2, "GET", "/api/v1/leases?limit=1000", "", "")
		if code != 200 {
			continue
		}
		var page struct {
			Leases []lease `json:"leases"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		leases = page.Leases
		pending := false
		for _, l := range leases {
			if l.State == "requested" || l.State == "provisioning" {
				pending = true
			}
		}
		if pending {
			stable = 0
		} else {
			stable++
		}
	}
	live := map[string]lease{}
	tokens := map[string]string{}
	for _, l := range leases {
		if l.State == "released" || l.State == "failed" || l.State == "reclaimed" {
			continue
		}
		if prev, dup := live[l.ProviderID]; dup && l.ProviderID != "" {
			t.Errorf("machine %s held by leases %s and %s", l.ProviderID, prev.ID, l.ID)
		}
		live[l.ProviderID] = l
	}
	held := 0
	for _, m := range machines() {
		if prev, dup := tokens[m["token"]]; dup {
			t.Errorf("client token %s rented machines %s and %s", m["token"], prev, m["id"])
		}
		tokens[m["token"]] = m["id"]
		if m["state"] == "released" {
			continue
		}
		held++
		if _, ok := live[m["id"]]; !ok {
			t.Errorf("machine %s (%s) is held at the provider but is no live lease: forgotten", m["id"], m["state"])
		}
	}
	for id, l := range live {
		found := false
		for _, m := range machines() {
			if m["id"] == id && m["state"] != "released" {
				found = true
			}
		}
		if !found {
			t.Errorf("live lease %s (%s) has no machine at the provider", l.ID, l.State)
		}
	}
	for n := range acked {
		if code, _ := call(base2, "GET", fmt.Sprintf("/api/v1/jobs/j%d", n), "", ""); code != 200 {
			t.Errorf("acknowledged job j%d: %d after the restart", n, code)
		}
	}
	if held == 0 {
		t.Error("no machine held after the restart: the test proved nothing")
	}
	t.Logf("%s: %d machines at the kill, %d held after the restart, %d leases", db, atKill, held, len(leases))
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "kill -9 of serve while its loop rents machines through the exec provider, then restart on the same store",
		Amount: fmt.Sprintf("%d jobs, %d machines at the kill, %d held after the restart", jobs, atKill, held),
		Held:   "every provider machine one live lease, no client token rented twice, no lease without its machine, every acknowledged job kept"})
}

// outlivedDir is a temporary directory for a server that is killed and
// for its provider scripts, removed at the end once nothing writes there
// any more. A killed server's script calls run on (each in its own process
// group, as a cloud call in flight would): t.TempDir's removal, right
// after the kill, failed now and then with "directory not empty" while one
// still wrote a machine file. Removal is retried for 30 s (a script call
// is bounded by the test's 20 s timeout; a slow list sleeps 10 s).
func outlivedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gpufleet-kill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := os.RemoveAll(d)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove %s: %v (a provider script still writing after 30 s?)", d, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	return d
}

// readMachine reads one of the example script's machine files
// (name=value lines, values shell-quoted with %q, which for our ids and
// times is the bare value).
func readMachine(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			out[k] = strings.Trim(v, "'")
		}
	}
	return out
}
