//go:build !linux

package runner

import (
	"errors"
	"time"
)

// ErrUnsupported is returned by Start where the runner cannot control
// process groups as it must.
var ErrUnsupported = errors.New("runner: jobs run on Linux only")

// Job is a running job; on this system there never is one.
type Job struct {
	spec    Spec
	pgid    int
	started time.Time
	done    chan struct{}
	exit    Exit
}

// Start refuses: the runner needs Linux.
func (r *Runner) Start(spec Spec) (*Job, error) { return nil, ErrUnsupported }

// ID returns the job's ID.
func (j *Job) ID() string { return j.spec.ID }

// PGID returns the job's process group id.
func (j *Job) PGID() int { return j.pgid }

// Done is closed once the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Exit returns how the job ended.
func (j *Job) Exit() Exit { <-j.done; return j.exit }

// Checkpoint does nothing.
func (j *Job) Checkpoint(string) bool { return false }

// Stop does nothing.
func (j *Job) Stop(string) {}

// Kill does nothing.
func (j *Job) Kill(string) {}
