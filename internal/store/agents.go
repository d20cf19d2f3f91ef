package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// AgentState is what the server believes of a node agent: ok while it
// heartbeats, suspect once it has been silent past the suspect threshold,
// down past the down threshold (its jobs are then requeued).
type AgentState string

// The agent states.
const (
	AgentOK      AgentState = "ok"
	AgentSuspect AgentState = "suspect"
	AgentDown    AgentState = "down"
)

// ParseAgentState validates an agent state name for field.
func ParseAgentState(field, s string) (AgentState, error) {
	switch AgentState(s) {
	case AgentOK, AgentSuspect, AgentDown:
		return AgentState(s), nil
	}
	return "", &core.FieldError{Field: field, Value: s, Allowed: "one of ok, suspect, down"}
}

// AgentGPU is one device an agent reports.
type AgentGPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MIG         bool   `json:"mig,omitempty"`
	MemTotalMiB int64  `json:"mem_total_mib"`
}

// Agent is a node agent (one per machine) as the server knows it.
type Agent struct {
	ID string
	// LeaseID is the lease whose machine the agent runs on; empty while
	// the machine is not leased (a joined machine of the static pool).
	LeaseID string
	// OfferID is the offer the agent declared its machine to be.
	OfferID string
	Version string
	// Source is the GPU source the agent reads (nvml, nvidia-smi, dcgm,
	// fake).
	Source string
	GPUs   []AgentGPU
	// Running are the run IDs the agent last said it runs.
	Running []string
	State   AgentState
	StateAt time.Time
	Joined  time.Time
	// LastSeen is the last heartbeat (or any request) from the agent.
	LastSeen time.Time
	// Epoch names the agent's outbox incarnation: a new spool numbers
	// its records from 1 again, so AppliedSeq counts within an epoch.
	Epoch string
	// AppliedSeq is the highest record sequence number applied: a batch
	// resent after a lost reply is acknowledged without applying again.
	AppliedSeq int64
	// Backlog is how many records the agent said wait in its outbox.
	Backlog int64
	// TokenID is the credential the agent joined with: no other may
	// speak for it while that one is active. SaveHeartbeat sets it when
	// given; TouchAgent matches only an agent bound to it.
	TokenID string
}

// AgentFilter selects agents; zero fields match everything.
type AgentFilter struct {
	States  []AgentState
	LeaseID string
	Limit   int
	Cursor  string
}

// The kinds of agent commands (the agent's link.CommandKind values).
const (
	CommandRun        = "run"
	CommandCheckpoint = "checkpoint"
	CommandStop       = "stop"
	CommandKill       = "kill"
)

// AgentCommand is an instruction queued for an agent until it
// acknowledges it. ID makes it idempotent: queueing an ID again does
// nothing, and the agent carries an ID out once.
type AgentCommand struct {
	ID    string
	Agent string
	Kind  string
	// Unit, Job, Team and Run say what the command is about: the unit
	// key, its job and team, and the run (one start of the unit on one
	// agent) that the agent's job events will name.
	Unit, Job, Team, Run string
	// Spec is the command as sent to the agent, JSON; the store does not
	// read it.
	Spec   string
	Reason string
	// Created is when it was queued; Acked when the agent acknowledged
	// it (zero while pending), Result what it said (ok or an error).
	Created time.Time
	Acked   time.Time
	Result  string
}

// AgentReport is a job event of an agent waiting for the control loop:
// the API stores it in the same transaction that applies the agent's
// batch, the loop consumes it in the transaction that acts on it, so an
// exit status is neither lost nor applied twice across restarts.
type AgentReport struct {
	Seq    int64
	Agent  string
	Kind   string
	Run    string
	At     time.Time
	Reason string
	Attrs  map[string]string
}

// MaxReports is the most reports PendingReports returns at once.
const MaxReports = 10_000

// Agents keeps node agents, their command queues and their reports.
type Agents interface {
	// SaveHeartbeat records a heartbeat (the first one is the join): it
	// creates the agent, or updates its offer, version, source, GPUs,
	// running runs, backlog and last seen time, and sets it ok. A.LeaseID
	// replaces the lease when set and is kept when empty; Joined is set on
	// creation only; Epoch and AppliedSeq are not touched. It returns the
	// agent as it was before (the zero Agent when created).
	SaveHeartbeat(ctx context.Context, a Agent) (prev Agent, created bool, err error)
	// TouchAgent is SaveHeartbeat's common case in one statement: when
	// the agent exists, is ok and is bound to a.TokenID, it records the heartbeat exactly as
	// SaveHeartbeat would and returns the agent's lease and true; else it
	// changes nothing and returns false (join or recovery: SaveHeartbeat,
	// with its event, in a transaction).
	TouchAgent(ctx context.Context, a Agent) (lease string, ok bool, err error)
	// GetAgent returns the agent with id.
	GetAgent(ctx context.Context, id string) (Agent, error)
	// ListAgents returns the agents f selects in join order.
	ListAgents(ctx context.Context, f AgentFilter) (Page[Agent], error)
	// SetAgentState moves an agent to state at at.
	SetAgentState(ctx context.Context, id string, state AgentState, at time.Time) error
	// BindAgent sets the lease the agent's machine serves; "" frees it.
	BindAgent(ctx context.Context, id, leaseID string) error
	// AdvanceAgent records that the agent's records up to seq of epoch
	// are applied.
	AdvanceAgent(ctx context.Context, id, epoch string, seq int64) error

	// EnqueueCommands queues commands; an ID queued before is skipped.
	// An unknown agent is ErrNotFound.
	EnqueueCommands(ctx context.Context, cmds ...AgentCommand) error
	// PendingCommands returns the agent's unacknowledged commands in
	// the order queued.
	PendingCommands(ctx context.Context, agent string) ([]AgentCommand, error)
	// GetCommand returns the command with id.
	GetCommand(ctx context.Context, id string) (AgentCommand, error)
	// AckCommand acknowledges the agent's command id with result; a
	// command acknowledged before keeps its first acknowledgement.
	AckCommand(ctx context.Context, agent, id string, at time.Time, result string) error

	// AppendReports stores reports for the loop.
	AppendReports(ctx context.Context, rs ...AgentReport) error
	// PendingReports returns up to limit reports (0: MaxReports) in the
	// order stored.
	PendingReports(ctx context.Context, limit int) ([]AgentReport, error)
	// DeleteReports removes the reports with the given sequence numbers:
	// the loop has acted on them. It takes the numbers read, not a bound,
	// because on PostgreSQL a report can commit after a later-numbered one
	// was read; deleting up to a bound would drop it unread.
	DeleteReports(ctx context.Context, seqs []int64) error
}

// ValidateAgent reports the first problem with a's identity and fields.
func ValidateAgent(a *Agent) error {
	if err := CheckID("agent", a.ID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"lease_id", a.LeaseID}, {"offer", a.OfferID}, {"version", a.Version}, {"source", a.Source}, {"epoch", a.Epoch}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
		if len(f.v) > MaxIDLen {
			return &core.FieldError{Field: f.name, Value: abbrev(f.v), Allowed: fmt.Sprintf("at most %d bytes", MaxIDLen)}
		}
	}
	if a.State != "" {
		if _, err := ParseAgentState("state", string(a.State)); err != nil {
			return err
		}
	}
	if len(a.GPUs) > 1024 {
		return &core.FieldError{Field: "gpus", Value: fmt.Sprint(len(a.GPUs)), Allowed: "at most 1024 devices"}
	}
	for i, g := range a.GPUs {
		if err := checkNonNeg(fmt.Sprintf("gpus[%d].index", i), int64(g.Index)); err != nil {
			return err
		}
		if err := CheckText(fmt.Sprintf("gpus[%d].uuid", i), g.UUID+g.Model); err != nil {
			return err
		}
	}
	if len(a.Running) > 4096 {
		return &core.FieldError{Field: "jobs", Value: fmt.Sprint(len(a.Running)), Allowed: "at most 4096 running jobs"}
	}
	for i, r := range a.Running {
		if err := CheckID(fmt.Sprintf("jobs[%d]", i), r); err != nil {
			return err
		}
	}
	if err := checkNonNeg("applied_seq", a.AppliedSeq); err != nil {
		return err
	}
	return checkNonNeg("backlog", a.Backlog)
}

// ValidateCommand reports the first problem with c.
func ValidateCommand(c *AgentCommand) error {
	if err := CheckID("command.id", c.ID); err != nil {
		return err
	}
	if err := CheckID("command.agent", c.Agent); err != nil {
		return err
	}
	switch c.Kind {
	case CommandRun, CommandCheckpoint, CommandStop, CommandKill:
	default:
		return &core.FieldError{Field: "command.kind", Value: c.Kind, Allowed: "run, checkpoint, stop or kill"}
	}
	for _, f := range []struct{ name, v string }{{"command.unit", c.Unit}, {"command.job", c.Job}, {"command.team", c.Team}, {"command.run", c.Run}, {"command.spec", c.Spec}, {"command.reason", c.Reason}, {"command.result", c.Result}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Created.IsZero() {
		return &core.FieldError{Field: "command.created", Value: "", Allowed: "the time it was queued"}
	}
	return nil
}

// ValidateReport reports the first problem with r.
func ValidateReport(r *AgentReport) error {
	if err := CheckID("report.agent", r.Agent); err != nil {
		return err
	}
	if err := CheckID("report.kind", r.Kind); err != nil {
		return err
	}
	if err := CheckText("report.run", r.Run); err != nil {
		return err
	}
	if err := CheckText("report.reason", r.Reason); err != nil {
		return err
	}
	if r.At.IsZero() {
		return &core.FieldError{Field: "report.at", Value: "", Allowed: "the time of the event"}
	}
	for k, v := range r.Attrs {
		if err := CheckText("report.attrs", k+v); err != nil {
			return err
		}
	}
	return nil
}
