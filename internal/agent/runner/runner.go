package runner

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// The environment a job finds, besides its own and the agent's.
const (
	EnvVisibleDevices   = "CUDA_VISIBLE_DEVICES"
	EnvMPSThreadPct     = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	EnvMPSPinnedMem     = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	EnvCheckpointDir    = "GPUFLEET_CHECKPOINT_DIR"
	EnvCheckpointSignal = "GPUFLEET_CHECKPOINT_SIGNAL"
	EnvJobID            = "GPUFLEET_JOB_ID"
)

// The kinds of the events a runner reports.
const (
	EventStarted = "job-started"
	EventSignal  = "job-signal"
	EventExited  = "job-exited"
)

// Spec is one job to run.
type Spec struct {
	// ID names the job (the server's unit key); it names the job's
	// directory too, so a job started again with the same ID finds its
	// checkpoints. Letters, digits, '.', '_' and '-', at most 128.
	ID string
	// Team owns the job; it is carried into events.
	Team string
	// Command is the program and its arguments.
	Command []string
	// Dir is the working directory; empty means the job's directory.
	Dir string
	// Env adds KEY=VALUE entries to the agent's environment; the
	// runner's own variables win over them.
	Env []string
	// GPUs are what CUDA_VISIBLE_DEVICES lists, in order: indices or
	// UUIDs (GPU-…, MIG-…). Empty hides every GPU.
	GPUs []string
	// MPS, when set, runs the job as an MPS client with these limits:
	// the GPU is shared.
	MPS *MPS
	// CheckpointSignal and Grace override the runner's defaults.
	CheckpointSignal syscall.Signal
	Grace            time.Duration
	// CheckpointDir overrides the job's checkpoint directory (the
	// runner's jobs/<id>/checkpoint): shared storage, so that a job
	// resumed on another machine finds what it saved here.
	CheckpointDir string
}

// MPS are the limits of a job on a shared GPU.
type MPS struct {
	// ActiveThreadPct caps the share of the GPU's SMs the job may use,
	// 1..100.
	ActiveThreadPct int
	// PinnedMemMiB caps the device memory of each of the job's GPUs; 0
	// sets no cap.
	PinnedMemMiB int64
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Validate reports the first problem with s.
func (s *Spec) Validate() error {
	if !idPattern.MatchString(s.ID) {
		return &core.FieldError{Field: "id", Value: s.ID, Allowed: "1..128 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return &core.FieldError{Field: "command", Value: strings.Join(s.Command, " "), Allowed: "a program and its arguments"}
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return &core.FieldError{Field: "env", Value: e, Allowed: "KEY=VALUE"}
		}
	}
	for _, g := range s.GPUs {
		if g == "" || strings.ContainsAny(g, ", \t\n") {
			return &core.FieldError{Field: "gpus", Value: g, Allowed: "a GPU index or UUID"}
		}
	}
	if s.MPS != nil {
		if s.MPS.ActiveThreadPct < 1 || s.MPS.ActiveThreadPct > 100 {
			return &core.FieldError{Field: "mps.active_thread_pct", Value: strconv.Itoa(s.MPS.ActiveThreadPct), Allowed: "1..100"}
		}
		if s.MPS.PinnedMemMiB < 0 {
			return &core.FieldError{Field: "mps.pinned_mem_mib", Value: strconv.FormatInt(s.MPS.PinnedMemMiB, 10), Allowed: ">= 0 (0: no cap)"}
		}
	}
	if s.Grace < 0 {
		return &core.FieldError{Field: "grace", Value: s.Grace.String(), Allowed: ">= 0"}
	}
	if s.CheckpointDir != "" && !filepath.IsAbs(s.CheckpointDir) {
		return &core.FieldError{Field: "checkpoint_dir", Value: s.CheckpointDir, Allowed: "an absolute path"}
	}
	return nil
}

// checkpointDir is where the job of spec s keeps its checkpoints.
func (r *Runner) checkpointDir(s Spec) string {
	if s.CheckpointDir != "" {
		return s.CheckpointDir
	}
	return r.CheckpointDir(s.ID)
}

// Line is one line a job wrote.
type Line struct {
	Job    string
	Stream string // stdout or stderr
	At     time.Time
	Text   string
}

// LogSink receives a job's output as it is written. Line is called from
// the job's reader goroutines and must not block for long: a slow sink
// slows the job's writes. The local log file has every line whatever the
// sink does.
type LogSink interface {
	Line(Line)
}

// EventSink receives the runner's job events (EventStarted, EventSignal,
// EventExited), in order for each job.
type EventSink interface {
	JobEvent(core.Event)
}

// ChanSink is a LogSink that forwards lines to C without blocking; a line
// that finds C full is counted in Dropped (and is still in the log file).
type ChanSink struct {
	C       chan Line
	dropped atomic.Int64
}

var _ LogSink = (*ChanSink)(nil)

// Line forwards l if C has room.
func (s *ChanSink) Line(l Line) {
	select {
	case s.C <- l:
	default:
		s.dropped.Add(1)
	}
}

// Dropped returns how many lines found C full.
func (s *ChanSink) Dropped() int64 { return s.dropped.Load() }

// EventFunc adapts a function to EventSink.
type EventFunc func(core.Event)

// JobEvent calls f.
func (f EventFunc) JobEvent(e core.Event) { f(e) }

// Config configures a Runner.
type Config struct {
	// DataDir holds jobs/<id>/log and jobs/<id>/checkpoint/.
	DataDir string
	// Clock times grace periods and stamps lines and events; nil means
	// the wall clock.
	Clock clock.Clock
	// Logs and Events receive output and events; nil discards them.
	Logs   LogSink
	Events EventSink
	// CheckpointSignal asks a job to checkpoint (SIGUSR1).
	CheckpointSignal syscall.Signal
	// Grace is how long a stopping job has after the checkpoint signal
	// before SIGTERM (30 s); TermGrace after SIGTERM before SIGKILL
	// (10 s).
	Grace, TermGrace time.Duration
	// Env is the base environment of jobs; nil means the agent's own.
	// Its GPUFLEET_ variables are dropped.
	Env []string
	// Logger logs what the runner does; nil discards.
	Logger *slog.Logger
	// DieWithParent kills each job's leader when the process that runs
	// the runner dies (Linux: the parent-death signal): for agents that
	// live inside the server, whose simulated machines die with it, so a
	// server killed by SIGKILL leaves no job behind.
	DieWithParent bool
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.CheckpointSignal == 0 {
		c.CheckpointSignal = syscall.SIGUSR1
	}
	if c.Grace == 0 {
		c.Grace = 30 * time.Second
	}
	if c.TermGrace == 0 {
		c.TermGrace = 10 * time.Second
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Runner starts and stops jobs.
type Runner struct {
	cfg Config

	mu      sync.Mutex
	running map[string]*Job
	attempt map[string]int
}

// New returns a runner keeping its jobs under cfg.DataDir.
func New(cfg Config) (*Runner, error) {
	if cfg.DataDir == "" {
		return nil, &core.FieldError{Field: "data-dir", Value: "", Allowed: "a directory for job logs and checkpoints"}
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "jobs"), 0o750); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	return &Runner{cfg: cfg, running: map[string]*Job{}, attempt: map[string]int{}}, nil
}

// JobsDir returns the directory holding every job's directory.
func (r *Runner) JobsDir() string { return filepath.Join(r.cfg.DataDir, "jobs") }

// JobDir returns the directory of the job called id.
func (r *Runner) JobDir(id string) string { return filepath.Join(r.cfg.DataDir, "jobs", id) }

// CheckpointDir returns the checkpoint directory of the job called id.
func (r *Runner) CheckpointDir(id string) string { return filepath.Join(r.JobDir(id), "checkpoint") }

// LogPath returns the log file of the job called id.
func (r *Runner) LogPath(id string) string { return filepath.Join(r.JobDir(id), "log") }

// Job returns the running job called id.
func (r *Runner) Job(id string) (*Job, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.running[id]
	return j, ok
}

// Proc is what the zombie rule needs of a running job.
type Proc struct {
	ID, Team string
	// PGID is the job's process group (its leader's pid).
	PGID int
	GPUs []string
	// CheckpointDir is where the job saves its checkpoints; Started
	// when it started.
	CheckpointDir string
	Started       time.Time
}

// Running lists the running jobs, by ID.
func (r *Runner) Running() []Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Proc, 0, len(r.running))
	for _, j := range r.running {
		out = append(out, Proc{ID: j.spec.ID, Team: j.spec.Team, PGID: j.pgid, GPUs: append([]string(nil), j.spec.GPUs...),
			CheckpointDir: r.checkpointDir(j.spec), Started: j.started})
	}
	slices.SortFunc(out, func(a, b Proc) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// StopAll stops every running job (checkpoint signal, grace, SIGTERM,
// SIGKILL) and returns their Done channels.
func (r *Runner) StopAll(reason string) []<-chan struct{} {
	r.mu.Lock()
	jobs := make([]*Job, 0, len(r.running))
	for _, j := range r.running {
		jobs = append(jobs, j)
	}
	r.mu.Unlock()
	var done []<-chan struct{}
	for _, j := range jobs {
		j.Stop(reason)
		done = append(done, j.Done())
	}
	return done
}

// env builds a job's environment: base, then the spec's, then ours (exec
// keeps the last of duplicate keys). The base loses its GPUFLEET_
// variables: the agent's own settings (its token among them) are not the
// job's business.
func (r *Runner) env(s Spec, sig syscall.Signal) []string {
	env := make([]string, 0, len(r.cfg.Env)+len(s.Env)+8)
	for _, e := range r.cfg.Env {
		if !strings.HasPrefix(e, "GPUFLEET_") {
			env = append(env, e)
		}
	}
	env = append(env, s.Env...)
	env = append(env,
		EnvVisibleDevices+"="+strings.Join(s.GPUs, ","),
		EnvCheckpointDir+"="+r.checkpointDir(s),
		EnvCheckpointSignal+"="+signalName(sig),
		EnvJobID+"="+s.ID,
	)
	if s.MPS != nil {
		env = append(env, EnvMPSThreadPct+"="+strconv.Itoa(s.MPS.ActiveThreadPct))
		if s.MPS.PinnedMemMiB > 0 {
			// Device ordinals as the job sees them, after
			// CUDA_VISIBLE_DEVICES: 0..len(GPUs)-1.
			n := max(len(s.GPUs), 1)
			limits := make([]string, n)
			for i := range limits {
				limits[i] = fmt.Sprintf("%d=%dM", i, s.MPS.PinnedMemMiB)
			}
			env = append(env, EnvMPSPinnedMem+"="+strings.Join(limits, ","))
		}
	}
	return env
}

// Exit is how a job ended.
type Exit struct {
	// Code is the exit status, or -1 when a signal ended the job.
	Code int
	// Signal is the signal that ended it, or 0.
	Signal syscall.Signal
	// UserCPU and SysCPU are the CPU time of the job's leader and the
	// children it waited for; MaxRSSKiB the largest resident set among
	// them (getrusage's ru_maxrss).
	UserCPU, SysCPU time.Duration
	MaxRSSKiB       int64
	Started, Ended  time.Time
	// Stopped is set when the job ended after Stop; Forced names the
	// last signal Stop had to send ("" when the job ended on its own).
	Stopped bool
	Forced  string
}

// Success reports whether the job exited with status 0.
func (e Exit) Success() bool { return e.Code == 0 && e.Signal == 0 }

// String says how the job ended, e.g. "exit 0" or "signal killed".
func (e Exit) String() string {
	if e.Signal != 0 {
		return "signal " + e.Signal.String()
	}
	return "exit " + strconv.Itoa(e.Code)
}

// signalName is a signal's short name (USR1, TERM) for the environment
// and events.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGUSR1:
		return "USR1"
	case syscall.SIGUSR2:
		return "USR2"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGQUIT:
		return "QUIT"
	}
	return strconv.Itoa(int(s))
}

// ParseSignal parses a signal name (USR1, SIGUSR1, TERM, …) or number,
// as a --checkpoint-signal flag would.
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		if signalName(sig) == name {
			return sig, nil
		}
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 && syscall.Signal(n) != syscall.SIGKILL && syscall.Signal(n) != syscall.SIGSTOP {
		return syscall.Signal(n), nil
	}
	return 0, &core.FieldError{Field: "checkpoint-signal", Value: s, Allowed: "USR1, USR2, TERM, INT, HUP, QUIT or a signal number other than KILL and STOP"}
}
