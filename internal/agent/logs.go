package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/agent/runner"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// EventCheckpoint says a running job wrote to its checkpoint directory:
// the server then counts the work up to then as saved, so a requeue
// resumes from there rather than from the start of the run.
const EventCheckpoint = "job-checkpoint"

// maxLogChunk is the most bytes of a log one SendLog carries; the
// server's request limit is 1 MiB of JSON, base64 included.
const maxLogChunk = 256 << 10

// logShipper sends the jobs' local log files to the server. The file is
// the buffer: what the server has acknowledged is recorded next to it
// (log.sent, the byte offset), so a partition or an agent restart only
// delays the rest, and the server skips whatever arrives twice.
type logShipper struct {
	r    *runner.Runner
	up   link.LogSender
	log  *slog.Logger
	sent map[string]int64 // run → bytes acknowledged
	skip map[string]bool  // runs the server does not know: kept local
}

func newLogShipper(r *runner.Runner, up link.LogSender, log *slog.Logger) *logShipper {
	return &logShipper{r: r, up: up, log: log, sent: map[string]int64{}, skip: map[string]bool{}}
}

func (s *logShipper) loop(ctx context.Context, clk clock.Clock, every time.Duration) {
	for {
		s.ship(ctx)
		select {
		case <-ctx.Done():
			return
		case <-clk.After(every):
		}
	}
}

// ship sends what every job's log has beyond what the server has. It
// stops at the first failure: the server is away, the next round
// retries.
func (s *logShipper) ship(ctx context.Context) {
	dirs, err := os.ReadDir(s.r.JobsDir())
	if err != nil {
		return
	}
	for _, d := range dirs {
		if !d.IsDir() || s.skip[d.Name()] {
			continue
		}
		if err := s.shipRun(ctx, d.Name()); err != nil {
			if errors.Is(err, link.ErrUnknownRun) {
				s.skip[d.Name()] = true
				continue
			}
			if ctx.Err() == nil {
				s.log.Debug("log shipping deferred", "run", d.Name(), "err", err)
			}
			return
		}
	}
}

func (s *logShipper) shipRun(ctx context.Context, run string) error {
	path := s.r.LogPath(run)
	mark := path + ".sent"
	off, ok := s.sent[run]
	if !ok {
		if b, err := os.ReadFile(mark); err == nil {
			off, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		s.sent[run] = off
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // no log yet
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= off {
		return nil
	}
	buf := make([]byte, maxLogChunk)
	for off < st.Size() {
		n, err := f.ReadAt(buf, off)
		if n == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		}
		end, err := s.up.SendLog(ctx, run, off, buf[:n])
		var gap *link.LogGapError
		switch {
		case errors.As(err, &gap):
			end = gap.End // the server lost some (or we did): resend from its end
		case err != nil:
			return err
		}
		off = end
		s.sent[run] = off
		if err := os.WriteFile(mark, []byte(strconv.FormatInt(off, 10)), 0o640); err != nil {
			return err
		}
	}
	return nil
}

// checkpoints reports, once per change, that a running job's checkpoint
// directory changed since the job started.
func (a *agent) checkpoints(running []runner.Proc) {
	live := map[string]bool{}
	for _, p := range running {
		live[p.ID] = true
		st, err := os.Stat(p.CheckpointDir)
		if err != nil || !st.ModTime().After(p.Started) {
			continue
		}
		a.mu.Lock()
		seen := a.ckpt[p.ID]
		changed := st.ModTime().After(seen)
		if changed {
			a.ckpt[p.ID] = st.ModTime()
		}
		a.mu.Unlock()
		if changed {
			a.append(core.Event{At: st.ModTime(), Kind: EventCheckpoint, Subject: p.ID, Reason: "the job wrote to its checkpoint directory",
				Attrs: map[string]string{"checkpoint_dir": p.CheckpointDir, "team": p.Team}})
		}
	}
	a.mu.Lock()
	for id := range a.ckpt {
		if !live[id] {
			delete(a.ckpt, id)
		}
	}
	a.mu.Unlock()
}

// SpoolEpoch returns the name of the outbox incarnation under dataDir,
// creating it with a new spool: the server keys its high-water mark on
// it, so a wiped spool, which numbers its records from 1 again, is not
// taken for a resend of what it already has.
func SpoolEpoch(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "spool")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "epoch")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	id := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o640); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return id, nil
}
