package link

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Unknown marks a Sample value the GPU source could not tell.
const Unknown = -1

// Kind says what a Record holds.
type Kind string

// The kinds of records.
const (
	KindSample  Kind = "sample"
	KindEvent   Kind = "event"
	KindSummary Kind = "summary"
)

// Record is one entry of the agent's outbox: exactly one of Sample, Event
// and Summary is set, as Kind says.
type Record struct {
	Seq     uint64      `json:"seq"`
	Kind    Kind        `json:"kind"`
	Sample  *Sample     `json:"sample,omitempty"`
	Event   *core.Event `json:"event,omitempty"`
	Summary *Summary    `json:"summary,omitempty"`
}

// Validate reports whether r holds what its Kind says.
func (r Record) Validate() error {
	ok := false
	switch r.Kind {
	case KindSample:
		ok = r.Sample != nil && r.Event == nil && r.Summary == nil
	case KindEvent:
		ok = r.Event != nil && r.Sample == nil && r.Summary == nil
	case KindSummary:
		ok = r.Summary != nil && r.Sample == nil && r.Event == nil
	}
	if !ok {
		return &core.FieldError{Field: "record", Value: fmt.Sprintf("seq %d kind %q", r.Seq, r.Kind), Allowed: "a sample, event or summary record holding that one payload"}
	}
	return nil
}

// Sample is one reading of one GPU (or MIG device) as the agent reports
// it: core.Sample's values, Unknown where the source could not tell, and
// which device it was.
type Sample struct {
	LeaseID string    `json:"lease_id"`
	GPU     int       `json:"gpu"`
	UUID    string    `json:"uuid,omitempty"`
	Model   string    `json:"model,omitempty"`
	At      time.Time `json:"at"`
	// MIG devices name their parent and their place on it.
	MIG        bool   `json:"mig,omitempty"`
	ParentUUID string `json:"parent_uuid,omitempty"`
	MIGIndex   int    `json:"mig_index,omitempty"`

	UtilPct     int   `json:"util_pct"`
	MemUsedMiB  int64 `json:"mem_used_mib"`
	MemTotalMiB int64 `json:"mem_total_mib"`
	PowerW      int   `json:"power_w"`
	TempC       int   `json:"temp_c"`
	// Processes is how many compute processes the GPU runs, or Unknown.
	Processes int `json:"processes"`
	// Jobs are the agent's running jobs placed on this device, with how
	// many of the device's processes are theirs.
	Jobs []JobOnGPU `json:"jobs,omitempty"`
}

// JobOnGPU is one job placed on a device and what the agent sees of it
// there.
type JobOnGPU struct {
	Job  string `json:"job"`
	Team string `json:"team,omitempty"`
	// Processes is how many of the device's compute processes belong to
	// the job's process group, or Unknown when the GPU source does not
	// list processes. Zero while the job runs is a zombie in the making.
	Processes int `json:"processes"`
}

// Device names the device a sample is of, for grouping: its UUID, or its
// parent's UUID and MIG index where the source gave no UUID of its own.
func (s Sample) Device() string {
	if s.UUID != "" {
		return s.UUID
	}
	if s.MIG {
		return fmt.Sprintf("%s/mig%d", s.ParentUUID, s.MIGIndex)
	}
	return fmt.Sprintf("gpu%d", s.GPU)
}

// Core returns s as a core.Sample, with each Unknown value as 0 and the
// process counts of its jobs whose processes are known as Procs, and
// whether utilization and memory were both known (a sample without them
// says nothing of idleness).
func (s Sample) Core() (core.Sample, bool) {
	z := func(v int64) int64 { return max(v, 0) }
	c := core.Sample{LeaseID: s.LeaseID, GPU: s.GPU, At: s.At, UtilPct: int(z(int64(s.UtilPct))),
		MemUsedMiB: z(s.MemUsedMiB), MemTotalMiB: z(s.MemTotalMiB), PowerW: int(z(int64(s.PowerW))), TempC: int(z(int64(s.TempC)))}
	for _, j := range s.Jobs {
		if j.Processes == Unknown || j.Processes < 0 || j.Job == "" {
			continue // not known: no zombie is made of it
		}
		if c.Procs == nil {
			c.Procs = map[string]int{}
		}
		c.Procs[j.Job] += j.Processes
	}
	return c, s.UtilPct != Unknown && s.MemUsedMiB != Unknown
}

// Stat is the count, minimum, maximum and sum of a value over samples
// where it was known. Sums keep a summary exact: two summaries merge
// without error.
type Stat struct {
	N   int64 `json:"n"`
	Min int64 `json:"min"`
	Max int64 `json:"max"`
	Sum int64 `json:"sum"`
}

// Add counts v; Unknown (negative) values are not counted.
func (s *Stat) Add(v int64) {
	if v < 0 {
		return
	}
	if s.N == 0 || v < s.Min {
		s.Min = v
	}
	if s.N == 0 || v > s.Max {
		s.Max = v
	}
	s.N++
	s.Sum += v
}

// Merge adds o's values to s.
func (s *Stat) Merge(o Stat) {
	if o.N == 0 {
		return
	}
	if s.N == 0 || o.Min < s.Min {
		s.Min = o.Min
	}
	if s.N == 0 || o.Max > s.Max {
		s.Max = o.Max
	}
	s.N += o.N
	s.Sum += o.Sum
}

// Mean returns Sum/N, or 0 when nothing was counted.
func (s Stat) Mean() float64 {
	if s.N == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.N)
}

// GPUSummary is what a Summary says of one device.
type GPUSummary struct {
	LeaseID string `json:"lease_id"`
	GPU     int    `json:"gpu"`
	Device  string `json:"device"`
	// Samples is how many samples of the device were summarised.
	Samples    int64     `json:"samples"`
	First      time.Time `json:"first"`
	Last       time.Time `json:"last"`
	Util       Stat      `json:"util"`
	MemUsedMiB Stat      `json:"mem_used_mib"`
}

// Summary stands for the samples the spool dropped to stay within its
// bound: every sample with a sequence number in [FromSeq, ToSeq] (the
// events in that span were kept and are sent as they are).
type Summary struct {
	FromSeq uint64       `json:"from_seq"`
	ToSeq   uint64       `json:"to_seq"`
	GPUs    []GPUSummary `json:"gpus"`
}

// Samples returns how many samples s stands for.
func (s Summary) Samples() int64 {
	var n int64
	for _, g := range s.GPUs {
		n += g.Samples
	}
	return n
}

// GPUInfo describes one device in a heartbeat.
type GPUInfo struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MIG         bool   `json:"mig,omitempty"`
	MemTotalMiB int64  `json:"mem_total_mib"`
}

// Heartbeat says the agent is alive, what it has and what it runs.
type Heartbeat struct {
	Agent   string    `json:"agent"`
	LeaseID string    `json:"lease_id"`
	At      time.Time `json:"at"`
	// Source is the GPU source in use (nvml, nvidia-smi, dcgm, fake).
	Source string    `json:"source"`
	GPUs   []GPUInfo `json:"gpus"`
	// Jobs are the IDs of the running jobs.
	Jobs []string `json:"jobs"`
	// Backlog is how many records wait in the outbox.
	Backlog int `json:"backlog"`
	// Summarised is how many samples the outbox has summarised so far.
	Summarised int64 `json:"summarised"`
	// Offer is the catalog offer the agent declares its machine to be:
	// how a machine joins the static pool. Version is the agent's build.
	Offer   string `json:"offer,omitempty"`
	Version string `json:"version,omitempty"`
}

// CommandKind is what a command asks.
type CommandKind string

// The commands: run a job; ask it to checkpoint; stop it (checkpoint
// signal, grace, SIGTERM, SIGKILL); kill it now.
const (
	CommandRun        CommandKind = "run"
	CommandCheckpoint CommandKind = "checkpoint"
	CommandStop       CommandKind = "stop"
	CommandKill       CommandKind = "kill"
)

// JobSpec is a job as the server sends it.
type JobSpec struct {
	ID      string   `json:"id"`
	Team    string   `json:"team,omitempty"`
	Command []string `json:"command"`
	Env     []string `json:"env,omitempty"`
	// GPUs are indices or UUIDs for CUDA_VISIBLE_DEVICES.
	GPUs []string `json:"gpus"`
	// MPSThreadPct > 0 runs the job as an MPS client on a shared GPU
	// with that share of SMs, MPSPinnedMemMiB its memory cap per GPU.
	MPSThreadPct    int   `json:"mps_thread_pct,omitempty"`
	MPSPinnedMemMiB int64 `json:"mps_pinned_mem_mib,omitempty"`
	// CheckpointSignal (USR1 when empty) and GraceSeconds override the
	// agent's defaults.
	CheckpointSignal string `json:"checkpoint_signal,omitempty"`
	GraceSeconds     int    `json:"grace_seconds,omitempty"`
	// CheckpointDir, when set, is where the job keeps its checkpoints
	// instead of the agent's own data directory: storage every machine
	// mounts, so that a run resumed on another machine finds them.
	CheckpointDir string `json:"checkpoint_dir,omitempty"`
}

// Command is an instruction from the server. ID makes it idempotent: the
// agent carries out an ID once however often it is fetched.
type Command struct {
	ID     string      `json:"id"`
	Kind   CommandKind `json:"kind"`
	Job    JobSpec     `json:"job"`
	Reason string      `json:"reason,omitempty"`
}

// Uplink is the agent's connection to the server. A transport (HTTP, in
// the server's API package) implements it; link/fake has the fake every
// test uses. Each method is one request; an error means the request may
// or may not have been applied.
type Uplink interface {
	// Heartbeat says the agent is alive. The first heartbeat after the
	// agent starts (or the link heals) is its join.
	Heartbeat(ctx context.Context, hb Heartbeat) error
	// SendSamples sends consecutive sample and summary records.
	SendSamples(ctx context.Context, recs []Record) error
	// SendEvents sends consecutive event records.
	SendEvents(ctx context.Context, recs []Record) error
	// FetchCommands returns the commands waiting for this agent.
	FetchCommands(ctx context.Context) ([]Command, error)
}

// Queue is the outbox the loop drains: the spool.
type Queue interface {
	// Peek returns up to max of the oldest records not yet acknowledged,
	// in order. Records it returned may be sent; the queue must not
	// summarise them afterwards.
	Peek(max int) ([]Record, error)
	// Ack says every record up to seq has reached the server.
	Ack(seq uint64) error
}
