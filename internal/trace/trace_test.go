package trace

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// job is a valid one-GPU job to start table cases from.
func job(id string, submit, duration int64) Job {
	return Job{ID: id, Submit: submit, Duration: duration, GPUs: 1, GPUMilli: 1000}
}

func TestJobValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Job)
		field string // "" = valid
	}{
		{"valid", func(*Job) {}, ""},
		{"cpu-only", func(j *Job) { j.GPUs, j.GPUMilli = 0, 0 }, ""},
		{"shared GPU", func(j *Job) { j.GPUMilli = 250 }, ""},
		{"deadline at submit", func(j *Job) { j.Submit, j.Deadline = 5, 5 }, ""},
		{"models", func(j *Job) { j.Models = []string{"A100", "H100"} }, ""},
		{"no id", func(j *Job) { j.ID = "" }, "id"},
		{"id with newline", func(j *Job) { j.ID = "a\nb" }, "id"},
		{"team with space around", func(j *Job) { j.Team = " a" }, "team"},
		{"negative submit", func(j *Job) { j.Submit = -1 }, "submit_s"},
		{"negative duration", func(j *Job) { j.Duration = -1 }, "duration_s"},
		{"too long", func(j *Job) { j.Duration = MaxSeconds + 1 }, "duration_s"},
		{"too many GPUs", func(j *Job) { j.GPUs = MaxGPUs + 1 }, "gpus"},
		{"share without GPUs", func(j *Job) { j.GPUs = 0 }, "gpu_milli"},
		{"GPUs without share", func(j *Job) { j.GPUMilli = 0 }, "gpu_milli"},
		{"share over one", func(j *Job) { j.GPUMilli = 1001 }, "gpu_milli"},
		{"shared gang", func(j *Job) { j.GPUs, j.GPUMilli = 2, 500 }, "gpu_milli"},
		{"negative memory", func(j *Job) { j.GPUMemMiB = -1 }, "gpu_mem_mib"},
		{"bad tier", func(j *Job) { j.Tier = "gold" }, "tier"},
		{"bad flag", func(j *Job) { j.Interruptible = 7 }, "interruptible"},
		{"deadline before submit", func(j *Job) { j.Submit, j.Deadline = 10, 9 }, "deadline_s"},
		{"negative shards", func(j *Job) { j.Shards = -1 }, "shards"},
		{"empty model", func(j *Job) { j.Models = []string{""} }, "gpu_model"},
		{"model with bar", func(j *Job) { j.Models = []string{"A|B"} }, "gpu_model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := job("1", 0, 60)
			tt.edit(&j)
			err := j.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *core.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Validate() = %v, want a FieldError on %s", err, tt.field)
			}
		})
	}
}

func TestTraceValidate(t *testing.T) {
	ok := Trace{Name: "t", Jobs: []Job{job("a", 0, 1), job("b", 0, 1), job("c", 5, 1)}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	unsorted := Trace{Name: "t", Jobs: []Job{job("a", 5, 1), job("b", 4, 1)}}
	if err := unsorted.Validate(); err == nil || !strings.Contains(err.Error(), "sorted") {
		t.Errorf("unsorted: %v", err)
	}
	dup := Trace{Name: "t", Jobs: []Job{job("a", 0, 1), job("a", 1, 1)}}
	if err := dup.Validate(); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestOutcome(t *testing.T) {
	for status, want := range map[string]core.JobState{
		"Pass": core.JobSucceeded, "COMPLETED": core.JobSucceeded, "Terminated": core.JobSucceeded,
		"Killed": core.JobCancelled, "CANCELLED": core.JobCancelled,
		"Failed": core.JobFailed, "TIMEOUT": core.JobFailed, "NODE_FAIL": core.JobFailed,
		"Running": "", "Waiting": "", "": "",
	} {
		j := Job{Status: status}
		if got := j.Outcome(); got != want {
			t.Errorf("Outcome(%q) = %q, want %q", status, got, want)
		}
	}
}

func TestSortJobsStable(t *testing.T) {
	jobs := []Job{job("c", 5, 1), job("a", 1, 1), job("b", 1, 1), job("d", 0, 1)}
	sortJobs(jobs)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if diff := cmp.Diff([]string{"d", "a", "b", "c"}, ids); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestStats(t *testing.T) {
	tr := Trace{Jobs: []Job{
		{ID: "1", Submit: 0, Duration: 100, GPUs: 2, GPUMilli: 1000, User: "u1", Team: "x", Status: "Pass"},
		{ID: "2", Submit: 50, Duration: 10, User: "u2", Status: "Failed"},
		{ID: "3", Submit: 70, Duration: 40, GPUs: 1, GPUMilli: 500, User: "u1", Status: "Killed"},
	}}
	want := Stats{
		Jobs: 3, GPUJobs: 2, CPUJobs: 1, Users: 2, Teams: 1, Span: 70, GPUs: 3,
		GPUMilliSeconds: 2*1000*100 + 500*40, MaxDuration: 100,
		ByGPUs:    map[int]int{0: 1, 1: 1, 2: 1},
		ByOutcome: map[core.JobState]int{core.JobSucceeded: 1, core.JobCancelled: 1},
	}
	if diff := cmp.Diff(want, tr.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

// checkAccepted is what every fuzzer asserts of a trace a reader accepted:
// it validates (sorted, ids unique, every job in bounds) and survives a
// generic-CSV round trip unchanged.
func checkAccepted(t *testing.T, tr Trace) {
	t.Helper()
	if err := tr.Validate(); err != nil {
		t.Fatalf("accepted an invalid trace: %v", err)
	}
	var b strings.Builder
	if err := WriteGeneric(&b, tr); err != nil {
		t.Fatalf("WriteGeneric: %v", err)
	}
	back, err := ReadGeneric(strings.NewReader(b.String()), "fuzz.csv")
	if err != nil {
		t.Fatalf("reading back what WriteGeneric wrote: %v\n%s", err, b.String())
	}
	if diff := cmp.Diff(tr.Jobs, back.Jobs); diff != "" {
		t.Fatalf("generic round trip (-read +back):\n%s", diff)
	}
}
