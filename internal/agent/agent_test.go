package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/agent/link/fake"
	"github.com/gpufleet/gpufleet/internal/agent/spool"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// patience bounds each wait on the agent's goroutines and processes;
// reached only when something is wrong.
const patience = 30 * time.Second

// waitFor waits until cond holds, re-checking whenever the fake server
// applies something.
func waitFor(t *testing.T, srv *fake.Server, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(patience)
	for {
		changed := srv.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func events(srv *fake.Server, kind, subject string) []core.Event {
	var out []core.Event
	for _, r := range srv.Records() {
		if r.Kind == link.KindEvent && r.Event.Kind == kind && (subject == "" || r.Event.Subject == subject) {
			out = append(out, *r.Event)
		}
	}
	return out
}

func countSamples(srv *fake.Server) int {
	n := 0
	for _, r := range srv.Records() {
		if r.Kind == link.KindSample {
			n++
		}
	}
	return n
}

func checkOrdered(t *testing.T, srv *fake.Server) {
	t.Helper()
	recs := srv.Records()
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq {
			t.Fatalf("record %d: seq %d after %d", i, recs[i].Seq, recs[i-1].Seq)
		}
	}
}

// TestRunEndToEnd runs the agent on the wall clock with short intervals
// against the fake server: samples flow, commands run real jobs, a stop
// reaches the job as its checkpoint signal, a partition heals without a
// gap, and a restarted agent goes on numbering where it stopped.
func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	srv := fake.New()
	src := &counting{calls: make(chan struct{}, 64), Source: gpu.NewFake(clock.Real{}, gpu.Step{Readings: []gpu.Reading{
		{Index: 0, UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3", UtilPct: 80, MemUsedMiB: 1000, MemTotalMiB: 81559, ProcessesKnown: true},
		{Index: 1, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", UtilPct: 0, MemUsedMiB: 0, MemTotalMiB: 81559, ProcessesKnown: true},
	}})}
	cfg := Config{AgentID: "node-1", LeaseID: "L7", DataDir: dir, Source: src, Uplink: srv,
		SampleInterval: 20 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
		Grace: 10 * time.Second, TermGrace: time.Second, Seed: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()

	waitFor(t, srv, "a heartbeat with the inventory and samples", func() bool {
		hb := srv.Heartbeats()
		return len(hb) > 0 && len(hb[len(hb)-1].GPUs) == 2 && countSamples(srv) >= 4
	})
	if hb := srv.Heartbeats()[len(srv.Heartbeats())-1]; hb.Agent != "node-1" || hb.LeaseID != "L7" || hb.Source != "fake" {
		t.Errorf("heartbeat = %+v", hb)
	}
	if started := events(srv, EventStarting, "node-1"); len(started) != 1 {
		t.Errorf("agent-starting events = %v", started)
	}

	srv.Push(link.Command{ID: "c1", Kind: link.CommandRun, Job: link.JobSpec{ID: "hello", Team: "nlp", Command: []string{"bash", "-c", "echo hi; exit 4"}, GPUs: []string{"1"}}})
	srv.Push(link.Command{ID: "c1", Kind: link.CommandRun, Job: link.JobSpec{ID: "hello", Command: []string{"false"}}}) // resent: ignored
	waitFor(t, srv, "the job's exit", func() bool { return len(events(srv, "job-exited", "hello")) == 1 })
	if e := events(srv, "job-exited", "hello")[0]; e.Attrs["exit_code"] != "4" || e.Attrs["team"] != "nlp" {
		t.Errorf("exit event = %+v", e)
	}
	if cmds := events(srv, EventCommand, ""); len(cmds) != 1 || cmds[0].Attrs["result"] != "ok" || cmds[0].Attrs["command"] != "c1" {
		t.Errorf("command events = %+v, want one ok for c1", cmds)
	}

	// A long job, then the server's stop: the job sees its checkpoint
	// signal and exits on its own, within the grace.
	trapped := filepath.Join(t.TempDir(), "trapped")
	srv.Push(link.Command{ID: "c2", Kind: link.CommandRun, Job: link.JobSpec{ID: "train", GPUs: []string{"0"},
		Command: []string{"bash", "-c", `trap 'echo "saved at $GPUFLEET_CHECKPOINT_DIR"; exit 0' USR1; : > ` + trapped + `; while true; do sleep 0.02; done`}}})
	waitFor(t, srv, "the job in a heartbeat and a sample", func() bool {
		for _, r := range srv.Records() {
			if r.Kind == link.KindSample && r.Sample.GPU == 0 && len(r.Sample.Jobs) == 1 && r.Sample.Jobs[0].Job == "train" {
				return true
			}
		}
		return false
	})
	// The stop must find the job's trap set: a USR1 before bash has
	// read it ends the job by the signal's default action.
	waitFor(t, srv, "the job's trap", func() bool { _, err := os.Stat(trapped); return err == nil })
	srv.Push(link.Command{ID: "c3", Kind: link.CommandStop, Job: link.JobSpec{ID: "train"}, Reason: "spot reclaim in 2 minutes"})
	waitFor(t, srv, "the stopped job's exit", func() bool { return len(events(srv, "job-exited", "train")) == 1 })
	if sig := events(srv, "job-signal", "train"); len(sig) != 1 || sig[0].Attrs["signal"] != "USR1" || sig[0].Reason != "spot reclaim in 2 minutes" {
		t.Errorf("signal events = %+v, want one USR1 with the reclaim reason", sig)
	}
	if e := events(srv, "job-exited", "train")[0]; e.Attrs["exit_code"] != "0" || e.Attrs["stopped"] != "true" {
		t.Errorf("exit event = %+v", e)
	}
	srv.Push(link.Command{ID: "c4", Kind: link.CommandStop, Job: link.JobSpec{ID: "nope"}})
	waitFor(t, srv, "the refused command", func() bool { return len(events(srv, EventCommand, "")) == 4 })
	if last := events(srv, EventCommand, "")[3]; last.Attrs["result"] != "error" || !strings.Contains(last.Reason, "no such running job") {
		t.Errorf("refused command event = %+v", last)
	}

	// A partition: samples pile up in the spool, then all arrive.
	srv.SetDown(true)
	before := countSamples(srv)
	for len(src.calls) > 0 {
		<-src.calls
	}
	for i := 0; i < 10; i++ { // ten rounds sampled while the server is away
		select {
		case <-src.calls:
		case <-time.After(patience):
			t.Fatal("the agent stopped sampling during the partition")
		}
	}
	srv.SetDown(false)
	waitFor(t, srv, "the backlog", func() bool { return countSamples(srv) >= before+20 })
	checkOrdered(t, srv)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if stopping := events(srv, EventStopping, "node-1"); len(stopping) != 1 {
		t.Errorf("agent-stopping events = %d, want 1 (flushed at shutdown)", len(stopping))
	}
	lastSeq := srv.Records()[len(srv.Records())-1].Seq

	// A second life of the agent on the same data dir.
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- Run(ctx, cfg) }()
	waitFor(t, srv, "the restarted agent", func() bool { return len(events(srv, EventStarting, "node-1")) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("second Run = %v", err)
	}
	checkOrdered(t, srv)
	if first := events(srv, EventStarting, "node-1")[1]; first.At.IsZero() || srv.Records()[len(srv.Records())-1].Seq <= lastSeq {
		t.Errorf("the restarted agent did not number on")
	}
}

// counting is a source that says on calls each time it is sampled.
type counting struct {
	gpu.Source
	calls chan struct{}
}

func (c *counting) Sample(ctx context.Context) ([]gpu.Reading, error) {
	select {
	case c.calls <- struct{}{}:
	default:
	}
	return c.Source.Sample(ctx)
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Uplink: fake.New()}, "data-dir"},
		{Config{DataDir: "x"}, "server"},
		{Config{DataDir: "x", Uplink: fake.New(), SampleInterval: -time.Second}, "sample-interval"},
	} {
		err := Run(context.Background(), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run(%+v) = %v, want an error about %s", tt.cfg, err, tt.want)
		}
	}
	err := Run(context.Background(), Config{DataDir: t.TempDir(), Uplink: fake.New(), GPUSource: "rocm"})
	if err == nil || !strings.Contains(err.Error(), `gpu-source: invalid value "rocm"`) {
		t.Errorf("unknown source: %v", err)
	}
}

// TestSpoolAndLinkThroughPartitionAndCrash drives the real spool, the
// loop and the fake server on a manual clock: a 30 minute partition with
// a bound small enough to summarise, lost replies, and an agent crash in
// the middle. Every event arrives once; every sample arrives once, as
// itself or inside exactly one summary; the order holds.
func TestSpoolAndLinkThroughPartitionAndCrash(t *testing.T) {
	dir := t.TempDir()
	c := clock.NewManual(t0)
	opt := spool.Options{SegmentRecords: 16, MaxRecords: 64}
	sp, err := spool.Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	srv := fake.New()
	newLoop := func() *link.Loop {
		return &link.Loop{Up: srv, Queue: sp, Clock: c, Rand: rand.New(rand.NewPCG(3, 4)), Batch: 8, Interval: 10 * time.Second,
			BackoffBase: time.Second, BackoffMax: 20 * time.Second}
	}
	l := newLoop()
	ctx := context.Background()
	var samples, evs int
	nextStep, nextSample := t0, t0
	end := t0.Add(60 * time.Minute)
	for !nextSample.After(end) {
		now := nextStep
		if nextSample.Before(now) {
			now = nextSample
		}
		c.Set(now)
		m := now.Sub(t0)
		srv.SetDown(m >= 10*time.Minute && m < 40*time.Minute)
		if m == 45*time.Minute {
			srv.LoseReplies(2)
		}
		if m == 25*time.Minute {
			// The agent is killed and restarted mid-partition: the old
			// spool is abandoned, not closed, as a killed process leaves
			// its files.
			if sp, err = spool.Open(dir, opt); err != nil {
				t.Fatal(err)
			}
			l = newLoop()
			nextStep = now
		}
		if !now.Before(nextSample) {
			if (samples+evs)%20 == 19 {
				sp.AppendEvent(core.Event{At: now, Kind: "job-exited", Subject: "j"})
				evs++
			} else {
				sp.AppendSample(link.Sample{LeaseID: "L1", GPU: samples % 2, UUID: "GPU-x", At: now, UtilPct: samples % 100, MemUsedMiB: 10, Processes: 1})
				samples++
			}
			nextSample = nextSample.Add(10 * time.Second)
		}
		if !now.Before(nextStep) {
			nextStep = now.Add(l.Step(ctx))
		}
	}
	for i := 0; sp.Len() > 0; i++ {
		if i > 200 {
			t.Fatalf("not drained: %d left", sp.Len())
		}
		c.Advance(l.Step(ctx))
	}
	checkOrdered(t, srv)
	var gotSamples, summarised int64
	var gotEvents int
	for _, r := range srv.Records() {
		switch r.Kind {
		case link.KindSample:
			gotSamples++
		case link.KindSummary:
			summarised += r.Summary.Samples()
		case link.KindEvent:
			gotEvents++
		}
	}
	if gotEvents != evs {
		t.Errorf("events: %d arrived, %d recorded", gotEvents, evs)
	}
	if gotSamples+summarised != int64(samples) || summarised == 0 {
		t.Errorf("samples: %d arrived and %d summarised, %d taken; want all accounted for and some summarised", gotSamples, summarised, samples)
	}
	if srv.Duplicates() == 0 {
		t.Error("the lost replies produced no duplicate for the server to ignore")
	}
}

// TestRunOpensTheNamedSource: with no Source given, Run opens the one its
// GPUSource names (the fake here, sized by its board) and reports it in
// heartbeats.
func TestRunOpensTheNamedSource(t *testing.T) {
	srv := fake.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{DataDir: t.TempDir(), Uplink: srv, GPUSource: "fake", LeaseID: "L1",
			GPU:            gpu.Options{FakeBoard: gpu.Board{Count: 2, Model: "NVIDIA H100 80GB HBM3", MemMiB: 81559}},
			SampleInterval: 10 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond})
	}()
	waitFor(t, srv, "a heartbeat with the board's two GPUs", func() bool {
		hb := srv.Heartbeats()
		return len(hb) > 0 && len(hb[len(hb)-1].GPUs) == 2
	})
	if hb := srv.Heartbeats()[len(srv.Heartbeats())-1]; hb.Source != "fake" || hb.GPUs[0].Model != "NVIDIA H100 80GB HBM3" {
		t.Errorf("heartbeat = %+v", hb)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFakeSourceFollowsRuns: the fake GPU source has the GPUs of its
// board (8 here), and its telemetry follows the runs: a GPU with no run
// and a GPU running sleep read 0 %; a GPU whose run declares a load
// (GPUFLEET_FAKE_GPU_UTIL, GPUFLEET_FAKE_GPU_MEM_MIB) reads that load.
func TestFakeSourceFollowsRuns(t *testing.T) {
	srv := fake.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{AgentID: "node-1", LeaseID: "L8", DataDir: t.TempDir(), Uplink: srv, GPUSource: "fake",
			GPU:            gpu.Options{FakeBoard: gpu.Board{Count: 8, Model: "NVIDIA A100-SXM4-40GB", MemMiB: 40960}},
			SampleInterval: 10 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond, Grace: time.Second, TermGrace: time.Second})
	}()
	srv.Push(link.Command{ID: "c1", Kind: link.CommandRun, Job: link.JobSpec{ID: "sleeper", Command: []string{"sleep", "30"}, GPUs: []string{"2"}}},
		link.Command{ID: "c2", Kind: link.CommandRun, Job: link.JobSpec{ID: "trainer", Command: []string{"env", "GPUFLEET_FAKE_GPU_UTIL=90", "GPUFLEET_FAKE_GPU_MEM_MIB=20000", "sleep", "30"}, GPUs: []string{"5"}}})
	type gpuRow struct {
		Util int
		Mem  int64
		Jobs string
	}
	// latest is the last sample of each GPU.
	latest := func() map[int]gpuRow {
		out := map[int]gpuRow{}
		for _, r := range srv.Records() {
			if r.Kind != link.KindSample {
				continue
			}
			var jobs []string
			for _, j := range r.Sample.Jobs {
				jobs = append(jobs, j.Job)
			}
			out[r.Sample.GPU] = gpuRow{r.Sample.UtilPct, r.Sample.MemUsedMiB, strings.Join(jobs, ",")}
		}
		return out
	}
	waitFor(t, srv, "samples of both runs, the trainer's with its load", func() bool {
		l := latest()
		return l[2].Jobs == "sleeper" && l[5].Jobs == "trainer" && l[5].Util == 90
	})
	want := map[int]gpuRow{2: {0, 0, "sleeper"}, 5: {90, 20000, "trainer"}}
	for i := range 8 {
		if _, ok := want[i]; !ok {
			want[i] = gpuRow{}
		}
	}
	if d := cmp.Diff(want, latest()); d != "" {
		t.Errorf("last sample of each GPU (-want +got)\n%s", d)
	}
	if hb := srv.Heartbeats(); len(hb[0].GPUs) != 8 || hb[0].GPUs[7].Model != "NVIDIA A100-SXM4-40GB" || hb[0].GPUs[7].MemTotalMiB != 40960 {
		t.Errorf("join = %+v, want the board's 8 A100s", hb[0])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDeclaredLoad reads a job's fake load from its environment block.
func TestDeclaredLoad(t *testing.T) {
	tests := []struct {
		env  string
		want fakeDecl
		err  string
	}{
		{"PATH=/bin\x00HOME=/root\x00", fakeDecl{}, ""},
		{"GPUFLEET_FAKE_GPU_UTIL=75\x00GPUFLEET_FAKE_GPU_MEM_MIB=1024\x00X=1", fakeDecl{Load: gpu.Load{UtilPct: 75, MemMiB: 1024}}, ""},
		{"GPUFLEET_FAKE_GPU_UTIL=101", fakeDecl{}, `GPUFLEET_FAKE_GPU_UTIL: invalid value "101": want a percentage 0..100`},
		{"GPUFLEET_FAKE_GPU_MEM_MIB=lots", fakeDecl{}, `GPUFLEET_FAKE_GPU_MEM_MIB: invalid value "lots": want MiB >= 0`},
		{"GPUFLEET_FAKE_GPU_PROCS=0\x00GPUFLEET_FAKE_GPU_UTIL=0", fakeDecl{NoGPUProcess: true}, ""},
		{"GPUFLEET_FAKE_GPU_PROCS=1", fakeDecl{}, ""},
		{"GPUFLEET_FAKE_GPU_PROCS=2", fakeDecl{}, `GPUFLEET_FAKE_GPU_PROCS: invalid value "2": want 0 (no GPU process: a zombie) or 1`},
	}
	for _, tt := range tests {
		got, err := declaredLoad([]byte(tt.env))
		if (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) || !cmp.Equal(got, tt.want) {
			t.Errorf("declaredLoad(%q) = %+v, %v; want %+v, %q", tt.env, got, err, tt.want, tt.err)
		}
	}
}

// TestRestartedAgentRemembersCommands: a command the server sends again
// after the agent restarted (its acknowledgement still on the way) is
// not carried out twice.
func TestRestartedAgentRemembersCommands(t *testing.T) {
	dir := t.TempDir()
	srv := fake.New()
	cfg := Config{AgentID: "node-1", LeaseID: "L1", DataDir: dir, Uplink: srv, GPUSource: "fake",
		SampleInterval: 20 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 40 * time.Millisecond, Seed: 3}
	start := func() (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg) }()
		return cancel, done
	}
	once := link.Command{ID: "c1", Kind: link.CommandRun, Job: link.JobSpec{ID: "once", Command: []string{"true"}}}
	cancel, done := start()
	srv.Push(once)
	waitFor(t, srv, "the first run's exit", func() bool { return len(events(srv, "job-exited", "once")) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cancel, done = start()
	defer func() { cancel(); <-done }()
	srv.Push(once, link.Command{ID: "c2", Kind: link.CommandRun, Job: link.JobSpec{ID: "after", Command: []string{"true"}}})
	waitFor(t, srv, "the second command's run", func() bool { return len(events(srv, "job-exited", "after")) == 1 })
	if n := len(events(srv, "job-started", "once")); n != 1 {
		t.Errorf("command c1 ran %d times across the restart", n)
	}
}

// slowSource answers each Sample after a delay, as nvidia-smi does.
type slowSource struct {
	gpu.Source
	delay time.Duration
}

func (s slowSource) Sample(ctx context.Context) ([]gpu.Reading, error) {
	time.Sleep(s.delay)
	return s.Source.Sample(ctx)
}

// TestRunJoinsWithItsGPUs: the first heartbeat, which the server records
// as the join (agent.joined names its GPU count), already lists the GPUs,
// even from a source slower to answer than the link is to connect.
func TestRunJoinsWithItsGPUs(t *testing.T) {
	srv := fake.New()
	src := slowSource{delay: 200 * time.Millisecond, Source: gpu.NewFake(clock.Real{}, gpu.Step{Readings: []gpu.Reading{
		{Index: 0, UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3", MemTotalMiB: 81559},
		{Index: 1, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", MemTotalMiB: 81559},
		{Index: 2, UUID: "GPU-2", Name: "NVIDIA H100 80GB HBM3", MemTotalMiB: 81559},
	}})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{AgentID: "node-1", DataDir: t.TempDir(), Source: src, Uplink: srv,
			SampleInterval: time.Hour, HeartbeatInterval: 10 * time.Millisecond})
	}()
	waitFor(t, srv, "a heartbeat", func() bool { return len(srv.Heartbeats()) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Heartbeats()[0].GPUs); got != 3 {
		t.Errorf("the join lists %d GPUs, want the source's 3", got)
	}
}

// TestRunStopsWhenTokenRejected: a server that refuses the agent's token
// (403: not an agent token; 401: revoked) ends Run with an error that is
// link.ErrRejected instead of retrying for ever.
func TestRunStopsWhenTokenRejected(t *testing.T) {
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := fake.New()
			srv.Reject(status)
			done := make(chan error, 1)
			go func() {
				done <- Run(context.Background(), Config{AgentID: "node-1", DataDir: t.TempDir(), Uplink: srv, GPUSource: "fake",
					SampleInterval: 10 * time.Millisecond, HeartbeatInterval: 10 * time.Millisecond,
					BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})
			}()
			select {
			case err := <-done:
				if !errors.Is(err, link.ErrRejected) {
					t.Errorf("Run = %v, want an error that is link.ErrRejected", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Run still going after 10 s against a %d (%d calls)", status, srv.Calls())
			}
			if n := srv.Calls(); n != 1 {
				t.Errorf("%d calls, want 1", n)
			}
		})
	}
}
