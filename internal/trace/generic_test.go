package trace

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestReadGeneric(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Job
	}{
		{
			name: "required columns only: whole GPUs, ids by row, sorted by submit",
			in:   "submit_s,duration_s,gpus\n60,3600,8\n0,120,1\n60,10,0\n",
			want: []Job{
				{ID: "1", Submit: 0, Duration: 120, GPUs: 1, GPUMilli: 1000},
				{ID: "0", Submit: 60, Duration: 3600, GPUs: 8, GPUMilli: 1000},
				{ID: "2", Submit: 60, Duration: 10},
			},
		},
		{
			name: "every column of the specification, any order, case and space",
			in: " Shards ,GPU_MODEL,deadline_s,interruptible,tier,team,gpu_mem_mib,gpu_milli,gpus,duration_s,submit_s\n" +
				"4,A100|H100,9000,yes,Offline,vision,40960,,2,3000,100\n" +
				",,,false,,,,250,1,5,0\n",
			want: []Job{
				{ID: "1", Submit: 0, Duration: 5, GPUs: 1, GPUMilli: 250, Interruptible: FlagFalse},
				{ID: "0", Submit: 100, Duration: 3000, GPUs: 2, GPUMilli: 1000, GPUMemMiB: 40960, Team: "vision",
					Tier: core.TierOffline, Interruptible: FlagTrue, Deadline: 9000, Models: []string{"A100", "H100"}, Shards: 4},
			},
		},
		{
			name: "extension columns and an unknown one",
			in:   "id,submit_s,duration_s,gpus,user,cpu_milli,mem_mib,nodes,status,comment\njob-7,1,2,1,ann,4000,8192,1,Pass,hello\n",
			want: []Job{{ID: "job-7", Submit: 1, Duration: 2, GPUs: 1, GPUMilli: 1000, User: "ann", CPUMilli: 4000, MemMiB: 8192, Nodes: 1, Status: "Pass"}},
		},
		{name: "header only", in: "submit_s,duration_s,gpus\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadGeneric(strings.NewReader(tt.in), "g.csv")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Jobs); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
			if got.Name != "g.csv" || !got.Start.IsZero() {
				t.Errorf("name %q, start %v", got.Name, got.Start)
			}
		})
	}
}

func TestReadGenericErrors(t *testing.T) {
	const head = "submit_s,duration_s,gpus,gpu_milli,tier,interruptible,deadline_s,id\n"
	tests := []struct {
		name, in, want string
	}{
		{"missing required", "submit_s,gpus\n1,1\n", `g.csv:1: missing columns "duration_s": want a header with submit_s,duration_s,gpus`},
		{"negative duration", head + "0,-5,1,,,,,\n", `g.csv:2: duration_s: invalid value "-5": want an integer 0..3153600000`},
		{"seconds as a decimal", head + "1.5,5,1,,,,,\n", `g.csv:2: submit_s: invalid value "1.5"`},
		{"share over one GPU", head + "0,5,1,1500,,,,\n", `g.csv:2: gpu_milli: invalid value "1500": want an integer 1..1000`},
		{"shared gang", head + "0,5,2,500,,,,\n", `g.csv:2: gpu_milli: invalid value "500": want 1000 or empty when gpus > 1`},
		{"share without GPUs", head + "0,5,0,500,,,,\n", `g.csv:2: gpu_milli: invalid value "500": want 0 or empty for a job without GPUs`},
		{"unknown tier", head + "0,5,1,,gold,,,\n", `g.csv:2: tier: invalid value "gold": want core, regular, offline, or empty`},
		{"bad flag", head + "0,5,1,,,maybe,,\n", `g.csv:2: interruptible: invalid value "maybe"`},
		{"deadline before submit", head + "100,5,1,,,,50,\n", `g.csv:2: deadline_s: invalid value "50": want empty (none) or seconds from the trace's start, >= submit_s 100 and > 0`},
		{"deadline zero", head + "0,5,1,,,,0,\n", `g.csv:2: deadline_s: invalid value "0"`},
		{"duplicate id", head + "0,5,1,,,,,a\n1,5,1,,,,,a\n", `g.csv:3: id: duplicate job "a": want each id once (first on line 2)`},
		{"truncated file", head + "0,5,1,,,,,a\n1,5", `g.csv:3: short row "2 cells": want 8 cells, one per header column (a truncated file?)`},
		{"model with newline", "submit_s,duration_s,gpus,gpu_model\n0,5,1,\"A100\nH100\"\n", `g.csv:2: gpu_model: invalid value "A100\nH100"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadGeneric(strings.NewReader(tt.in), "g.csv")
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n %s\nwant prefix\n %s", err, tt.want)
			}
		})
	}
}

func TestWriteGeneric(t *testing.T) {
	tr := Trace{Name: "t", Jobs: []Job{
		{ID: "a", Submit: 0, Duration: 60, GPUs: 1, GPUMilli: 500, Team: "x, y", Tier: core.TierCore, Interruptible: FlagFalse, Deadline: 600, Models: []string{"T4"}},
		{ID: "b", Submit: 5, Duration: 0, Status: "Pass"},
	}}
	var b strings.Builder
	if err := WriteGeneric(&b, tr); err != nil {
		t.Fatal(err)
	}
	want := "id,submit_s,duration_s,gpus,gpu_milli,gpu_mem_mib,team,tier,interruptible,deadline_s,gpu_model,shards,user,cpu_milli,mem_mib,nodes,status\n" +
		"a,0,60,1,500,,\"x, y\",core,false,600,T4,,,,,,\n" +
		"b,5,0,0,0,,,,,,,,,,,,Pass\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	bad := Trace{Name: "bad", Jobs: []Job{{ID: "a", GPUs: 1}}}
	if err := WriteGeneric(&b, bad); err == nil {
		t.Error("wrote an invalid trace")
	}
}

// genJob draws a valid job.
func genJob(t *rapid.T, id string) Job {
	text := rapid.StringMatching(`[a-zA-Z0-9_.,"' -]{0,8}`)
	trimmed := func(label string) string { return strings.TrimSpace(text.Draw(t, label)) }
	j := Job{
		ID:        id,
		Submit:    rapid.Int64Range(0, MaxSeconds).Draw(t, "submit"),
		Duration:  rapid.Int64Range(0, MaxSeconds).Draw(t, "duration"),
		GPUs:      rapid.IntRange(0, MaxGPUs).Draw(t, "gpus"),
		GPUMemMiB: rapid.Int64Range(0, MaxGPUMemMiB).Draw(t, "mem"),
		CPUMilli:  rapid.Int64Range(0, MaxOpenbCPUMilli).Draw(t, "cpu"),
		MemMiB:    rapid.Int64Range(0, MaxOpenbMemMiB).Draw(t, "hostmem"),
		Nodes:     rapid.IntRange(0, MaxNodes).Draw(t, "nodes"),
		Team:      trimmed("team"),
		User:      trimmed("user"),
		Status:    trimmed("status"),
		Tier:      rapid.SampledFrom([]core.Tier{"", core.TierCore, core.TierRegular, core.TierOffline}).Draw(t, "tier"),
		Shards:    rapid.IntRange(0, MaxShards).Draw(t, "shards"),
	}
	j.Interruptible = Flag(rapid.IntRange(0, 2).Draw(t, "flag"))
	switch {
	case j.GPUs == 1:
		j.GPUMilli = rapid.Int64Range(1, 1000).Draw(t, "milli")
	case j.GPUs > 1:
		j.GPUMilli = 1000
	}
	if rapid.Bool().Draw(t, "deadline?") {
		j.Deadline = rapid.Int64Range(max(1, j.Submit), MaxSeconds).Draw(t, "deadline")
	}
	j.Models = rapid.SliceOfN(rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9 -]{0,6}[A-Za-z0-9]`), 0, 3).Draw(t, "models")
	if len(j.Models) == 0 {
		j.Models = nil
	}
	return j
}

// genTrace draws a valid trace: jobs sorted by submit, ids unique.
func genTrace(t *rapid.T) Trace {
	n := rapid.IntRange(0, 30).Draw(t, "n")
	tr := Trace{Name: "rapid"}
	for i := range n {
		id := rapid.StringMatching(`[a-z0-9-]{1,6}`).Draw(t, "id") + "#" + strings.Repeat("x", i)
		tr.Jobs = append(tr.Jobs, genJob(t, id))
	}
	sortJobs(tr.Jobs)
	return tr
}

// TestGenericRoundTrip: any valid trace written and read back is the same
// trace.
func TestGenericRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr := genTrace(t)
		if err := tr.Validate(); err != nil {
			t.Fatalf("generator made an invalid trace: %v", err)
		}
		var b strings.Builder
		if err := WriteGeneric(&b, tr); err != nil {
			t.Fatal(err)
		}
		back, err := ReadGeneric(strings.NewReader(b.String()), "rapid")
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if diff := cmp.Diff(tr, back); diff != "" {
			t.Fatalf("round trip (-wrote +read):\n%s", diff)
		}
	})
}

func FuzzReadGeneric(f *testing.F) {
	f.Add("submit_s,duration_s,gpus\n60,3600,8\n0,120,1\n60,10,0\n")
	f.Add("shards,gpu_model,deadline_s,interruptible,tier,team,gpu_mem_mib,gpu_milli,gpus,duration_s,submit_s\n" +
		"4,A100|H100,9000,yes,Offline,vision,40960,,2,3000,100\n,,,false,,,,250,1,5,0\n")
	f.Add("id,submit_s,duration_s,gpus,user,cpu_milli,mem_mib,nodes,status\njob-7,1,2,1,ann,4000,8192,1,Pass\n")
	f.Add("submit_s,duration_s,gpus,id\n0,1,1,\"a\"\"b\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadGeneric(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			checkParseError(t, err)
			return
		}
		checkAccepted(t, tr)
	})
}
