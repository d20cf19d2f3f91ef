package core

import (
	"fmt"
	"strings"
	"time"
)

// Tier is a job's priority class.
type Tier string

// The tiers, highest first: core (training, real-time inference), regular
// (preprocessing, fine-tuning), offline (cold-data mining, log analysis).
const (
	TierCore    Tier = "core"
	TierRegular Tier = "regular"
	TierOffline Tier = "offline"
)

// Rank orders tiers: core 0, regular 1, offline 2, unknown 3.
func (t Tier) Rank() int {
	switch t {
	case TierCore:
		return 0
	case TierRegular:
		return 1
	case TierOffline:
		return 2
	}
	return 3
}

// ParseTier validates a tier name.
func ParseTier(s string) (Tier, error) {
	switch Tier(s) {
	case TierCore, TierRegular, TierOffline:
		return Tier(s), nil
	}
	return "", &FieldError{Field: "tier", Value: s, Allowed: "one of core, regular, offline"}
}

// JobState is where a job is in its life.
type JobState string

// The job states: pending → admitted → running → checkpointing →
// preempted → succeeded | failed | cancelled.
const (
	JobPending       JobState = "pending"
	JobAdmitted      JobState = "admitted"
	JobRunning       JobState = "running"
	JobCheckpointing JobState = "checkpointing"
	JobPreempted     JobState = "preempted"
	JobSucceeded     JobState = "succeeded"
	JobFailed        JobState = "failed"
	JobCancelled     JobState = "cancelled"
)

// Final reports whether s is a terminal state.
func (s JobState) Final() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled
}

// Request is what a job needs on each of its GPUs.
type Request struct {
	// GPUs is the number of GPUs; all of them are a gang (all or nothing).
	GPUs int
	// MilliPerGPU is the share of each GPU (1000 = whole GPU, less = shared).
	MilliPerGPU Milli
	// MemPerGPUMiB is the GPU memory needed on each GPU.
	MemPerGPUMiB int64
	// Models lists the GPU models allowed; empty allows any.
	Models []string
	// Throughput is work units per hour on one GPU of each model, when
	// known; it lets placement price the job's work rather than its time.
	Throughput map[string]int64
	// CPUMilli and MemMiB are the host CPU (milli-cores) and RAM needed.
	CPUMilli int64
	MemMiB   int64
	// Workload is what the job does; empty is Training. Inference-only
	// hardware takes only inference jobs.
	Workload Workload `json:",omitempty"`
	// Accelerators lists the families the job is built for; empty is
	// NVIDIA only. Other families take only jobs that list them. (Both
	// are left out of JSON when empty, so a request that does not use
	// them hashes as it always did: see store.JobFingerprint.)
	Accelerators []Accelerator `json:",omitempty"`
}

// Job is a unit of work submitted by a team.
type Job struct {
	ID      string
	Team    string
	User    string
	Tier    Tier
	Request Request
	// Shards is the number of independent pieces (array job); 0 or 1 is one.
	Shards        int
	EstDuration   time.Duration
	Deadline      time.Time
	Interruptible bool
	// Deferrable work may wait for a cheaper time-of-use window.
	Deferrable         bool
	CheckpointInterval time.Duration
	Command            []string
	Image              string
	Submit             time.Time
	State              JobState
}

// Validate reports the first problem with j's request.
func (j *Job) Validate() error {
	if j.ID == "" || strings.Contains(j.ID, "#") {
		// Unit keys are "job#shard": a # in an id could collide with one.
		return &FieldError{Field: "id", Value: j.ID, Allowed: "a non-empty id without #"}
	}
	if _, err := ParseTier(string(j.Tier)); err != nil {
		return err
	}
	r := j.Request
	if r.GPUs < 1 || r.GPUs > 1024 {
		return &FieldError{Field: "gpus", Value: fmt.Sprint(r.GPUs), Allowed: "1..1024"}
	}
	if r.MilliPerGPU < 1 || r.MilliPerGPU > WholeGPU {
		return &FieldError{Field: "gpu_milli", Value: fmt.Sprint(r.MilliPerGPU), Allowed: "1..1000 milli-GPUs"}
	}
	if r.GPUs > 1 && r.MilliPerGPU != WholeGPU {
		return &FieldError{Field: "gpu_milli", Value: fmt.Sprint(r.MilliPerGPU), Allowed: "1000 when gpus > 1 (only single-GPU jobs share)"}
	}
	if r.MemPerGPUMiB < 0 {
		return &FieldError{Field: "gpu_mem_mib", Value: fmt.Sprint(r.MemPerGPUMiB), Allowed: ">= 0"}
	}
	if err := r.validateAccel(); err != nil {
		return err
	}
	if j.Shards < 0 {
		return &FieldError{Field: "shards", Value: fmt.Sprint(j.Shards), Allowed: ">= 0"}
	}
	if j.EstDuration < 0 {
		return &FieldError{Field: "duration", Value: j.EstDuration.String(), Allowed: ">= 0"}
	}
	return nil
}

// Sample is one reading of one GPU.
type Sample struct {
	LeaseID string
	GPU     int
	At      time.Time
	// UtilPct is SM utilization, 0..100.
	UtilPct     int
	MemUsedMiB  int64
	MemTotalMiB int64
	PowerW      int
	TempC       int
	// Procs is, for each run placed on the GPU (the agent's run ID), how
	// many of the GPU's compute processes are the run's; nil when the GPU
	// source does not list processes. A run at 0 while its unit runs is
	// a zombie in the making (fleet.Ladder's NoProcess).
	Procs map[string]int
}

// Event is a state change or a decision with its reason, for audit and
// replay.
type Event struct {
	Seq     int64
	At      time.Time
	Kind    string
	Subject string
	Reason  string
	Attrs   map[string]string
}
