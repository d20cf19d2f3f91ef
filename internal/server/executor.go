package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/engine"
)

// An Executor runs units on the machines no node agent serves and says
// how each run ended. The loop takes a run's end from the machine's
// agent where it has one (the agent protocol, agents.go) and from the
// Executor otherwise. With no Executor (Config.Executor nil, what serve
// runs) a unit on a machine without an agent waits for the agent, and a
// lease whose agent does not join within AgentConfig.BootTimeout fails.
// Nothing else ends a run: no unit succeeds that its executor did not see
// exit 0.
type Executor interface {
	// Ended reports whether u's current run has ended by now, and how.
	Ended(u *engine.Unit, now time.Time) (Exit, bool)
}

// Exit is how a run ended.
type Exit struct {
	At   time.Time
	Code int
	// Reason says what ran and why it ended, for the unit's event.
	Reason string
}

// VirtualTime is the simulator's executor: every run takes its job's
// actual duration of virtual time (less the work saved before it) and
// exits 0; a job without one never ends. No process runs. It is for
// replays and tests on a manual clock, where the loop must decide
// exactly as the simulator does; a server that runs jobs uses agents.
type VirtualTime struct {
	// Actual is how long each job runs, by job ID, as the simulator's
	// workload has it (sim.Workload.Actual); a job not in it runs its
	// estimated duration.
	Actual map[string]time.Duration
}

// Ended implements Executor.
func (v VirtualTime) Ended(u *engine.Unit, now time.Time) (Exit, bool) {
	d, ok := v.Actual[u.Job.ID]
	what := "actual"
	if !ok {
		d, what = u.Job.EstDuration, "estimated"
	}
	if d <= 0 {
		return Exit{}, false
	}
	at := u.Start.Add(d - u.Done)
	if at.After(now) {
		return Exit{}, false
	}
	return Exit{At: at, Code: 0, Reason: fmt.Sprintf("virtual time: its %s duration %s has run and it exited 0 (no process runs under the virtual-time executor)", what, d)}, true
}

// sleepCommand is what an agent runs for a job that gave no command: a
// real process that lasts the job's estimated duration (what is left of
// it), or until the job is cancelled when it gave no estimate either.
func sleepCommand(u *engine.Unit) []string {
	if u.Job.EstDuration <= 0 {
		return []string{"sleep", "infinity"}
	}
	left := max(u.Job.EstDuration-u.Done, time.Second)
	secs := int64((left + time.Second - 1) / time.Second)
	return []string{"sleep", strconv.FormatInt(secs, 10)}
}
