package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/agent/runner"
	"github.com/gpufleet/gpufleet/internal/agent/spool"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// The kinds of the events the agent itself reports (the runner's job
// events are runner.EventStarted, EventSignal and EventExited).
const (
	// EventCommand says a command was carried out or refused: attrs
	// command, kind, result (ok or error) and, on error, the reason.
	EventCommand = "agent-command"
	// EventSourceError says the GPU source failed after working; one per
	// run of failures.
	EventSourceError = "agent-gpu-source-error"
	// EventStarting and EventStopping bracket an agent's life.
	EventStarting = "agent-starting"
	EventStopping = "agent-stopping"
)

// Config is everything Run needs. The gpufleet agent command fills it
// from its flags.
type Config struct {
	// AgentID names this agent to the server; empty means the hostname.
	AgentID string
	// LeaseID is the lease this machine is; samples carry it. Empty on
	// a machine of the static pool: the server binds it to a lease.
	LeaseID string
	// OfferID is the catalog offer this machine is, declared when it
	// joins (the static pool rents it out as that offer). Version is
	// the agent's build, reported in heartbeats.
	OfferID string
	Version string
	// DataDir holds the spool (DataDir/spool) and the jobs' logs and
	// checkpoints (DataDir/jobs). Required.
	DataDir string

	// GPUSource is one of gpu.Names (auto when empty); GPU configures
	// the sources (GPU.FakeBoard sizes the fake, whose load the agent
	// drives from the running jobs unless GPU.FakeLoads is set). Source,
	// when set, is used instead (tests, embedding).
	GPUSource string
	GPU       gpu.Options
	Source    gpu.Source

	// Uplink is the server. Required: the HTTP client comes with the
	// server's API.
	Uplink link.Uplink

	// SampleInterval between GPU samples (10 s); HeartbeatInterval
	// between heartbeats and command fetches (10 s).
	SampleInterval    time.Duration
	HeartbeatInterval time.Duration
	// BackoffBase and BackoffMax shape reconnects (1 s, 2 min).
	BackoffBase, BackoffMax time.Duration

	// CheckpointSignal, Grace and TermGrace are the runner's defaults
	// (SIGUSR1, 30 s, 10 s).
	CheckpointSignal syscall.Signal
	Grace, TermGrace time.Duration
	// FlushTimeout bounds the last send on shutdown (5 s).
	FlushTimeout time.Duration
	// Logs receives the jobs' output lines; nil keeps them in the log
	// files only.
	Logs runner.LogSink

	// Spool bounds the outbox (see spool.Options).
	Spool spool.Options
	// LogInterval is how often the jobs' log files are shipped to the
	// server when the Uplink is a link.LogSender (1 s). What the server
	// has not acknowledged stays in the files and goes later.
	LogInterval time.Duration

	// Clock is the agent's time; nil means the wall clock.
	Clock clock.Clock
	// Seed seeds the reconnect jitter; 0 draws one from the clock. It is
	// logged, so a run can be replayed.
	Seed uint64
	// Logger logs; nil discards.
	Logger *slog.Logger
	// DieWithParent: the jobs die with this process (runner.Config).
	DieWithParent bool
	// Spot, when set, is asked every SpotInterval (5 s) for the
	// machine's spot interruption notice, which the agent reports as an
	// EventSpotNotice (spot.go). Nil: not a spot machine, or not on EC2.
	Spot         SpotNotices
	SpotInterval time.Duration
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return &core.FieldError{Field: "data-dir", Value: "", Allowed: "a directory for the spool and the jobs"}
	}
	if c.Uplink == nil {
		return &core.FieldError{Field: "server", Value: "", Allowed: "an uplink to the server"}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"sample-interval", c.SampleInterval}, {"heartbeat-interval", c.HeartbeatInterval}, {"grace", c.Grace}, {"term-grace", c.TermGrace}} {
		if d.v < 0 {
			return &core.FieldError{Field: d.name, Value: d.v.String(), Allowed: ">= 0 (0: the default)"}
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.AgentID == "" {
		c.AgentID, _ = os.Hostname()
	}
	if c.GPUSource == "" {
		c.GPUSource = "auto"
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = 10 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = 5 * time.Second
	}
	if c.LogInterval <= 0 {
		c.LogInterval = time.Second
	}
	if c.Seed == 0 {
		c.Seed = uint64(c.Clock.Now().UnixNano())
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.GPU.Clock == nil {
		c.GPU.Clock = c.Clock
	}
	c.Spool.Logger = c.Logger
	return c
}

// Run is the agent: it opens its spool and GPU source, then samples,
// reports and runs commands until ctx is done. It then stops its jobs
// (checkpoint signal, grace, SIGTERM, SIGKILL), records their exits in
// the spool for the next run to send, and returns nil. When the server
// rejects the agent's token (link.ErrRejected) it stops the same way and
// returns that error: retrying a refused token cannot succeed.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("agent", cfg.AgentID)
	log.Info("agent starting", "lease", cfg.LeaseID, "data_dir", cfg.DataDir, "seed", cfg.Seed)

	sp, err := spool.Open(filepath.Join(cfg.DataDir, "spool"), cfg.Spool)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer sp.Close()
	a := &agent{cfg: cfg, log: log, spool: sp, seen: map[string]bool{}, ckpt: map[string]time.Time{}}
	if err := a.loadSeen(filepath.Join(cfg.DataDir, "commands.seen")); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer a.seenFile.Close()
	a.event(EventStarting, "agent started", map[string]string{"agent": cfg.AgentID, "seed": strconv.FormatUint(cfg.Seed, 10)})

	a.runner, err = runner.New(runner.Config{
		DataDir: cfg.DataDir, Clock: cfg.Clock, Logs: cfg.Logs, Logger: log,
		Events:           runner.EventFunc(func(e core.Event) { a.append(e) }),
		CheckpointSignal: cfg.CheckpointSignal, Grace: cfg.Grace, TermGrace: cfg.TermGrace,
		DieWithParent: cfg.DieWithParent,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}

	src := cfg.Source
	if src == nil {
		opts := cfg.GPU
		if opts.FakeLoads == nil {
			opts.FakeLoads = a.fakeLoads
		}
		if src, err = gpu.Open(ctx, cfg.GPUSource, opts); err != nil {
			return fmt.Errorf("agent: gpu source %s: %w", cfg.GPUSource, err)
		}
		defer src.Close()
	}
	a.source = src
	log.Info("gpu source", "source", src.Name())
	// The first heartbeat is the join, and the server's agent.joined
	// event counts its GPUs: sample before the loop sends it.
	a.sampleOnce(ctx)

	loop := &link.Loop{
		Up: cfg.Uplink, Queue: sp, Clock: cfg.Clock, Logger: log,
		Rand:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		Heartbeat: a.heartbeat, Commands: a.commands,
		Interval: cfg.HeartbeatInterval, BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax,
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var linkErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := loop.Run(ctx, sp.Wake()); err != nil {
			linkErr = err
			stop()
		}
	}()
	go func() {
		defer wg.Done()
		a.sampleLoop(ctx)
	}()
	if cfg.Spot != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.spotLoop(ctx)
		}()
	}
	ship, canShip := cfg.Uplink.(link.LogSender)
	var logs *logShipper
	if canShip {
		logs = newLogShipper(a.runner, ship, log)
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs.loop(ctx, cfg.Clock, cfg.LogInterval)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	a.shutdown()
	if linkErr != nil {
		log.Error("agent stopped: the server rejects its token", "err", linkErr, "unsent", sp.Len())
		return fmt.Errorf("agent: %w", linkErr)
	}
	if logs != nil {
		fctx, cancel := context.WithTimeout(context.Background(), cfg.FlushTimeout)
		logs.ship(fctx) // what the stopped jobs wrote last
		cancel()
	}
	// One last try to send what shutting down recorded; what does not
	// go now waits in the spool for the next run.
	flush, cancel := context.WithTimeout(context.Background(), cfg.FlushTimeout)
	defer cancel()
	for i := 0; i < 8 && sp.Len() > 0 && flush.Err() == nil; i++ {
		failures := loop.Failures()
		loop.Step(flush)
		if loop.Failures() > failures {
			break
		}
	}
	log.Info("agent stopped", "unsent", sp.Len())
	return nil
}

type agent struct {
	cfg    Config
	log    *slog.Logger
	spool  *spool.Spool
	runner *runner.Runner
	source gpu.Source

	mu        sync.Mutex
	inventory []link.GPUInfo
	seen      map[string]bool // command IDs carried out
	seenOrder []string
	// seenFile records them, so that a restarted agent does not carry
	// out again a command the server resends before the acknowledgement
	// (an event still in the spool) reaches it.
	seenFile *os.File
	failing  bool
	badLoad  map[string]bool      // jobs whose fake load declaration was logged as bad
	stopping bool                 // shutting down: no new jobs
	ckpt     map[string]time.Time // running job → its checkpoint directory's last change seen
}

func (a *agent) append(e core.Event) {
	if _, err := a.spool.AppendEvent(e); err != nil {
		a.log.Error("event lost: spool refused it", "kind", e.Kind, "subject", e.Subject, "err", err)
	}
}

func (a *agent) event(kind, reason string, attrs map[string]string) {
	a.append(core.Event{At: a.cfg.Clock.Now(), Kind: kind, Subject: a.cfg.AgentID, Reason: reason, Attrs: attrs})
}

// sampleLoop samples every SampleInterval; Run took the first sample.
func (a *agent) sampleLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(a.cfg.SampleInterval):
		}
		a.sampleOnce(ctx)
	}
}

// sampleOnce reads the GPUs once and spools a sample per device.
func (a *agent) sampleOnce(ctx context.Context) {
	// A source that hangs (nvidia-smi on a GPU in a bad state) must not
	// stop the sampling for good.
	sctx, cancel := context.WithTimeout(ctx, max(3*a.cfg.SampleInterval, 10*time.Second))
	readings, err := a.source.Sample(sctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		a.mu.Lock()
		first := !a.failing
		a.failing = true
		a.mu.Unlock()
		a.log.Warn("gpu sample failed", "source", a.source.Name(), "err", err)
		if first {
			a.event(EventSourceError, err.Error(), map[string]string{"source": a.source.Name()})
		}
		return
	}
	now := a.cfg.Clock.Now()
	inv := make([]link.GPUInfo, 0, len(readings))
	for _, r := range readings {
		inv = append(inv, link.GPUInfo{Index: r.Index, UUID: r.UUID, Model: r.Name, MIG: r.MIG, MemTotalMiB: r.MemTotalMiB})
	}
	a.mu.Lock()
	a.failing = false
	a.inventory = inv
	a.mu.Unlock()
	running := a.runner.Running()
	a.checkpoints(running)
	for _, s := range Samples(a.cfg.LeaseID, now, readings, running, Getpgid) {
		if _, err := a.spool.AppendSample(s); err != nil {
			a.log.Error("sample lost: spool refused it", "gpu", s.GPU, "err", err)
		}
	}
}

func (a *agent) heartbeat() link.Heartbeat {
	a.mu.Lock()
	inv := append([]link.GPUInfo(nil), a.inventory...)
	a.mu.Unlock()
	var jobs []string
	for _, p := range a.runner.Running() {
		jobs = append(jobs, p.ID)
	}
	st := a.spool.Stats()
	return link.Heartbeat{Agent: a.cfg.AgentID, LeaseID: a.cfg.LeaseID, At: a.cfg.Clock.Now(), Source: a.source.Name(),
		GPUs: inv, Jobs: jobs, Backlog: st.Records, Summarised: st.Summarised, Offer: a.cfg.OfferID, Version: a.cfg.Version}
}

// remember marks a command ID carried out and reports whether it was
// new. The last 4096 IDs are kept: a server resends a command until the
// agent's event about it arrives, which is far fewer.
func (a *agent) remember(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[id] {
		return false
	}
	a.seen[id] = true
	a.seenOrder = append(a.seenOrder, id)
	if a.seenFile != nil {
		if _, err := a.seenFile.WriteString(id + "\n"); err != nil {
			a.log.Warn("command not recorded: a restart may carry it out again", "command", id, "err", err)
		}
	}
	if len(a.seenOrder) > 4096 {
		delete(a.seen, a.seenOrder[0])
		a.seenOrder = a.seenOrder[1:]
	}
	return true
}

func (a *agent) commands(_ context.Context, cmds []link.Command) {
	for _, c := range cmds {
		if c.ID != "" && !a.remember(c.ID) {
			continue
		}
		err := a.do(c)
		attrs := map[string]string{"command": c.ID, "kind": string(c.Kind), "job": c.Job.ID, "result": "ok"}
		reason := string(c.Kind) + " " + c.Job.ID
		if err != nil {
			attrs["result"] = "error"
			reason = err.Error()
			a.log.Warn("command failed", "command", c.ID, "kind", c.Kind, "job", c.Job.ID, "err", err)
		}
		a.event(EventCommand, reason, attrs)
	}
}

var (
	errNoSuchJob = errors.New("agent: no such running job")
	errStopping  = errors.New("agent: stopping, not starting jobs")
)

func (a *agent) do(c link.Command) error {
	a.mu.Lock()
	stopping := a.stopping
	a.mu.Unlock()
	if stopping && c.Kind == link.CommandRun {
		return errStopping
	}
	reason := c.Reason
	if reason == "" {
		reason = "server: " + string(c.Kind)
	}
	if c.Kind == link.CommandRun {
		spec, err := toSpec(c.Job)
		if err != nil {
			return err
		}
		_, err = a.runner.Start(spec)
		return err
	}
	j, ok := a.runner.Job(c.Job.ID)
	if !ok {
		return fmt.Errorf("%s %s: %w", c.Kind, c.Job.ID, errNoSuchJob)
	}
	switch c.Kind {
	case link.CommandCheckpoint:
		j.Checkpoint(reason)
	case link.CommandStop:
		j.Stop(reason)
	case link.CommandKill:
		j.Kill(reason)
	default:
		return &core.FieldError{Field: "command.kind", Value: string(c.Kind), Allowed: "run, checkpoint, stop or kill"}
	}
	return nil
}

// maxSeenFile is how large commands.seen grows before it is rewritten
// with the IDs remembered.
const maxSeenFile = 1 << 20

// loadSeen reads the command IDs carried out before (the last 4096) and
// opens the file for appending; an oversized file is rewritten first.
func (a *agent) loadSeen(path string) error {
	if b, err := os.ReadFile(path); err == nil {
		for _, id := range strings.Split(string(b), "\n") {
			if id != "" && !a.seen[id] {
				a.seen[id] = true
				a.seenOrder = append(a.seenOrder, id)
			}
		}
		if len(a.seenOrder) > 4096 {
			for _, id := range a.seenOrder[:len(a.seenOrder)-4096] {
				delete(a.seen, id)
			}
			a.seenOrder = a.seenOrder[len(a.seenOrder)-4096:]
		}
		if len(b) > maxSeenFile {
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, []byte(strings.Join(a.seenOrder, "\n")+"\n"), 0o640); err != nil {
				return err
			}
			if err := os.Rename(tmp, path); err != nil {
				return err
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	a.seenFile = f
	return nil
}

// toSpec converts the server's job to the runner's.
func toSpec(j link.JobSpec) (runner.Spec, error) {
	s := runner.Spec{ID: j.ID, Team: j.Team, Command: j.Command, Env: j.Env, GPUs: j.GPUs, Grace: time.Duration(j.GraceSeconds) * time.Second, CheckpointDir: j.CheckpointDir}
	if j.MPSThreadPct > 0 || j.MPSPinnedMemMiB > 0 {
		s.MPS = &runner.MPS{ActiveThreadPct: j.MPSThreadPct, PinnedMemMiB: j.MPSPinnedMemMiB}
	}
	if j.CheckpointSignal != "" {
		sig, err := runner.ParseSignal(j.CheckpointSignal)
		if err != nil {
			return s, fmt.Errorf("job %s: %w", j.ID, err)
		}
		s.CheckpointSignal = sig
	}
	if j.GraceSeconds < 0 {
		return s, &core.FieldError{Field: "grace_seconds", Value: strconv.Itoa(j.GraceSeconds), Allowed: ">= 0"}
	}
	return s, nil
}

// shutdown stops the running jobs and waits for them; their exit events
// go to the spool, for this run or the next to send.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	done := a.runner.StopAll("agent stopping")
	a.event(EventStopping, "agent stopping", map[string]string{"jobs": strconv.Itoa(len(done))})
	for _, d := range done {
		<-d
	}
	a.log.Info("jobs stopped", "jobs", len(done))
}
