package server

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	fleetpkg "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/store"
)

// AgentConfig is how the loop works with node agents.
type AgentConfig struct {
	// SuspectAfter and DownAfter are how long an agent may be silent
	// before it is suspect (30 s) and down (90 s). A down agent's lease
	// is marked failed and its units go back to the queue from their
	// last checkpoints.
	SuspectAfter, DownAfter time.Duration
	// CheckpointRoot, when set, is storage every machine mounts: each
	// unit checkpoints into CheckpointRoot/<unit>, so a run resumed on
	// another machine finds what the last one saved. Empty leaves
	// checkpoints in each agent's data directory (a resumed run then
	// starts over unless it lands on the same machine).
	CheckpointRoot string
	// Grace is the time a stopping job has after the checkpoint signal
	// (0: the agent's default).
	Grace time.Duration
	// LogRetention is how long job log chunks are kept (14 days): the
	// loop removes older ones once an hour.
	LogRetention time.Duration
	// BootTimeout is how long a ready machine may go without its agent
	// joining (10 min) when no Executor runs units without one: then its
	// lease fails, is released, and its units go back to the queue.
	BootTimeout time.Duration
	// JoinTTL is how long a lease's join token lives (the boot timeout
	// and DefaultJoinMargin): the machine's provisioning, its boot and
	// its agent's start must fit in it.
	JoinTTL time.Duration
}

// DefaultBootTimeout is AgentConfig.BootTimeout's default: a cloud
// machine's boot and the agent's install take minutes, not ten.
const DefaultBootTimeout = 10 * time.Minute

func (c AgentConfig) withDefaults() AgentConfig {
	if c.SuspectAfter <= 0 {
		c.SuspectAfter = 30 * time.Second
	}
	if c.DownAfter <= c.SuspectAfter {
		c.DownAfter = max(3*c.SuspectAfter, 90*time.Second)
	}
	if c.LogRetention <= 0 {
		c.LogRetention = 14 * 24 * time.Hour
	}
	if c.BootTimeout <= 0 {
		c.BootTimeout = DefaultBootTimeout
	}
	if c.JoinTTL <= 0 {
		c.JoinTTL = c.BootTimeout + DefaultJoinMargin
	}
	return c
}

// AgentConfigurer is a provider that knows how the loop should treat
// its agents (the agent pool, configured from its file): used when the
// loop's Config leaves Agents zero.
type AgentConfigurer interface {
	AgentConfig() AgentConfig
}

// agentConfig is the agent configuration in force, defaults filled in.
func (l *Loop) agentConfig() AgentConfig {
	c := l.cfg.Agents
	if c == (AgentConfig{}) {
		if p, ok := l.cfg.Provider.(AgentConfigurer); ok {
			c = p.AgentConfig()
		}
	}
	return c.withDefaults()
}

// agentTracker is the loop's memory of what it queued for agents, so
// that a command resent each tick is written once. It is only a cache:
// command IDs are deterministic and queueing one twice does nothing, so
// a restarted loop starts with it empty.
type agentTracker struct {
	queued map[string]bool
	// exited are runs whose exit an agent reported: a heartbeat that
	// still lists one is late, not a stale run to kill.
	exited map[string]bool
	// pruned is when log retention last ran.
	pruned time.Time
}

// trackerCap bounds the tracker's memory on a long-running server.
const trackerCap = 100_000

// agentTick is one tick's view of the agents, made before engine.Step
// and written with the tick's decisions.
type agentTick struct {
	l   *Loop
	now time.Time
	// byLease is the agent serving each live lease.
	byLease map[string]*store.Agent
	agents  []store.Agent
	// driven are the units whose run is the agent's business: on a
	// lease with an agent, and with a command to run.
	prev map[string]runRef // unit key → its run before the step
	// ended are runs an agent reported over this tick.
	ended   map[string]bool
	states  map[string]store.AgentState
	unbind  []string
	release []string
	// read are the reports this tick acted on, deleted with its commit.
	read []int64
	cmds []store.AgentCommand
	// events are what the commands tell of themselves (a job without a
	// command runs sleep), written with them.
	events []core.Event
}

// runRef is one run of one part of a unit on one agent.
type runRef struct {
	run, agent, lease string
	part              int
}

// runID names a run for the agent's runner: letters, digits, '.', '_'
// and '-' (unit keys may hold anything else, so a hash keeps it unique).
// A run is one placement of a unit: the hash covers the lease it is on,
// and since, when the unit last became pending, tells a unit placed
// again (after a requeue) from the same placement. Not the start: the
// engine moves a unit's start to its checkpoint on a reclaim notice
// while the same process runs on.
func runID(key string, since time.Time, lease string, part int) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	h := fnv.New32a()
	h.Write([]byte(key + "\x00" + lease))
	id := fmt.Sprintf("%s-%08x-%s", strings.TrimLeft(b.String(), "._-"), h.Sum32(), strconv.FormatInt(since.UnixMicro(), 36))
	if id[0] == '-' {
		id = "u" + id
	}
	if part > 0 {
		id += "-p" + strconv.Itoa(part)
	}
	return id
}

// runsOf returns the current runs of the units driven by agents.
func (t *agentTick) runsOf(st *engine.State) map[string]runRef {
	out := map[string]runRef{}
	for _, u := range st.Units {
		if u.State != core.JobRunning && u.State != core.JobCheckpointing {
			continue
		}
		for i, p := range u.Parts {
			a := t.byLease[p.LeaseID]
			if a == nil {
				continue
			}
			key := u.Key()
			if i > 0 {
				key += "/" + strconv.Itoa(i)
			}
			out[key] = runRef{run: runID(u.Key(), u.Since, p.LeaseID, i), agent: a.ID, lease: p.LeaseID, part: i}
		}
	}
	return out
}

// agentDriven reports whether u's end is for an agent to report rather
// than for the loop's Executor: it runs on a machine an agent serves.
func (t *agentTick) agentDriven(u *engine.Unit) bool {
	for _, p := range u.Parts {
		if t.byLease[p.LeaseID] != nil {
			return true
		}
	}
	return false
}

// agentsBefore reads the agents and their reports and applies them to
// st: exits finish or fail units, checkpoints move their saved point,
// silence makes agents suspect, then down (their units requeued from
// their checkpoints). It returns the events and the tick's agent view.
func (l *Loop) agentsBefore(ctx context.Context, st *engine.State, now time.Time) (*agentTick, []core.Event, error) {
	cfg := l.agentConfig()
	if l.tracker == nil {
		l.tracker = &agentTracker{queued: map[string]bool{}, exited: map[string]bool{}}
	}
	t := &agentTick{l: l, now: now, byLease: map[string]*store.Agent{}, ended: map[string]bool{}, states: map[string]store.AgentState{}}
	f := store.AgentFilter{Limit: store.MaxLimit}
	for {
		page, err := l.cfg.Store.Agents().ListAgents(ctx, f)
		if err != nil {
			return nil, nil, fmt.Errorf("tick: agents: %w", err)
		}
		t.agents = append(t.agents, page.Items...)
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	live := map[string]*engine.Lease{}
	for _, le := range st.Leases {
		if !le.State.Final() {
			live[le.ID] = le
		}
	}
	var events []core.Event
	// Silence first: a down agent's units are requeued before its late
	// reports could count.
	for i := range t.agents {
		a := &t.agents[i]
		silent := now.Sub(a.LastSeen)
		switch {
		case a.State != store.AgentDown && silent >= cfg.DownAfter:
			t.states[a.ID] = store.AgentDown
			events = append(events, core.Event{At: now, Kind: "agent.down", Subject: a.ID,
				Reason: fmt.Sprintf("agent %s silent for %s (down after %s)", a.ID, silent.Round(time.Millisecond), cfg.DownAfter)})
			a.State = store.AgentDown
			if le := live[a.LeaseID]; le != nil {
				events = append(events, requeueLease(st, le.ID, now, fmt.Sprintf("its agent %s is down (silent for %s)", a.ID, silent.Round(time.Millisecond)))...)
				engine.OnFailed(st, le.ID, now)
				events = append(events, core.Event{At: now, Kind: "lease.failed", Subject: le.ID,
					Reason: fmt.Sprintf("its agent %s is down: the machine is lost to the fleet until the agent returns", a.ID)})
				if le.ProviderID != "" {
					t.release = append(t.release, le.ProviderID)
				}
			}
			if a.LeaseID != "" {
				t.unbind = append(t.unbind, a.ID)
			}
		case a.State == store.AgentOK && silent >= cfg.SuspectAfter:
			t.states[a.ID] = store.AgentSuspect
			a.State = store.AgentSuspect
			events = append(events, core.Event{At: now, Kind: "agent.suspect", Subject: a.ID,
				Reason: fmt.Sprintf("agent %s silent for %s (suspect after %s, down after %s)", a.ID, silent.Round(time.Millisecond), cfg.SuspectAfter, cfg.DownAfter)})
		}
		if a.State != store.AgentDown && a.LeaseID != "" && live[a.LeaseID] != nil {
			t.byLease[a.LeaseID] = a
		}
	}

	// Machines whose agent never came: without an Executor nothing can
	// run their units, so the lease fails and the units wait elsewhere.
	if l.cfg.Executor == nil {
		for _, le := range st.Leases {
			if le.State != core.LeaseReady || le.ReadyAt.IsZero() || t.byLease[le.ID] != nil || now.Sub(le.ReadyAt) < cfg.BootTimeout {
				continue
			}
			why := fmt.Sprintf("no agent joined its machine within the boot timeout %s of it being ready", cfg.BootTimeout)
			events = append(events, requeueLease(st, le.ID, now, why)...)
			engine.OnFailed(st, le.ID, now)
			events = append(events, core.Event{At: now, Kind: "lease.failed", Subject: le.ID, Reason: why + ": released"})
			if le.ProviderID != "" {
				t.release = append(t.release, le.ProviderID)
			}
		}
	}

	if now.Sub(l.tracker.pruned) >= time.Hour {
		n, err := l.cfg.Store.JobLogs().DeleteLogsBefore(ctx, now.Add(-cfg.LogRetention))
		if err != nil {
			return nil, nil, fmt.Errorf("tick: log retention: %w", err)
		}
		l.tracker.pruned = now
		if n > 0 {
			l.cfg.Log.Info("job logs past retention removed", "chunks", n, "retention", cfg.LogRetention)
		}
	}

	reports, err := l.cfg.Store.Agents().PendingReports(ctx, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("tick: agent reports: %w", err)
	}
	// A report counts whether or not its agent still serves a live lease:
	// a run that exited and said so before its machine was lost (the
	// provider reported it failed this tick, or a new leader, whose
	// provider does not list the old leader's machines, marked its lease
	// failed on taking over) ended as it reported; requeueing it instead
	// would run it twice. Run ids name one placement, so a report matches
	// only the placement it was made for.
	byRun := map[string]string{} // run → unit key
	for _, u := range st.Units {
		if (u.State == core.JobRunning || u.State == core.JobCheckpointing) && len(u.Parts) > 0 {
			byRun[runID(u.Key(), u.Since, u.Parts[0].LeaseID, 0)] = u.Key()
		}
	}
	units := map[string]*engine.Unit{}
	for _, u := range st.Units {
		units[u.Key()] = u
	}
	for _, rep := range reports {
		t.read = append(t.read, rep.Seq)
		if rep.Kind == spotNoticeReport {
			events = append(events, l.spotNotice(st, t, rep, now)...) // spotnotice.go
			continue
		}
		key, current := byRun[rep.Run]
		if !current {
			continue // a run that already ended, or a part other than the leader
		}
		u := units[key]
		switch rep.Kind {
		case "job-checkpoint":
			engine.OnCheckpoint(st, u, rep.At, now)
		case "job-exited":
			t.ended[rep.Run] = true
			l.tracker.exited[rep.Run] = true
			events = append(events, l.exited(st, u, rep, now)...)
		case "run-refused":
			t.ended[rep.Run] = true
			engine.FailUnit(st, u, now)
			events = append(events, core.Event{At: now, Kind: "unit.failed", Subject: u.Key(), Attrs: map[string]string{"agent": rep.Agent, "run": rep.Run},
				Reason: fmt.Sprintf("agent %s could not start run %s: %s", rep.Agent, rep.Run, rep.Reason)})
		}
	}
	t.prev = t.runsOf(st)
	if err := t.readings(ctx, st, now); err != nil {
		return nil, nil, err
	}
	return t, events, nil
}

// readingsWindow is how old a GPU's latest sample may be and still count
// as what the GPU does now.
const readingsWindow = time.Minute

// readings gives the idle ladder (fleet.Ladder, run by engine.Step) the
// latest utilization the agents reported of each GPU an agent-run unit
// holds, and NoProcess where the sample lists the GPU's processes per run
// (core.Sample.Procs, from the agent's GPU source) and none is the unit's
// current run: the zombie rung. A run the sample does not name (it had
// not started when the sample was taken, or its source lists no
// processes) is not known to have none.
func (t *agentTick) readings(ctx context.Context, st *engine.State, now time.Time) error {
	st.Readings = st.Readings[:0]
	if len(t.byLease) == 0 {
		return nil
	}
	latest, err := t.l.cfg.Store.Samples().LatestSamples(ctx, now.Add(-readingsWindow))
	if err != nil {
		return fmt.Errorf("tick: latest samples: %w", err)
	}
	type gpuKey struct {
		lease string
		gpu   int
	}
	by := map[gpuKey]core.Sample{}
	for _, s := range latest {
		by[gpuKey{s.LeaseID, s.GPU}] = s
	}
	for _, u := range st.Units {
		if (u.State != core.JobRunning && u.State != core.JobCheckpointing) || !t.agentDriven(u) {
			continue
		}
		for i, p := range u.Parts {
			run := runID(u.Key(), u.Since, p.LeaseID, i)
			for _, g := range p.GPUs {
				if s, ok := by[gpuKey{p.LeaseID, g}]; ok && !s.At.Before(u.Start) {
					n, known := s.Procs[run]
					st.Readings = append(st.Readings, fleetpkg.GPUReading{LeaseID: p.LeaseID, GPU: g, Unit: u.Key(), Team: u.Job.Team, UtilPct: s.UtilPct, At: s.At,
						NoProcess: known && n == 0})
				}
			}
		}
	}
	return nil
}

// exited applies a run's exit to its unit: exit 0 of a run nobody asked
// to stop is success; a run the agent stopped itself (it is shutting
// down) goes back to the queue from its checkpoint; anything else fails
// the unit.
func (l *Loop) exited(st *engine.State, u *engine.Unit, rep store.AgentReport, now time.Time) []core.Event {
	at := rep.At
	if at.After(now) || at.Before(u.Start) {
		at = now
	}
	use := fmt.Sprintf("user %sms, sys %sms, max rss %s KiB", orDash(rep.Attrs["user_cpu_ms"]), orDash(rep.Attrs["sys_cpu_ms"]), orDash(rep.Attrs["max_rss_kib"]))
	attrs := map[string]string{"agent": rep.Agent, "run": rep.Run, "exit_code": rep.Attrs["exit_code"], "signal": rep.Attrs["signal"],
		"user_cpu_ms": rep.Attrs["user_cpu_ms"], "sys_cpu_ms": rep.Attrs["sys_cpu_ms"], "max_rss_kib": rep.Attrs["max_rss_kib"]}
	switch {
	case rep.Attrs["stopped"] == "true":
		ev := requeueUnit(st, u, now, fmt.Sprintf("agent %s stopped run %s itself (%s, %s): back to the queue from its last checkpoint", rep.Agent, rep.Run, rep.Reason, use))
		return []core.Event{ev}
	case rep.Attrs["exit_code"] == "0" && rep.Attrs["signal"] == "":
		engine.Finish(st, u.Key(), at)
		return []core.Event{{At: at, Kind: "unit.succeeded", Subject: u.Key(), Attrs: attrs,
			Reason: fmt.Sprintf("agent %s reports run %s exited 0 (%s)", rep.Agent, rep.Run, use)}}
	default:
		engine.FailUnit(st, u, at)
		return []core.Event{{At: at, Kind: "unit.failed", Subject: u.Key(), Attrs: attrs,
			Reason: fmt.Sprintf("agent %s reports run %s ended with %s (%s)", rep.Agent, rep.Run, rep.Reason, use)}}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// requeueUnit sends a running unit back to the queue (engine.RequeueUnit:
// the work up to its last checkpoint is kept, the rest counted as lost)
// and says so.
func requeueUnit(st *engine.State, u *engine.Unit, now time.Time, reason string) core.Event {
	ck, _ := engine.RequeueUnit(st, u, now)
	return core.Event{At: now, Kind: "unit.requeued", Subject: u.Key(), Reason: reason + fmt.Sprintf(" (checkpoint at %s)", ck.UTC().Format(time.RFC3339Nano))}
}

// requeueLease requeues every running unit with a part on lease.
func requeueLease(st *engine.State, lease string, now time.Time, why string) []core.Event {
	var out []core.Event
	for _, u := range st.Units {
		if (u.State == core.JobRunning || u.State == core.JobCheckpointing) && u.RunsOn(lease) {
			out = append(out, requeueUnit(st, u, now, why+": back to the queue from its last checkpoint"))
		}
	}
	return out
}

// commands works out, after the step, what the agents must be told: run
// what was placed, checkpoint what runs on a machine under a reclaim
// notice, stop what the step stopped (kill where the machine is gone or
// the job cancelled), and kill runs an agent still reports that are no
// longer the unit's (it was partitioned while they were requeued).
// unitsByKey returns the units of st whose keys are in need, by key. A
// sharded unit's key is a string made on each call, so only the units of
// the jobs need names have theirs made: a tick over a long queue of
// shards, few of them running, makes few.
func unitsByKey(st *engine.State, need map[string]bool) map[string]*engine.Unit {
	out := make(map[string]*engine.Unit, len(need))
	if len(need) == 0 {
		return out
	}
	jobs := make(map[string]bool, len(need))
	for k := range need {
		jobs[k] = true // an unsharded unit's key is its job's id
		if i := strings.LastIndexByte(k, '#'); i >= 0 {
			jobs[k[:i]] = true // a shard's is its job's id, '#', the shard
		}
	}
	for _, u := range st.Units {
		if jobs[u.Job.ID] {
			if k := u.Key(); need[k] {
				out[k] = u
			}
		}
	}
	return out
}

func (t *agentTick) commands(st *engine.State) {
	cur := t.runsOf(st)
	need := make(map[string]bool, len(cur)+len(t.prev))
	for key := range cur {
		need[strings.SplitN(key, "/", 2)[0]] = true
	}
	for key := range t.prev {
		need[strings.SplitN(key, "/", 2)[0]] = true
	}
	units := unitsByKey(st, need)
	leases := map[string]*engine.Lease{}
	for _, le := range st.Leases {
		leases[le.ID] = le
	}
	expected := map[string]bool{}
	for key, r := range cur {
		expected[r.run] = true
		base := strings.SplitN(key, "/", 2)[0]
		u := units[base]
		// Every current run gets its run command, not only a new one: a
		// unit placed before its machine's agent joined runs once the
		// agent is there. The store skips a command queued before.
		if !t.l.tracker.queued["run:"+r.run] {
			t.queue(t.runCommand(u, r))
		}
		if le := leases[r.lease]; le != nil && !le.ReclaimAt.IsZero() {
			t.queue(store.AgentCommand{ID: "checkpoint:" + r.run + ":" + strconv.FormatInt(le.ReclaimAt.Unix(), 10), Agent: r.agent, Kind: store.CommandCheckpoint,
				Unit: base, Job: u.Job.ID, Team: u.Job.Team, Run: r.run,
				Reason: fmt.Sprintf("spot reclaim notice: machine of lease %s goes at %s", r.lease, le.ReclaimAt.UTC().Format(time.RFC3339))})
		}
	}
	stopping := map[string]bool{} // runs told to stop or die this tick
	for key, p := range t.prev {
		if c, ok := cur[key]; (ok && c.run == p.run) || t.ended[p.run] {
			continue
		}
		base := strings.SplitN(key, "/", 2)[0]
		u := units[base]
		kind, why := store.CommandStop, "the scheduler stopped the unit (preempted, moved or its machine released)"
		switch {
		case u != nil && u.Job.State == core.JobCancelled:
			kind, why = store.CommandKill, "its job was cancelled"
		case leases[p.lease] != nil && leases[p.lease].State.Final():
			kind, why = store.CommandKill, fmt.Sprintf("its lease %s ended (%s)", p.lease, leases[p.lease].State)
		case u != nil && u.State.Final():
			kind, why = store.CommandKill, "the unit ended ("+string(u.State)+")"
		}
		stopping[p.run] = true
		c := store.AgentCommand{ID: kind + ":" + p.run, Agent: p.agent, Kind: kind, Unit: base, Run: p.run, Reason: why}
		if u != nil {
			c.Job, c.Team = u.Job.ID, u.Job.Team
		}
		t.queue(c)
	}
	for _, a := range t.agents {
		if a.State == store.AgentDown {
			continue
		}
		for _, run := range a.Running {
			// A run being stopped is left its grace to checkpoint; one
			// that exited is listed by a heartbeat older than its exit.
			if !expected[run] && !stopping[run] && !t.l.tracker.queued[store.CommandStop+":"+run] && !t.l.tracker.exited[run] && !t.ended[run] {
				t.queue(store.AgentCommand{ID: "kill:" + run, Agent: a.ID, Kind: store.CommandKill, Run: run,
					Reason: "the run is no longer the unit's: it was requeued while the agent was silent, or ended"})
			}
		}
	}
}

func (t *agentTick) runCommand(u *engine.Unit, r runRef) store.AgentCommand {
	cfg := t.l.agentConfig()
	part := u.Parts[r.part]
	command, why := u.Job.Command, fmt.Sprintf("placed on lease %s GPUs %v", r.lease, part.GPUs)
	if len(command) == 0 {
		command = sleepCommand(u)
		why += fmt.Sprintf("; the job gave no command, so its run is the process %q for its estimated duration", strings.Join(command, " "))
		t.events = append(t.events, core.Event{At: t.now, Kind: "unit.sleep", Subject: u.Key(), Attrs: map[string]string{"run": r.run, "agent": r.agent},
			Reason: fmt.Sprintf("the job gave no command: agent %s runs %q as its process (its estimated duration %s)", r.agent, strings.Join(command, " "), u.Job.EstDuration)})
	}
	spec := link.JobSpec{ID: r.run, Team: u.Job.Team, Command: command, GPUs: make([]string, len(part.GPUs)),
		GraceSeconds: int(cfg.Grace / time.Second)}
	for i, g := range part.GPUs {
		spec.GPUs[i] = strconv.Itoa(g)
	}
	if m := u.Job.Request.MilliPerGPU; m > 0 && m < core.WholeGPU {
		spec.MPSThreadPct = max(int(m/10), 1)
		if u.Job.Request.MemPerGPUMiB > 0 {
			spec.MPSPinnedMemMiB = u.Job.Request.MemPerGPUMiB
		}
	}
	if cfg.CheckpointRoot != "" {
		spec.CheckpointDir = filepath.Join(cfg.CheckpointRoot, runID(u.Key(), time.Unix(0, 0), "", 0))
	}
	b, _ := json.Marshal(link.Command{Kind: link.CommandRun, Job: spec, Reason: "placed"})
	return store.AgentCommand{ID: "run:" + r.run, Agent: r.agent, Kind: store.CommandRun, Unit: u.Key(), Job: u.Job.ID, Team: u.Job.Team, Run: r.run,
		Spec: string(b), Reason: why}
}

// queue adds c unless this loop queued it before.
func (t *agentTick) queue(c store.AgentCommand) {
	if t.l.tracker.queued[c.ID] {
		return
	}
	c.Created = t.now
	if c.Spec == "" {
		b, _ := json.Marshal(link.Command{Kind: link.CommandKind(c.Kind), Job: link.JobSpec{ID: c.Run}, Reason: c.Reason})
		c.Spec = string(b)
	}
	t.cmds = append(t.cmds, c)
}

// persist writes, in the tick's transaction, the agents' new states,
// the commands and the consumption of the reports acted on.
func (t *agentTick) persist(ctx context.Context, tx store.Tx, st *engine.State) error {
	t.cmds, t.events = nil, nil // the transaction may run again
	t.commands(st)
	if len(t.events) > 0 {
		if _, err := tx.Events().AppendEvents(ctx, t.events...); err != nil {
			return err
		}
	}
	for id, s := range t.states {
		if err := tx.Agents().SetAgentState(ctx, id, s, t.now); err != nil {
			return err
		}
	}
	for _, id := range t.unbind {
		if err := tx.Agents().BindAgent(ctx, id, ""); err != nil {
			return err
		}
	}
	if len(t.cmds) > 0 {
		if err := tx.Agents().EnqueueCommands(ctx, t.cmds...); err != nil {
			return err
		}
	}
	if len(t.read) > 0 {
		return tx.Agents().DeleteReports(ctx, t.read)
	}
	return nil
}

// committed runs once the tick's transaction is in: the cache learns
// the commands, and the machines of down agents go back to the provider.
func (t *agentTick) committed(ctx context.Context) {
	if tr := t.l.tracker; len(tr.queued) > trackerCap || len(tr.exited) > trackerCap {
		// Only a cache: forgetting it costs a few idempotent inserts.
		tr.queued, tr.exited = map[string]bool{}, map[string]bool{}
	}
	for _, c := range t.cmds {
		t.l.tracker.queued[c.ID] = true
	}
	for _, pid := range t.release {
		if err := t.l.cfg.Provider.Release(ctx, pid); err != nil {
			t.l.cfg.Log.Warn("release of a down agent's machine failed; reconcile retries it", "provider_id", pid, "err", err)
		}
	}
}
