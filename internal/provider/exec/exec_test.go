package exec

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

const example = "../../../examples/exec-provider/provider.sh"

// exampleProvider runs the example script over a fresh state directory.
func exampleProvider(t *testing.T, env map[string]string) (*Provider, string) {
	t.Helper()
	dir := t.TempDir()
	e := map[string]string{"GPUFLEET_EXEC_STATE": dir}
	for k, v := range env {
		e[k] = v
	}
	p, err := New(Config{Script: example, Env: e, Timeout: 10 * time.Second, PollInterval: time.Minute,
		Offer: func(id string) (*core.Offer, bool) { return &core.Offer{ID: id, Provider: "idc", GPUs: 8}, true }})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// script writes an executable bash script with body and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provider.sh")
	if err := os.WriteFile(path, []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExampleScript(t *testing.T) {
	ctx := context.Background()
	p, _ := exampleProvider(t, nil)
	req := provider.AcquireRequest{ClientToken: "L1", OfferID: "idc/cd/v100x8", Mode: core.Weekly}
	m, err := p.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if m.ProviderID == "" || m.ClientToken != "L1" || m.OfferID != req.OfferID || m.Mode != core.Weekly || m.State != provider.Ready || m.LaunchedAt.IsZero() {
		t.Fatalf("acquire: %+v", m)
	}
	again, err := p.Acquire(ctx, req)
	if err != nil || again.ProviderID != m.ProviderID {
		t.Fatalf("acquire with the same token: %+v %v, want machine %s again", again, err, m.ProviderID)
	}
	other, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: req.OfferID, Mode: core.OnDemand})
	if err != nil || other.ProviderID == m.ProviderID {
		t.Fatalf("another token: %+v %v", other, err)
	}
	ms, err := p.List(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("list: %+v %v", ms, err)
	}
	d, err := p.Describe(ctx, m.ProviderID)
	if err != nil || d.ProviderID != m.ProviderID || d.State != provider.Ready {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if err := p.Release(ctx, m.ProviderID); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx, m.ProviderID); err != nil {
		t.Errorf("release twice: %v", err)
	}
	if err := p.Release(ctx, "m-nope"); err != nil {
		t.Errorf("release unknown: %v", err)
	}
	ms, err = p.List(ctx)
	if err != nil || len(ms) != 1 || ms[0].ProviderID != other.ProviderID {
		t.Fatalf("list after release: %+v %v", ms, err)
	}
	if _, err := p.Describe(ctx, "m-nope"); !errors.Is(err, provider.ErrUnknownMachine) {
		t.Errorf("describe unknown: %v, want ErrUnknownMachine", err)
	}
}

// TestPoll: a machine that becomes ready after its acquire is reported
// once; one that vanishes without a release is reported failed.
func TestPoll(t *testing.T) {
	ctx := context.Background()
	// The script counts whole seconds (date +%s): with a one-second
	// delay the first poll saw the machine ready whenever a second began
	// between the acquire and the poll, which a loaded machine made
	// likely (3 runs in 15). With two seconds it takes a call of over a
	// second to get there.
	p, dir := exampleProvider(t, map[string]string{"EXEC_READY_AFTER": "2"})
	m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "o", Mode: core.OnDemand})
	if err != nil || m.State != provider.Provisioning {
		t.Fatalf("acquire: %+v %v", m, err)
	}
	now := time.Now()
	if evs, err := p.Poll(ctx, now); err != nil || len(evs) != 0 {
		t.Fatalf("poll while provisioning: %+v %v", evs, err)
	}
	time.Sleep(2100 * time.Millisecond)
	if evs, err := p.Poll(ctx, now.Add(30*time.Second)); err != nil || len(evs) != 0 {
		t.Fatalf("poll before the interval: %+v %v", evs, err)
	}
	evs, err := p.Poll(ctx, now.Add(time.Minute))
	if err != nil || len(evs) != 1 || evs[0].Machine.State != provider.Ready || evs[0].Machine.ProviderID != m.ProviderID {
		t.Fatalf("poll after ready: %+v %v", evs, err)
	}
	if evs, err := p.Poll(ctx, now.Add(2*time.Minute)); err != nil || len(evs) != 0 {
		t.Fatalf("poll again: %+v %v", evs, err)
	}
	if err := os.Remove(filepath.Join(dir, "machines", m.ProviderID)); err != nil {
		t.Fatal(err)
	}
	evs, err = p.Poll(ctx, now.Add(3*time.Minute))
	if err != nil || len(evs) != 1 || evs[0].Machine.State != provider.Failed {
		t.Fatalf("poll after the machine vanished: %+v %v", evs, err)
	}

	// A restarted server: its first poll records the machines it did not
	// acquire itself (reconciliation has seen them), and reports their
	// later changes.
	m2, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "o", Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	restarted, err := New(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := restarted.Poll(ctx, now); err != nil || len(evs) != 0 {
		t.Fatalf("first poll after a restart over a ready machine: %+v %v", evs, err)
	}
	if err := os.Remove(filepath.Join(dir, "machines", m2.ProviderID)); err != nil {
		t.Fatal(err)
	}
	if evs, err := restarted.Poll(ctx, now.Add(time.Minute)); err != nil || len(evs) != 1 || evs[0].Machine.ProviderID != m2.ProviderID || evs[0].Machine.State != provider.Failed {
		t.Fatalf("after a restart, a machine that vanished: %+v %v", evs, err)
	}
}

func TestNoCapacity(t *testing.T) {
	p, _ := exampleProvider(t, map[string]string{"EXEC_CAPACITY": "1"})
	ctx := context.Background()
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "o", Mode: core.OnDemand}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "o", Mode: core.OnDemand})
	if !errors.Is(err, provider.ErrCapacity) {
		t.Fatalf("over capacity: %v, want ErrCapacity", err)
	}
}

// TestScriptFailures: every way a script can go wrong is an error naming
// the script and the operation, and saying what was wrong.
func TestScriptFailures(t *testing.T) {
	cases := []struct {
		name, body string
		is         error
		want       []string
	}{
		{"non-zero exit", `echo "cloud says: quota exceeded in region cd" >&2; exit 3`, nil, []string{"exit status 3", "quota exceeded in region cd"}},
		{"garbage", `echo "Welcome to the cloud CLI v2!"`, ErrProtocol, []string{"invalid JSON", "Welcome to the cloud"}},
		{"empty", `true`, ErrProtocol, []string{"no output"}},
		{"two objects", `echo '{"machines":[]} {"machines":[]}'`, ErrProtocol, []string{"more output after"}},
		{"unknown field", `echo '{"machines":[{"providerId":"m1"}]}'`, ErrProtocol, []string{"unknown field", "providerId"}},
		{"bad state", `echo '{"machines":[{"provider_id":"m1","state":"running","launched_at":"2026-03-01T00:00:00Z"}]}'`, ErrProtocol, []string{`state "running"`}},
		{"bad time", `echo '{"machines":[{"provider_id":"m1","state":"ready","launched_at":"yesterday"}]}'`, ErrProtocol, []string{`launched_at "yesterday"`}},
		{"no launch time", `echo '{"machines":[{"provider_id":"m1","state":"ready"}]}'`, ErrProtocol, []string{"without launched_at"}},
		{"listed twice", `echo '{"machines":[{"provider_id":"m1","state":"failed"},{"provider_id":"m1","state":"failed"}]}'`, ErrProtocol, []string{"listed twice"}},
		{"error without code", `echo '{"error":{"message":"oops"}}'`, ErrProtocol, []string{"without a code"}},
		{"huge", `head -c 5000000 /dev/zero | tr '\0' 'x'`, ErrTooMuchOutput, []string{"over 65536 bytes"}},
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "exec-provider scripts that fail or print garbage (non-zero exit, non-JSON, empty, two objects, unknown fields, bad states and times, 5 MB of output)",
		Amount: fmt.Sprintf("%d kinds of broken script", len(cases)),
		Held:   "each a clear error naming the script, the operation and what was wrong, under 4 KiB"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := script(t, tc.body)
			p, err := New(Config{Script: path, Timeout: 10 * time.Second, MaxOutput: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.List(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v, want one wrapping %v", err, tc.is)
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Script != path || ce.Op != OpList {
				t.Errorf("error %v is not a CallError for %s list", err, path)
			}
			for _, w := range append(tc.want, "provider.sh list") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(err.Error()) > 4<<10 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestTimeoutKillsGroup: a script that hangs, with a child of its own,
// is stopped at the timeout, child included.
func TestTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	path := script(t, `sleep 300 & echo $! > `+pidFile+`; echo "starting..." >&2; wait`)
	p, err := New(Config{Script: path, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "L1", OfferID: "o", Mode: core.OnDemand})
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "provider.sh acquire") || !strings.Contains(err.Error(), "timed out after 300ms") || !strings.Contains(err.Error(), "starting...") {
		t.Fatalf("hang: %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("the call took %s for a 300ms timeout", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the script's child %d outlived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "an exec-provider script that hangs, with a child process of its own",
		Amount: fmt.Sprintf("1 hang, 300 ms timeout, the call returned after %s", took.Round(time.Millisecond)),
		Held:   "a timeout error naming the script and its stderr; the script and its child both killed"})
}

// alive reports whether pid runs (a zombie waiting for its reaper does
// not count).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestAcquireChecksToken(t *testing.T) {
	path := script(t, `echo '{"machine":{"provider_id":"m1","client_token":"someone-else","state":"ready","launched_at":"2026-03-01T00:00:00Z"}}'`)
	p, err := New(Config{Script: path})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "L1", OfferID: "o", Mode: core.OnDemand})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), `client_token "someone-else", want "L1"`) {
		t.Errorf("a machine of another token: %v", err)
	}
}

func TestConfig(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "x.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{}, "script"},
		{Config{Script: "/nope/provider.sh"}, "script"},
		{Config{Script: notExec}, "script"},
		{Config{Script: example, Timeout: -time.Second}, "timeout"},
		{Config{Script: example, Scripts: map[string]string{"launch": example}}, "scripts"},
	} {
		_, err := New(tc.cfg)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a field error for %s", tc.cfg, err, tc.field)
		}
	}
	// One script per operation is enough without a default.
	if _, err := New(Config{Scripts: map[string]string{OpAcquire: example, OpRelease: example, OpList: example, OpDescribe: example}}); err != nil {
		t.Errorf("per-operation scripts: %v", err)
	}
}

// bootingScript is a script that holds one machine, m1 of token L1,
// which its first list (and describe) shows provisioning and every later
// call ready: a machine that finishes booting between two calls.
func bootingScript(t *testing.T) string {
	t.Helper()
	calls := filepath.Join(t.TempDir(), "calls")
	return script(t, `n=$(cat `+calls+` 2>/dev/null || echo 0); echo $((n + 1)) > `+calls+`
state=ready; ready=',"ready_at":"2026-03-01T00:02:00Z"'
if [ "$n" -eq 0 ]; then state=provisioning ready=""; fi
m='{"provider_id":"m1","client_token":"L1","offer":"o","mode":"on-demand","state":"'$state'","launched_at":"2026-03-01T00:00:00Z"'$ready'}'
case "$1" in
list) echo '{"machines":['$m']}' ;;
*) echo '{"machine":'$m'}' ;;
esac`)
}

// TestPollAfterReconcile: a restarted server reconciles with List, then
// polls. A machine that List showed provisioning and that became ready
// before the first Poll is reported ready by that Poll: the server saw
// it provisioning and learns of the change from no one else. (The first
// poll used to record it silently, as if reconciliation had seen it
// ready, and its lease stayed provisioning for good.)
func TestPollAfterReconcile(t *testing.T) {
	ctx := context.Background()
	p, err := New(Config{Script: bootingScript(t), Timeout: 10 * time.Second, PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := p.List(ctx)
	if err != nil || len(ms) != 1 || ms[0].State != provider.Provisioning {
		t.Fatalf("reconcile's list: %+v %v", ms, err)
	}
	now := time.Date(2026, 3, 1, 0, 5, 0, 0, time.UTC)
	evs, err := p.Poll(ctx, now)
	if err != nil || len(evs) != 1 || evs[0].Machine.ProviderID != "m1" || evs[0].Machine.State != provider.Ready {
		t.Fatalf("first poll after reconcile saw m1 provisioning, now ready: %+v %v, want one ready event", evs, err)
	}
	if evs, err := p.Poll(ctx, now.Add(time.Minute)); err != nil || len(evs) != 0 {
		t.Fatalf("poll again: %+v %v, want nothing", evs, err)
	}

	// What List has shown is not reported again: reconciliation applied
	// it (an event for a machine already ready would reset its lease).
	q, err := New(Config{Script: bootingScript(t), Timeout: 10 * time.Second, PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Describe(ctx, "m1"); err != nil { // the script's first call: provisioning
		t.Fatal(err)
	}
	if ms, err := q.List(ctx); err != nil || len(ms) != 1 || ms[0].State != provider.Ready {
		t.Fatalf("list: %+v %v", ms, err)
	}
	if evs, err := q.Poll(ctx, now); err != nil || len(evs) != 0 {
		t.Fatalf("first poll after a list that showed m1 ready: %+v %v, want nothing", evs, err)
	}
}

// TestAcquireBootstrap: the acquire script reads the machine's bootstrap
// in its JSON input, flat: server_url, lease_id, join_token,
// join_expires, binary_url; without one, none of them.
func TestAcquireBootstrap(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "in.json")
	sh := script(t, `cat > `+out+`
echo '{"machine":{"provider_id":"m1","client_token":"L1","offer":"o","mode":"on-demand","state":"provisioning","launched_at":"2026-03-02T09:00:00Z"}}'`)
	p, err := New(Config{Script: sh, Timeout: 10 * time.Second, PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	req := provider.AcquireRequest{ClientToken: "L1", OfferID: "o", Mode: core.OnDemand,
		Bootstrap: provider.Bootstrap{ServerURL: "http://10.0.0.1:8080", LeaseID: "L1", JoinToken: "gpf_secret", Expires: exp, BinaryURL: "http://10.0.0.1:8080/bin"}}
	if _, err := p.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"server_url":"http://10.0.0.1:8080"`, `"lease_id":"L1"`, `"join_token":"gpf_secret"`, `"join_expires":"2026-03-02T09:30:00Z"`, `"binary_url":"http://10.0.0.1:8080/bin"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("acquire input %s lacks %s", b, want)
		}
	}
	req.Bootstrap = provider.Bootstrap{}
	if _, err := p.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	if b, _ = os.ReadFile(out); strings.Contains(string(b), "join_token") || strings.Contains(string(b), "server_url") {
		t.Errorf("acquire input without a bootstrap: %s", b)
	}
}
