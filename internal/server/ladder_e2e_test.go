package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	fleetpkg "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// submitCmd submits a one-GPU job of team ml running command.
func (f *fleet) submitCmd(id string, command ...string) {
	f.t.Helper()
	b, _ := json.Marshal(command)
	body := fmt.Sprintf(`{"id":%q,"team":"ml","gpus":1,"est_duration_seconds":1,"command":%s}`, id, b)
	if code := f.call(f.admin, "POST", "/api/v1/jobs", body, nil); code != 201 {
		f.t.Fatalf("submit %s: %d", id, code)
	}
}

// subjectEvents are the trail's events of kind about subject.
func (f *fleet) subjectEvents(kind, subject string) []core.Event {
	f.t.Helper()
	var out []core.Event
	for _, e := range f.events(kind) {
		if e.Subject == subject {
			out = append(out, e)
		}
	}
	return out
}

// TestFleetZombieFromProcessList: two jobs on two agents whose fake GPU
// source lists each run's process group as its GPU's process; one
// declares that it holds no GPU process (GPUFLEET_FAKE_GPU_PROCS=0). The
// agent reports the process lists, the server stores them with the
// samples, and the loop's zombie rung fires for that job alone after
// zombie_after: its unit fails with the reason, and its run is killed.
// The other, whose process the agent sees, runs on.
func TestFleetZombieFromProcessList(t *testing.T) {
	f := newFleetWith(t, fleetOpts{fakeGPU: true, fleet: fleetpkg.Config{IdleUtilPct: 20, IdleFor: time.Hour, NotifyAfter: time.Hour, ActAfter: time.Hour, ZombieAfter: 300 * time.Millisecond}},
		"node-1", "node-2")
	script, _ := filepath.Abs("testdata/steps.sh")
	f.submitCmd("ghost", "env", agent.EnvFakeProcs+"=0", "bash", script, "1000")
	f.submitCmd("worker", "bash", script, "1000")
	f.waitFor("a zombie event for ghost", func() bool { return len(f.subjectEvents("zombie", "ghost")) > 0 })
	f.waitFor("ghost failed", func() bool { return f.job("ghost").State == "failed" })
	f.waitFor("ghost's run killed", func() bool {
		for _, e := range f.subjectEvents("agent.job-exited", "ghost") {
			if e.Attrs["signal"] == "KILL" {
				return true
			}
		}
		return false
	})
	// The worker's samples name its run with a process: it is no zombie.
	f.waitFor("a sample listing worker's process", func() bool {
		ss, err := f.st.Samples().QuerySamples(f.ctx, store.SampleFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			for run, n := range s.Procs {
				if len(run) > 6 && run[:6] == "worker" && n == 1 {
					return true
				}
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond) // past zombie_after for the worker too
	if evs := f.subjectEvents("zombie", "worker"); len(evs) != 0 {
		t.Errorf("worker, whose process its agent sees, was taken for a zombie: %v", evs[0].Reason)
	}
	if j := f.job("worker"); j.State != "running" {
		t.Errorf("worker is %s, want running", j.State)
	}
	if evs := f.subjectEvents("zombie", "ghost"); !strings.Contains(evs[0].Reason, "no process") {
		t.Errorf("zombie reason %q: want it to say the agent saw no process", evs[0].Reason)
	}
}

// hookServer is a webhook endpoint that checks each body's signature and
// keeps the notices, answering fail(n) for the n-th request (from 1).
type hookServer struct {
	*httptest.Server
	secret []byte
	mu     sync.Mutex
	got    []Notice
	bad    int // requests whose signature did not verify
	n      atomic.Int64
}

func newHookServer(t *testing.T, secret string, fail func(n int64) int) *hookServer {
	h := &hookServer{secret: []byte(secret)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.n.Add(1)
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if !VerifySignature(h.secret, body, r.Header.Get(SignatureHeader)) {
			h.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if code := fail(n); code != 0 {
			w.WriteHeader(code)
			return
		}
		var no Notice
		if err := json.Unmarshal(body, &no); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		h.got = append(h.got, no)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) notices() ([]Notice, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Notice(nil), h.got...), h.bad
}

// TestFleetIdleLadderEveryRung: a job whose GPU idles climbs every rung
// live: the alert, the notify rung (a signed webhook the endpoint
// verifies, recorded as notify.sent), and the action (stop: the unit is
// cancelled and its run killed on the agent, and the team notified).
func TestFleetIdleLadderEveryRung(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "hook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The webhook records its attempts in its own store here: the fleet's
	// is made by newFleetWith; the trail below reads both.
	hook := newHookServer(t, "s3cret", func(int64) int { return 0 })
	wh, err := NewWebhook(WebhookConfig{URL: hook.URL, Secret: []byte("s3cret"), Store: st, Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleetWith(t, fleetOpts{fakeGPU: true, notify: wh,
		fleet: fleetpkg.Config{IdleUtilPct: 20, IdleFor: 200 * time.Millisecond, NotifyAfter: 200 * time.Millisecond, ActAfter: 200 * time.Millisecond, IdleAction: fleetpkg.IdleStop}},
		"node-1")
	script, _ := filepath.Abs("testdata/steps.sh")
	f.submitCmd("lazy", "bash", script, "1000") // declares no utilization: its GPU reads 0 %
	for _, kind := range []string{"idle-alert", "idle-notify", "idle-action"} {
		f.waitFor(kind+" for lazy", func() bool { return len(f.subjectEvents(kind, "lazy")) > 0 })
	}
	f.waitFor("lazy cancelled by the action", func() bool { return f.job("lazy").State == "cancelled" })
	f.waitFor("lazy's run killed", func() bool {
		for _, e := range f.subjectEvents("agent.job-exited", "lazy") {
			if e.Attrs["signal"] == "KILL" {
				return true
			}
		}
		return false
	})
	// Each rung is an alert in the store (the alerts API and the
	// dashboard read them), resolved once the cancelled unit leaves its
	// GPU.
	f.waitFor("lazy's three alerts stored, then resolved", func() bool {
		p, err := f.st.Alerts().ListAlerts(context.Background(), store.AlertFilter{Limit: store.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for _, a := range p.Items {
			if a.Unit == "lazy" && !a.Resolved.IsZero() && a.Team == "ml" && a.LeaseID != "" {
				kinds[a.Kind] = true
			}
		}
		return kinds["idle-alert"] && kinds["idle-notify"] && kinds["idle-action"]
	})
	f.waitFor("both notices at the webhook", func() bool { got, _ := hook.notices(); return len(got) >= 2 })
	got, bad := hook.notices()
	if bad != 0 {
		t.Errorf("%d webhook requests failed their signature check", bad)
	}
	kinds := map[string]Notice{}
	for _, n := range got {
		kinds[n.Kind] = n
		if n.Unit != "lazy" || n.Team != "ml" || n.LeaseID == "" || n.Reason == "" || n.ID == "" {
			t.Errorf("notice %+v: want unit lazy of team ml, its lease, a reason and an ID", n)
		}
	}
	if _, ok := kinds["idle-notify"]; !ok {
		t.Errorf("no idle-notify notice: %+v", got)
	}
	if a, ok := kinds["idle-action"]; !ok || a.Action != "stop" {
		t.Errorf("idle-action notice %+v (found %v), want action stop", a, ok)
	}
	if _, ok := kinds["idle-alert"]; ok {
		t.Errorf("the alert rung was sent: it is the dashboard's")
	}
	// Each delivery is recorded.
	waitUntil(t, "two notify.sent events", func() bool {
		p, err := st.Events().ListEvents(context.Background(), store.EventFilter{Kind: "notify.sent", Limit: store.MaxLimit})
		return err == nil && len(p.Items) >= 2
	})
}

// waitUntil polls cond for up to patience.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// webhookWorld is a Webhook on a manual clock and a SQLite store.
func webhookWorld(t *testing.T, url string, cfg WebhookConfig) (*Webhook, *clock.Manual, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(t0)
	cfg.URL, cfg.Secret, cfg.Store, cfg.Clock, cfg.Log = url, []byte("k"), st, clk, slog.New(slog.DiscardHandler)
	w, err := NewWebhook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, clk, st
}

// settle advances the manual clock through every backoff until w has
// settled what it was given.
func settle(t *testing.T, w *Webhook, clk *clock.Manual) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the webhook never settled")
		}
		if clk.Pending() > 0 {
			clk.Advance(time.Minute) // past any backoff
		}
		runtime.Gosched()
	}
}

// attempts lists the recorded attempts as "kind attempt status final".
func attempts(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	p, err := st.Events().ListEvents(context.Background(), store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Items {
		out = append(out, fmt.Sprintf("%s %s %s %s", e.Kind, e.Attrs["attempt"], e.Attrs["status"], e.Attrs["final"]))
	}
	return out
}

// TestWebhookRetries: a failing endpoint is retried with backoff on the
// loop's clock, each attempt recorded; a refusal (4xx) is not retried;
// past Attempts the notice is given up, and that is recorded too.
func TestWebhookRetries(t *testing.T) {
	n := Notice{ID: "idle-notify:lazy:L1/0:1", Kind: "idle-notify", At: t0, Unit: "lazy", Team: "ml", LeaseID: "L1", Reason: "idle"}
	tests := []struct {
		name string
		fail func(n int64) int
		want []string
	}{
		{"recovers", func(n int64) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return 0
		}, []string{"notify.failed 1 503 false", "notify.failed 2 503 false", "notify.sent 3 200 "}},
		{"gives up", func(int64) int { return http.StatusInternalServerError },
			[]string{"notify.failed 1 500 false", "notify.failed 2 500 false", "notify.failed 3 500 true"}},
		{"refused", func(int64) int { return http.StatusBadRequest }, []string{"notify.failed 1 400 true"}},
		{"rate limited", func(n int64) int {
			if n == 1 {
				return http.StatusTooManyRequests
			}
			return 0
		}, []string{"notify.failed 1 429 false", "notify.sent 2 200 "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hook := newHookServer(t, "k", tt.fail)
			w, clk, st := webhookWorld(t, hook.URL, WebhookConfig{Attempts: 3})
			if !w.Notify(n) {
				t.Fatal("queue full")
			}
			settle(t, w, clk)
			if got := attempts(t, st); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("attempts %q, want %q", got, tt.want)
			}
			if _, bad := hook.notices(); bad != 0 {
				t.Errorf("%d bad signatures", bad)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		w, clk, st := webhookWorld(t, url, WebhookConfig{Attempts: 2})
		w.Notify(n)
		settle(t, w, clk)
		if got := attempts(t, st); fmt.Sprint(got) != fmt.Sprint([]string{"notify.failed 1 0 false", "notify.failed 2 0 true"}) {
			t.Errorf("attempts %q", got)
		}
	})
}

// TestWebhookBackoff: the waits between attempts double from Backoff and
// stop at MaxBackoff.
func TestWebhookBackoff(t *testing.T) {
	hook := newHookServer(t, "k", func(int64) int { return http.StatusBadGateway })
	w, clk, st := webhookWorld(t, hook.URL, WebhookConfig{Attempts: 5, Backoff: time.Second, MaxBackoff: 3 * time.Second})
	w.Notify(Notice{ID: "x", Kind: "zombie", Unit: "u"})
	var at []time.Duration
	for i := 0; i < 5; i++ {
		waitUntil(t, "attempt "+strconv.Itoa(i+1), func() bool { return hook.n.Load() == int64(i+1) })
		at = append(at, clk.Now().Sub(t0))
		if i < 4 {
			waitUntil(t, "the backoff wait", func() bool { return clk.Pending() == 1 })
			// Advance a second at a time: the attempt comes when the wait ends.
			for hook.n.Load() == int64(i+1) {
				clk.Advance(time.Second)
				deadline := time.Now().Add(time.Second)
				for hook.n.Load() == int64(i+1) && clk.Pending() == 0 && time.Now().Before(deadline) {
					runtime.Gosched()
				}
			}
		}
	}
	want := []time.Duration{0, time.Second, 3 * time.Second, 6 * time.Second, 9 * time.Second}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("attempts at %v, want %v (1 s, 2 s, then 3 s apart)", at, want)
	}
	settle(t, w, clk)
	if got := attempts(t, st); len(got) != 5 || got[4] != "notify.failed 5 502 true" {
		t.Errorf("attempts %q", got)
	}
}

// TestSignature: Sign and VerifySignature agree; a changed body, a
// changed secret or a malformed header does not verify.
func TestSignature(t *testing.T) {
	body, secret := []byte(`{"id":"a"}`), []byte("k")
	sig := Sign(secret, body)
	// The HMAC-SHA256 of the body under "k", as Python's hmac computes it.
	if want := "sha256=48a8051c0df3784c0c097d919ccb5ae6d630c54303bc08990d7770899072ae84"; sig != want {
		t.Fatalf("Sign = %s, want %s", sig, want)
	}
	for _, tt := range []struct {
		name   string
		secret []byte
		body   []byte
		header string
		want   bool
	}{
		{"good", secret, body, sig, true},
		{"other body", secret, []byte(`{"id":"b"}`), sig, false},
		{"other secret", []byte("j"), body, sig, false},
		{"no prefix", secret, body, sig[len("sha256="):], false},
		{"not hex", secret, body, "sha256=zz", false},
		{"empty", secret, body, "", false},
	} {
		if got := VerifySignature(tt.secret, tt.body, tt.header); got != tt.want {
			t.Errorf("%s: VerifySignature = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLoopNotifiesAfterCommit: the loop hands the notify rungs (not the
// alert rung) to its Notifier, and records a notice the Notifier could
// not take as notify.failed.
func TestLoopNotifiesAfterCommit(t *testing.T) {
	w := newWorld(t)
	full := &fullNotifier{}
	w.loop.cfg.Notify = full
	alerts := []fleetpkg.Alert{
		{Kind: "idle-alert", Unit: "u1", Team: "a", LeaseID: "L1"},
		{Kind: "idle-notify", Unit: "u1", Team: "a", LeaseID: "L1", Reason: "idle 45m"},
		{Kind: "zombie", Unit: "u2", Team: "a", LeaseID: "L1", GPU: 1, Action: fleetpkg.IdleStop},
		{Kind: "budget", Team: "a"},
	}
	w.loop.notify(context.Background(), alerts, t0)
	if len(full.got) != 2 || full.got[0].Kind != "idle-notify" || full.got[1].Kind != "zombie" || full.got[1].Action != "stop" || full.got[1].GPU != 1 {
		t.Errorf("notified %+v; want the idle-notify of u1 and the zombie of u2", full.got)
	}
	p, err := w.st.Events().ListEvents(context.Background(), store.EventFilter{Kind: "notify.failed", Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 2 || p.Items[0].Attrs["final"] != "true" {
		t.Errorf("recorded %+v; want both notices as failed: the queue is full", p.Items)
	}
}

// fullNotifier keeps what it is given and takes nothing (a full queue).
type fullNotifier struct{ got []Notice }

func (f *fullNotifier) Notify(n Notice) bool { f.got = append(f.got, n); return false }
