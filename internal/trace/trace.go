package trace

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The common form every job-trace reader produces (Helios, Philly, PAI,
// the generic CSV, the generator). It keeps what the trace recorded and
// nothing it did not: a field the trace lacks is left at its zero value
// ("unknown") and filled in later, from a workload Profile, by
// (*Trace).Workload.

// Bounds on what a job may say. They are generous — real traces stay far
// inside them — and only there so that a corrupt file is rejected with a
// clear error instead of overflowing the simulator's sums.
const (
	// MaxSeconds is the largest time or duration a trace may hold: 100
	// years of 365 days, well inside time.Duration's 292 years.
	MaxSeconds int64 = 100 * 365 * 86400
	// MaxGPUs is the most GPUs one job may ask for (core.Job's limit).
	MaxGPUs = 1024
	// MaxShards is the most shards (array pieces) one job may have.
	MaxShards = 1_000_000
	// MaxNodes is the most nodes a job may have spanned.
	MaxNodes = 100_000
	// MaxGPUMemMiB is the most GPU memory a job may ask for on one GPU:
	// 1 TiB.
	MaxGPUMemMiB int64 = 1 << 20
)

// Flag is a yes/no that a trace may not record: FlagUnset leaves the
// choice to the workload profile.
type Flag int8

// The values of a Flag.
const (
	FlagUnset Flag = iota
	FlagTrue
	FlagFalse
)

// FlagOf returns FlagTrue or FlagFalse for b.
func FlagOf(b bool) Flag {
	if b {
		return FlagTrue
	}
	return FlagFalse
}

// String is "true", "false" or "" (unset), as the generic CSV writes it.
func (f Flag) String() string {
	switch f {
	case FlagTrue:
		return "true"
	case FlagFalse:
		return "false"
	}
	return ""
}

// Job is one job of a trace. Times are whole seconds; Submit and Deadline
// count from the trace's Start.
type Job struct {
	// ID is unique within the trace.
	ID string
	// Submit is when the job arrived, in seconds from the trace's start.
	Submit int64
	// Duration is how long the job ran, in seconds (its execution time,
	// queueing excluded).
	Duration int64
	// GPUs is the number of GPUs, all needed at once; 0 for a CPU-only
	// job.
	GPUs int
	// GPUMilli is the share of each GPU (1000 = a whole GPU); 0 exactly
	// when GPUs is 0, and 1000 when GPUs > 1 (only single-GPU jobs share).
	GPUMilli int64
	// GPUMemMiB is the GPU memory needed on each GPU; 0 = unknown.
	GPUMemMiB int64
	// CPUMilli (milli-cores) and MemMiB (MiB) are the host resources asked
	// for; 0 = unknown.
	CPUMilli int64
	MemMiB   int64
	// Nodes is the number of machines the job spanned in the traced
	// cluster; 0 = unknown. Informational: placement decides anew.
	Nodes int
	// Team and User say who submitted it; either may be empty.
	Team string
	User string
	// Tier is the job's tier when the trace says; "" leaves it to the
	// profile's rules.
	Tier core.Tier
	// Interruptible says whether the job may be preempted; FlagUnset
	// leaves it to the profile.
	Interruptible Flag
	// Deadline is when the job must be done, in seconds from the trace's
	// start; 0 = none recorded (the profile may set one).
	Deadline int64
	// Models lists the GPU models the job may run on; nil = any.
	Models []string
	// Shards is the number of independent pieces (array job); 0 or 1 is
	// one.
	Shards int
	// Status is the job's final status as the trace recorded it (Pass,
	// Killed, COMPLETED, Terminated…); see Outcome.
	Status string
}

// End is when the job finished in the trace: Submit + Duration (queueing
// in the traced cluster is not counted: replay decides waiting anew).
func (j *Job) End() int64 { return j.Submit + j.Duration }

// GPUMilliSeconds is the job's GPU work in milli-GPU-seconds: GPUs ×
// GPUMilli × Duration (÷ 3,600,000 for GPU-hours).
func (j *Job) GPUMilliSeconds() int64 { return int64(j.GPUs) * j.GPUMilli * j.Duration }

// Outcome maps the recorded Status to a final job state: succeeded
// (Pass, COMPLETED, Terminated, Succeeded), cancelled (Killed,
// CANCELLED), failed (Failed, FAILED, TIMEOUT, NODE_FAIL), or "" for a
// status that is not final or not known (Running, Waiting, empty).
func (j *Job) Outcome() core.JobState {
	switch strings.ToLower(j.Status) {
	case "pass", "completed", "terminated", "succeeded", "success":
		return core.JobSucceeded
	case "killed", "cancelled", "canceled":
		return core.JobCancelled
	case "failed", "timeout", "node_fail", "out_of_memory":
		return core.JobFailed
	}
	return ""
}

// Validate reports the first way j breaks the rules a reader guarantees;
// the error is a *core.FieldError naming the field.
func (j *Job) Validate() error {
	bad := func(field string, v any, allowed string) error {
		return &core.FieldError{Field: field, Value: fmt.Sprint(v), Allowed: allowed}
	}
	switch {
	case j.ID == "":
		return bad("id", "", "a non-empty id")
	case j.Submit < 0 || j.Submit > MaxSeconds:
		return bad("submit_s", j.Submit, fmt.Sprintf("0..%d seconds", MaxSeconds))
	case j.Duration < 0 || j.Duration > MaxSeconds:
		return bad("duration_s", j.Duration, fmt.Sprintf("0..%d seconds", MaxSeconds))
	case j.GPUs < 0 || j.GPUs > MaxGPUs:
		return bad("gpus", j.GPUs, fmt.Sprintf("0..%d", MaxGPUs))
	case j.GPUs == 0 && j.GPUMilli != 0:
		return bad("gpu_milli", j.GPUMilli, "0 for a job without GPUs")
	case j.GPUs > 0 && (j.GPUMilli < 1 || j.GPUMilli > int64(core.WholeGPU)):
		return bad("gpu_milli", j.GPUMilli, "1..1000 milli-GPUs")
	case j.GPUs > 1 && j.GPUMilli != int64(core.WholeGPU):
		return bad("gpu_milli", j.GPUMilli, "1000 when gpus > 1 (only single-GPU jobs share)")
	case j.GPUMemMiB < 0 || j.GPUMemMiB > MaxGPUMemMiB:
		return bad("gpu_mem_mib", j.GPUMemMiB, fmt.Sprintf("0..%d MiB", MaxGPUMemMiB))
	case j.CPUMilli < 0 || j.CPUMilli > MaxOpenbCPUMilli:
		return bad("cpu_milli", j.CPUMilli, fmt.Sprintf("0..%d milli-cores", MaxOpenbCPUMilli))
	case j.MemMiB < 0 || j.MemMiB > MaxOpenbMemMiB:
		return bad("mem_mib", j.MemMiB, fmt.Sprintf("0..%d MiB", int64(MaxOpenbMemMiB)))
	case j.Nodes < 0 || j.Nodes > MaxNodes:
		return bad("nodes", j.Nodes, fmt.Sprintf("0..%d", MaxNodes))
	case j.Tier != "" && j.Tier.Rank() > core.TierOffline.Rank():
		return bad("tier", j.Tier, "core, regular, offline or empty")
	case j.Interruptible < FlagUnset || j.Interruptible > FlagFalse:
		return bad("interruptible", int(j.Interruptible), "unset, true or false")
	case j.Deadline != 0 && (j.Deadline < j.Submit || j.Deadline > MaxSeconds):
		return bad("deadline_s", j.Deadline, fmt.Sprintf("0 (none) or submit_s..%d seconds", MaxSeconds))
	case j.Shards < 0 || j.Shards > MaxShards:
		return bad("shards", j.Shards, fmt.Sprintf("0..%d", MaxShards))
	}
	for _, f := range []struct{ field, v string }{{"id", j.ID}, {"team", j.Team}, {"user", j.User}, {"status", j.Status}} {
		if strings.IndexFunc(f.v, isControl) >= 0 || strings.TrimSpace(f.v) != f.v {
			return bad(f.field, f.v, "text without control characters or surrounding space")
		}
	}
	for _, m := range j.Models {
		if m == "" || strings.Contains(m, "|") || strings.IndexFunc(m, isControl) >= 0 || strings.TrimSpace(m) != m {
			return bad("gpu_model", m, "model names without |, control characters or surrounding space")
		}
	}
	return nil
}

// Trace is a workload: jobs sorted by submit time (ties in the order the
// file gave them).
type Trace struct {
	// Name says where the trace came from (a file name, "synthetic…").
	Name string
	// Start is the wall-clock time of offset 0, when the trace knows it
	// (PAI keeps the time of day; Helios cluster logs keep dates); zero
	// otherwise, and the profile chooses.
	Start time.Time
	// Jobs are sorted by Submit.
	Jobs []Job
	// Skipped lists the records a reader could not make into jobs (a PAI
	// job that never finished, say), each with its reason — counted and
	// reported, never silently dropped.
	Skipped []Skip
}

// Skip is a record left out of a trace or a workload, and why.
type Skip struct {
	// ID names the record (a job id, or file:line).
	ID string
	// Reason is a short lowercase phrase, the same for every record
	// skipped for the same reason, so that skips can be counted by it.
	Reason string
}

// SkipCounts counts skips by reason.
func SkipCounts(skips []Skip) map[string]int {
	out := map[string]int{}
	for _, s := range skips {
		out[s.Reason]++
	}
	return out
}

// jobChunk is how many jobs a reader gathers before starting a new chunk.
const jobChunk = 4096

// sortJobs orders jobs by submit time, keeping the given order among
// jobs submitted in the same second.
func sortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
}

// Validate checks every job and the order: submit times non-decreasing,
// ids unique. The error names the job.
func (t *Trace) Validate() error {
	seen := make(map[string]struct{}, len(t.Jobs))
	for i := range t.Jobs {
		j := &t.Jobs[i]
		if err := j.Validate(); err != nil {
			return fmt.Errorf("trace %s: job %d (%q): %w", t.Name, i, j.ID, err)
		}
		if i > 0 && j.Submit < t.Jobs[i-1].Submit {
			return fmt.Errorf("trace %s: job %d (%q): submitted at %d s, before the job before it (%d s): want jobs sorted by submit time", t.Name, i, j.ID, j.Submit, t.Jobs[i-1].Submit)
		}
		if _, dup := seen[j.ID]; dup {
			return fmt.Errorf("trace %s: job %d: duplicate id %q", t.Name, i, j.ID)
		}
		seen[j.ID] = struct{}{}
	}
	return nil
}

// Stats are a trace's headline figures, as its README would give them.
type Stats struct {
	// Jobs counts all jobs; GPUJobs those with GPUs, CPUJobs the rest.
	Jobs, GPUJobs, CPUJobs int
	// Users and Teams count distinct non-empty names.
	Users, Teams int
	// Span is the last submit time, in seconds from the start.
	Span int64
	// GPUs is the total of the GPU jobs' GPU counts (mean = GPUs/GPUJobs).
	GPUs int64
	// GPUMilliSeconds is Σ GPUs × GPUMilli × Duration (÷ 3.6e6 for
	// GPU-hours).
	GPUMilliSeconds int64
	// MaxDuration is the longest job's duration in seconds.
	MaxDuration int64
	// ByGPUs counts jobs by GPU count (0 = CPU-only).
	ByGPUs map[int]int
	// ByOutcome counts GPU jobs by Outcome ("" for unknown).
	ByOutcome map[core.JobState]int
}

// Stats computes the trace's headline figures.
func (t *Trace) Stats() Stats {
	s := Stats{ByGPUs: map[int]int{}, ByOutcome: map[core.JobState]int{}}
	users, teams := map[string]bool{}, map[string]bool{}
	for i := range t.Jobs {
		j := &t.Jobs[i]
		s.Jobs++
		s.ByGPUs[j.GPUs]++
		if j.GPUs > 0 {
			s.GPUJobs++
			s.GPUs += int64(j.GPUs)
			s.ByOutcome[j.Outcome()]++
		} else {
			s.CPUJobs++
		}
		if j.User != "" {
			users[j.User] = true
		}
		if j.Team != "" {
			teams[j.Team] = true
		}
		s.Span = max(s.Span, j.Submit)
		s.MaxDuration = max(s.MaxDuration, j.Duration)
		s.GPUMilliSeconds += j.GPUMilliSeconds()
	}
	s.Users, s.Teams = len(users), len(teams)
	return s
}
