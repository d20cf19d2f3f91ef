//go:build linux

package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// patience bounds every wait on a real process: generous, because a
// loaded machine is slow, and only ever reached when something is wrong.
const patience = 30 * time.Second

type harness struct {
	t      *testing.T
	r      *Runner
	clock  *clock.Manual
	lines  *ChanSink
	events chan core.Event
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock.NewManual(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)), lines: &ChanSink{C: make(chan Line, 4096)}, events: make(chan core.Event, 256)}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Clock, cfg.Logs = h.clock, h.lines
	cfg.Events = EventFunc(func(e core.Event) { h.events <- e })
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	t.Cleanup(func() {
		for _, p := range r.Running() {
			syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	})
	return h
}

func script(name string) []string {
	abs, _ := filepath.Abs(filepath.Join("testdata", name))
	return []string{"bash", abs}
}

// line waits for the job to print a line starting with prefix and
// returns it.
func (h *harness) line(job, prefix string) string {
	h.t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case l := <-h.lines.C:
			if l.Job == job && strings.HasPrefix(l.Text, prefix) {
				return l.Text
			}
		case <-deadline:
			h.t.Fatalf("job %s never printed %q", job, prefix)
		}
	}
}

// event waits for the job's next event of kind (and step, for signals);
// the events before it are dropped.
func (h *harness) event(job, kind, step string) core.Event {
	h.t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case e := <-h.events:
			if e.Subject == job && e.Kind == kind && (step == "" || e.Attrs["step"] == step) {
				return e
			}
		case <-deadline:
			h.t.Fatalf("job %s: no %s %s event", job, kind, step)
		}
	}
}

func (h *harness) exit(j *Job) Exit {
	h.t.Helper()
	select {
	case <-j.Done():
		return j.Exit()
	case <-time.After(patience):
		h.t.Fatalf("job %s did not end", j.ID())
	}
	return Exit{}
}

// dead waits for pid to be gone or a zombie (reparented stragglers wait
// for whoever reaps orphans here).
func dead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a process's death, not timing a result
	}
	t.Fatalf("process %d still alive", pid)
}

func TestEnvironment(t *testing.T) {
	h := newHarness(t, Config{Env: []string{"PATH=" + os.Getenv("PATH"), "FROM_SPEC=base", "CUDA_VISIBLE_DEVICES=all", "GPUFLEET_TOKEN=secret"}})
	j, err := h.r.Start(Spec{ID: "env-1", Team: "vision", Command: script("env.sh"), GPUs: []string{"GPU-aaaa", "MIG-bbbb"},
		MPS: &MPS{ActiveThreadPct: 25, PinnedMemMiB: 4096}, Env: []string{"FROM_SPEC=spec"}})
	if err != nil {
		t.Fatal(err)
	}
	ex := h.exit(j)
	if !ex.Success() {
		t.Fatalf("exit = %v", ex)
	}
	var got []string
	for len(h.lines.C) > 0 {
		l := <-h.lines.C
		got = append(got, l.Stream+" "+l.Text)
	}
	dir := h.r.JobDir("env-1")
	pid := strconv.Itoa(j.PGID())
	want := []string{
		"stdout CUDA_VISIBLE_DEVICES=GPU-aaaa,MIG-bbbb",
		"stdout CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25",
		"stdout CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M,1=4096M",
		"stdout GPUFLEET_CHECKPOINT_DIR=" + filepath.Join(dir, "checkpoint"),
		"stdout GPUFLEET_CHECKPOINT_SIGNAL=USR1",
		"stdout GPUFLEET_JOB_ID=env-1",
		"stdout GPUFLEET_TOKEN=<unset>",
		"stdout FROM_SPEC=spec",
		"stdout pwd=" + dir,
		"stdout pgrp=" + pid + " pid=" + pid,
		"stdout checkpoint dir exists",
		"stderr to stderr",
	}
	// The two streams are read concurrently: compare stdout in order
	// and stderr as present.
	if d := cmp.Diff(want, got, cmpSortStreams); d != "" {
		t.Errorf("job saw (-want +got)\n%s", d)
	}
	started := h.event("env-1", EventStarted, "")
	if started.Attrs["pid"] != pid || started.Attrs["gpus"] != "GPU-aaaa,MIG-bbbb" || started.Attrs["team"] != "vision" {
		t.Errorf("started event = %+v", started)
	}
	exited := h.event("env-1", EventExited, "")
	if exited.Reason != "exit 0" || exited.Attrs["exit_code"] != "0" || exited.Attrs["stopped"] != "false" {
		t.Errorf("exited event = %+v", exited)
	}
	log, err := os.ReadFile(h.r.LogPath("env-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"agent === attempt 1 started: pid " + pid, "stdout CUDA_VISIBLE_DEVICES=GPU-aaaa,MIG-bbbb", "stderr to stderr", "agent === attempt 1 ended: exit 0"} {
		if !strings.Contains(string(log), s) {
			t.Errorf("log file lacks %q:\n%s", s, log)
		}
	}
	if len(h.r.Running()) != 0 {
		t.Errorf("running = %v after the job ended", h.r.Running())
	}
}

// cmpSortStreams orders lines stdout first, keeping each stream's order.
var cmpSortStreams = cmp.Transformer("byStream", func(in []string) []string {
	var out, errs []string
	for _, s := range in {
		if strings.HasPrefix(s, "stderr ") {
			errs = append(errs, s)
		} else {
			out = append(out, s)
		}
	}
	return append(out, errs...)
})

func TestCheckpointAndResume(t *testing.T) {
	h := newHarness(t, Config{})
	spec := Spec{ID: "train-7", Command: script("work.sh"), GPUs: []string{"0"}}
	j, err := h.r.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if started := h.event("train-7", EventStarted, ""); started.Attrs["attempt"] != "1" {
		t.Errorf("first started event attempt = %q", started.Attrs["attempt"])
	}
	h.line("train-7", "step 3")
	if got := h.r.Running(); len(got) != 1 || got[0].PGID != j.PGID() || got[0].GPUs[0] != "0" {
		t.Errorf("running = %+v", got)
	}
	j.Stop("spot reclaim notice")
	sig := h.event("train-7", EventSignal, "checkpoint")
	if sig.Attrs["signal"] != "USR1" || sig.Reason != "spot reclaim notice" || sig.Attrs["next_in"] != "30s" {
		t.Errorf("signal event = %+v", sig)
	}
	at := strings.TrimPrefix(h.line("train-7", "checkpointed at "), "checkpointed at ")
	ex := h.exit(j)
	if !ex.Success() || !ex.Stopped || ex.Forced != "" {
		t.Fatalf("exit = %+v; want exit 0, stopped, nothing forced", ex)
	}
	n, err := strconv.Atoi(at)
	if err != nil || n < 3 {
		t.Fatalf("checkpointed at %q, want a step >= 3", at)
	}
	saved, err := os.ReadFile(filepath.Join(h.r.CheckpointDir("train-7"), "step"))
	if err != nil || strings.TrimSpace(string(saved)) != at {
		t.Fatalf("checkpoint file = %q, %v; want %s", saved, err, at)
	}

	// Started again, the job resumes where it checkpointed and finishes.
	spec.Env = []string{"MORE=3"}
	j2, err := h.r.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if started := h.event("train-7", EventStarted, ""); started.Attrs["attempt"] != "2" {
		t.Errorf("second started event attempt = %q", started.Attrs["attempt"])
	}
	if got := h.line("train-7", "resumed at "); got != "resumed at "+at {
		t.Errorf("second attempt: %q, want resumed at %s", got, at)
	}
	if got := h.line("train-7", "step "); got != "step "+strconv.Itoa(n+1) {
		t.Errorf("first step after resuming = %q, want step %d", got, n+1)
	}
	h.line("train-7", "done at "+strconv.Itoa(n+3))
	if ex := h.exit(j2); !ex.Success() || ex.Stopped {
		t.Errorf("second attempt exit = %+v; want exit 0, not stopped", ex)
	}
}

func TestStubbornJobIsKilledAfterGrace(t *testing.T) {
	h := newHarness(t, Config{Grace: time.Minute, TermGrace: 20 * time.Second})
	j, err := h.r.Start(Spec{ID: "stubborn", Command: script("stubborn.sh")})
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimPrefix(h.line("stubborn", "child "), "child "))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.line("stubborn", "pgrp "); got != "pgrp "+strconv.Itoa(j.PGID()) {
		t.Errorf("%q, want the job in its own group %d", got, j.PGID())
	}
	j.Stop("preempted")
	h.event("stubborn", EventSignal, "checkpoint")
	// The job ignores the signal; until the grace is over, nothing more.
	h.clock.Advance(time.Minute - time.Second)
	select {
	case e := <-h.events:
		t.Fatalf("event %s %v before the grace was over", e.Kind, e.Attrs)
	case <-j.Done():
		t.Fatal("job ended on a signal it ignores")
	default:
	}
	h.clock.Advance(time.Second)
	if e := h.event("stubborn", EventSignal, "term"); e.Attrs["signal"] != "TERM" || e.Attrs["next_in"] != "20s" {
		t.Errorf("term event = %+v", e)
	}
	h.clock.Advance(20 * time.Second)
	h.event("stubborn", EventSignal, "kill")
	ex := h.exit(j)
	if ex.Signal != syscall.SIGKILL || !ex.Stopped || ex.Forced != "kill" || ex.Code != -1 {
		t.Errorf("exit = %+v; want killed by SIGKILL, stopped, forced kill", ex)
	}
	dead(t, child)
	exited := h.event("stubborn", EventExited, "")
	if exited.Reason != "signal killed" || exited.Attrs["forced"] != "kill" || exited.Attrs["signal"] != "KILL" {
		t.Errorf("exited event = %+v", exited)
	}
}

func TestLeaderExitKillsTheGroup(t *testing.T) {
	h := newHarness(t, Config{})
	j, err := h.r.Start(Spec{ID: "straggler", Command: script("straggler.sh")})
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimPrefix(h.line("straggler", "child "), "child "))
	if err != nil {
		t.Fatal(err)
	}
	if ex := h.exit(j); ex.Code != 3 || ex.Signal != 0 || ex.Stopped {
		t.Errorf("exit = %+v, want exit 3", ex)
	}
	dead(t, child)
}

func TestResourceUse(t *testing.T) {
	h := newHarness(t, Config{})
	j, err := h.r.Start(Spec{ID: "busy", Command: script("busy.sh")})
	if err != nil {
		t.Fatal(err)
	}
	ex := h.exit(j)
	if !ex.Success() {
		t.Fatalf("exit = %v", ex)
	}
	if ex.UserCPU+ex.SysCPU <= 0 {
		t.Errorf("cpu = %v user + %v sys, want some", ex.UserCPU, ex.SysCPU)
	}
	// bash holds an 8 MB string: its resident set is at least that.
	if ex.MaxRSSKiB < 8000 {
		t.Errorf("max rss = %d KiB, want >= 8000", ex.MaxRSSKiB)
	}
	e := h.event("busy", EventExited, "")
	if e.Attrs["max_rss_kib"] != strconv.FormatInt(ex.MaxRSSKiB, 10) {
		t.Errorf("exited event max_rss_kib = %q, want %d", e.Attrs["max_rss_kib"], ex.MaxRSSKiB)
	}
}

func TestOutputLines(t *testing.T) {
	h := newHarness(t, Config{})
	long := strings.Repeat("x", maxLine+10)
	exact := strings.Repeat("y", maxLine)
	j, err := h.r.Start(Spec{ID: "out", Command: []string{"bash", "-c", `printf 'a\n\nb\n'; printf '%s\n' "$LONG"; printf '%s\n' "$EXACT"; printf 'no newline'`}, Env: []string{"LONG=" + long, "EXACT=" + exact}})
	if err != nil {
		t.Fatal(err)
	}
	h.exit(j)
	var got []string
	for len(h.lines.C) > 0 {
		got = append(got, (<-h.lines.C).Text)
	}
	want := []string{"a", "", "b", long[:maxLine], long[maxLine:], exact, "no newline"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestCheckpointWithoutStop(t *testing.T) {
	h := newHarness(t, Config{CheckpointSignal: syscall.SIGUSR2})
	j, err := h.r.Start(Spec{ID: "ck", Command: []string{"bash", "-c", `trap 'echo "got $GPUFLEET_CHECKPOINT_SIGNAL"' USR2; echo ready; while true; do sleep 0.02; done`}})
	if err != nil {
		t.Fatal(err)
	}
	h.line("ck", "ready")
	if !j.Checkpoint("periodic") {
		t.Fatal("Checkpoint on a running job returned false")
	}
	h.line("ck", "got USR2")
	j.Kill("test over")
	if ex := h.exit(j); ex.Signal != syscall.SIGKILL {
		t.Errorf("exit = %v", ex)
	}
	if j.Checkpoint("too late") {
		t.Error("Checkpoint on an ended job returned true")
	}
}

func TestStartErrors(t *testing.T) {
	h := newHarness(t, Config{})
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"bad id", Spec{ID: "../etc", Command: []string{"true"}}, `id: invalid value "../etc"`},
		{"no command", Spec{ID: "a"}, "command: invalid value"},
		{"bad env", Spec{ID: "a", Command: []string{"true"}, Env: []string{"NOEQUALS"}}, `env: invalid value "NOEQUALS": want KEY=VALUE`},
		{"bad gpu", Spec{ID: "a", Command: []string{"true"}, GPUs: []string{"0,1"}}, `gpus: invalid value "0,1"`},
		{"mps pct", Spec{ID: "a", Command: []string{"true"}, MPS: &MPS{ActiveThreadPct: 0}}, `mps.active_thread_pct: invalid value "0": want 1..100`},
		{"mps mem", Spec{ID: "a", Command: []string{"true"}, MPS: &MPS{ActiveThreadPct: 50, PinnedMemMiB: -1}}, `mps.pinned_mem_mib`},
		{"no such program", Spec{ID: "a", Command: []string{"/nonexistent/program"}}, "runner: job a: start: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.r.Start(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	var fe *core.FieldError
	if _, err := h.r.Start(Spec{ID: "", Command: []string{"true"}}); !errors.As(err, &fe) {
		t.Errorf("err = %v, want a *core.FieldError", err)
	}
	j, err := h.r.Start(Spec{ID: "twice", Command: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.Start(Spec{ID: "twice", Command: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second start: err = %v, want already running", err)
	}
	j.Kill("test over")
	h.exit(j)
	if len(h.r.Running()) != 0 {
		t.Errorf("running = %v", h.r.Running())
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"USR1": syscall.SIGUSR1, "sigusr2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM, "10": syscall.Signal(10)} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"KILL", "9", "19", "FOO", "0", ""} {
		if _, err := ParseSignal(in); err == nil {
			t.Errorf("ParseSignal(%q) succeeded", in)
		}
	}
}
