//go:build linux

package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufleet/gpufleet/internal/core"
)

// maxLine is the longest line passed on whole; a longer one is passed on
// in pieces of this size.
const maxLine = 64 * 1024

// drainTimeout bounds how long the runner waits for a job's output pipes
// to close after the job's group is gone (a process that left the group
// with setsid may hold them open).
const drainTimeout = 5 * time.Second

// Job is one running (or finished) job.
type Job struct {
	r       *Runner
	spec    Spec
	sig     syscall.Signal
	grace   time.Duration
	pgid    int
	started time.Time
	attempt int

	logMu sync.Mutex
	log   *os.File

	mu       sync.Mutex
	exited   bool // the leader is dead: signal nothing any more
	stopping bool
	forced   string

	done chan struct{}
	exit Exit
}

// Start starts spec as a new process group and returns at once. A job
// with the same ID must not be running; one that ran before finds its
// checkpoint directory as it left it.
func (r *Runner) Start(spec Spec) (*Job, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("runner: job %s: %w", spec.ID, err)
	}
	spec.Command = append([]string(nil), spec.Command...)
	spec.GPUs = append([]string(nil), spec.GPUs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[spec.ID]; ok {
		return nil, fmt.Errorf("runner: job %s: already running", spec.ID)
	}
	for _, dir := range []string{r.JobDir(spec.ID), r.checkpointDir(spec)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("runner: job %s: %w", spec.ID, err)
		}
	}
	logf, err := os.OpenFile(r.LogPath(spec.ID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("runner: job %s: %w", spec.ID, err)
	}
	j := &Job{r: r, spec: spec, sig: r.cfg.CheckpointSignal, grace: r.cfg.Grace, log: logf, done: make(chan struct{}), attempt: r.attempt[spec.ID] + 1}
	if spec.CheckpointSignal != 0 {
		j.sig = spec.CheckpointSignal
	}
	if spec.Grace != 0 {
		j.grace = spec.Grace
	}

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Env = r.env(spec, j.sig)
	cmd.Dir = spec.Dir
	if cmd.Dir == "" {
		cmd.Dir = r.JobDir(spec.ID)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if r.cfg.DieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("runner: job %s: %w", spec.ID, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		logf.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("runner: job %s: %w", spec.ID, err)
	}
	// *os.File writers go to the child as they are: no copying goroutine
	// in os/exec, so Wait does not wait for the pipes.
	cmd.Stdout, cmd.Stderr = outW, errW
	j.started = r.cfg.Clock.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		logf.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("runner: job %s: start: %w", spec.ID, err)
	}
	j.pgid = cmd.Process.Pid
	r.attempt[spec.ID] = j.attempt
	r.running[spec.ID] = j
	j.logf("=== attempt %d started: pid %d, %s=%s", j.attempt, j.pgid, EnvVisibleDevices, strings.Join(spec.GPUs, ","))
	j.event(EventStarted, "started", map[string]string{
		"pid": strconv.Itoa(j.pgid), "attempt": strconv.Itoa(j.attempt), "gpus": strings.Join(spec.GPUs, ","),
		"checkpoint_dir": r.checkpointDir(spec),
	})
	r.cfg.Logger.Info("job started", "job", spec.ID, "pid", j.pgid, "gpus", spec.GPUs, "attempt", j.attempt)

	var readers sync.WaitGroup
	readers.Add(2)
	go j.read(&readers, outR, "stdout")
	go j.read(&readers, errR, "stderr")
	go j.wait(cmd, &readers, outR, errR)
	return j, nil
}

// ID returns the job's ID.
func (j *Job) ID() string { return j.spec.ID }

// PGID returns the job's process group id, its leader's pid.
func (j *Job) PGID() int { return j.pgid }

// Done is closed once the job has ended and its output is drained.
func (j *Job) Done() <-chan struct{} { return j.done }

// Exit waits for the job to end and returns how it ended.
func (j *Job) Exit() Exit {
	<-j.done
	return j.exit
}

// signal sends sig to the job's whole group, unless the job has ended.
// The leader is not reaped until the group has been killed (see wait), so
// the group id cannot have been reused by another process.
func (j *Job) signal(sig syscall.Signal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exited {
		return false
	}
	if err := syscall.Kill(-j.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		j.r.cfg.Logger.Warn("signal failed", "job", j.spec.ID, "signal", signalName(sig), "err", err)
	}
	return true
}

// Checkpoint sends the checkpoint signal to the job's group and nothing
// more: the job is expected to write a checkpoint and carry on.
func (j *Job) Checkpoint(reason string) bool {
	if !j.signal(j.sig) {
		return false
	}
	j.event(EventSignal, reason, map[string]string{"signal": signalName(j.sig), "step": "checkpoint"})
	return true
}

// Stop ends the job politely, then less so: the checkpoint signal, Grace
// to exit, SIGTERM, TermGrace, SIGKILL — each to the whole group. It
// returns at once; Done says when the job has ended. Calling it again
// does nothing.
func (j *Job) Stop(reason string) {
	j.mu.Lock()
	if j.exited || j.stopping {
		j.mu.Unlock()
		return
	}
	j.stopping = true
	j.mu.Unlock()
	go j.escalate(reason)
}

// Kill sends SIGKILL to the job's group now.
func (j *Job) Kill(reason string) {
	j.mu.Lock()
	j.stopping = true
	j.forced = "kill"
	j.mu.Unlock()
	if j.signal(syscall.SIGKILL) {
		j.event(EventSignal, reason, map[string]string{"signal": "KILL", "step": "kill"})
	}
}

func (j *Job) escalate(reason string) {
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
		step string
	}{
		{j.sig, j.grace, "checkpoint"},
		{syscall.SIGTERM, j.r.cfg.TermGrace, "term"},
		{syscall.SIGKILL, 0, "kill"},
	}
	for _, s := range steps {
		j.mu.Lock()
		if s.step != "checkpoint" {
			j.forced = s.step
		}
		j.mu.Unlock()
		if !j.signal(s.sig) {
			return
		}
		// The timer is set before the event goes out, so whoever sees
		// the event may move a manual clock past the grace.
		var timer <-chan time.Time
		attrs := map[string]string{"signal": signalName(s.sig), "step": s.step}
		if s.wait > 0 {
			timer = j.r.cfg.Clock.After(s.wait)
			attrs["next_in"] = s.wait.String()
		}
		j.event(EventSignal, reason, attrs)
		if s.sig == syscall.SIGKILL {
			return
		}
		select {
		case <-j.done:
			return
		case <-timer:
		}
	}
}

// read passes the lines of one of the job's streams to the log file and
// the sink until the pipe closes.
func (j *Job) read(wg *sync.WaitGroup, r io.Reader, stream string) {
	defer wg.Done()
	br := bufio.NewReaderSize(r, maxLine)
	continued := false // the previous piece was a long line's prefix
	for {
		line, isPrefix, err := br.ReadLine()
		// A long line's end may come back empty: it is not a line.
		if len(line) > 0 || (err == nil && !isPrefix && !continued) {
			j.line(stream, string(line))
		}
		if err != nil {
			return
		}
		continued = isPrefix
	}
}

func (j *Job) line(stream, text string) {
	now := j.r.cfg.Clock.Now()
	j.logMu.Lock()
	fmt.Fprintf(j.log, "%s %s %s\n", now.UTC().Format(time.RFC3339Nano), stream, text)
	j.logMu.Unlock()
	if j.r.cfg.Logs != nil {
		j.r.cfg.Logs.Line(Line{Job: j.spec.ID, Stream: stream, At: now, Text: text})
	}
}

func (j *Job) logf(format string, args ...any) {
	j.logMu.Lock()
	defer j.logMu.Unlock()
	fmt.Fprintf(j.log, "%s agent %s\n", j.r.cfg.Clock.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// wait waits for the leader to exit without reaping it, kills what is
// left of its group (a job is over when its leader is), reaps it, drains
// the output and reports the exit.
func (j *Job) wait(cmd *exec.Cmd, readers *sync.WaitGroup, outR, errR *os.File) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, j.pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil || !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	j.mu.Lock()
	// The leader is a zombie: its pid, and so the group id, is not free
	// for reuse, so this reaches only the job's own stragglers.
	syscall.Kill(-j.pgid, syscall.SIGKILL)
	j.exited = true
	stopped, forced := j.stopping, j.forced
	j.mu.Unlock()
	werr := cmd.Wait()

	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-j.r.cfg.Clock.After(drainTimeout):
		// A process outside the group holds the pipes; stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	e := Exit{Code: -1, Started: j.started, Ended: j.r.cfg.Clock.Now(), Stopped: stopped, Forced: forced}
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			if ws.Signaled() {
				e.Signal = ws.Signal()
			} else {
				e.Code = ws.ExitStatus()
			}
		}
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			e.UserCPU = time.Duration(ru.Utime.Nano())
			e.SysCPU = time.Duration(ru.Stime.Nano())
			e.MaxRSSKiB = ru.Maxrss
		}
	} else if werr != nil {
		j.r.cfg.Logger.Error("job wait failed", "job", j.spec.ID, "err", werr)
	}
	j.exit = e
	j.logf("=== attempt %d ended: %s, user %s, sys %s, max rss %d KiB", j.attempt, e, e.UserCPU, e.SysCPU, e.MaxRSSKiB)
	j.log.Close()

	j.r.mu.Lock()
	delete(j.r.running, j.spec.ID)
	j.r.mu.Unlock()
	attrs := map[string]string{
		"exit_code":   strconv.Itoa(e.Code),
		"user_cpu_ms": strconv.FormatInt(e.UserCPU.Milliseconds(), 10),
		"sys_cpu_ms":  strconv.FormatInt(e.SysCPU.Milliseconds(), 10),
		"max_rss_kib": strconv.FormatInt(e.MaxRSSKiB, 10),
		"attempt":     strconv.Itoa(j.attempt),
		"stopped":     strconv.FormatBool(e.Stopped),
	}
	if e.Signal != 0 {
		attrs["signal"] = signalName(e.Signal)
	}
	if e.Forced != "" {
		attrs["forced"] = e.Forced
	}
	j.event(EventExited, e.String(), attrs)
	j.r.cfg.Logger.Info("job ended", "job", j.spec.ID, "exit", e.String(), "stopped", e.Stopped)
	close(j.done)
}

func (j *Job) event(kind, reason string, attrs map[string]string) {
	if j.r.cfg.Events == nil {
		return
	}
	if j.spec.Team != "" {
		attrs["team"] = j.spec.Team
	}
	j.r.cfg.Events.JobEvent(core.Event{At: j.r.cfg.Clock.Now(), Kind: kind, Subject: j.spec.ID, Reason: reason, Attrs: attrs})
}
