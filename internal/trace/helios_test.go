package trace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// heliosFile is the shared Helios excerpt, relative to this package's
// directory.
var heliosFile = filepath.Join("..", "..", "..", "shared", "data", "helios-venus-excerpt-dirlab", "helios_data_training.csv")

func loadHelios(t testing.TB) Trace {
	t.Helper()
	if _, err := os.Stat(heliosFile); err != nil {
		t.Fatalf("Helios excerpt not available (the shared data is part of the test setup): %v", err)
	}
	tr, err := LoadHelios(heliosFile)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestHeliosExcerpt checks the real file against the figures its README
// gives (../shared/data/helios-venus-excerpt-dirlab/README.md).
func TestHeliosExcerpt(t *testing.T) {
	tr := loadHelios(t)
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if !tr.Start.IsZero() {
		t.Errorf("Start = %v, want zero (the excerpt keeps no wall-clock time)", tr.Start)
	}
	s := tr.Stats()
	check := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", what, got, want)
		}
	}
	check("jobs", int64(s.Jobs), 15000)
	check("GPU jobs", int64(s.GPUJobs), 10796)
	check("CPU-only jobs", int64(s.CPUJobs), 4204)
	check("users", int64(s.Users), 106)
	// "They span 20.19 days (sum of intervals)."
	check("span in seconds", s.Span, 1744281)
	check("span in hundredths of a day", (s.Span*100+43200)/86400, 2019)
	// "1 GPU 5,939; 8 GPUs 2,382; 4 GPUs 647; 16 GPUs 579; 2 GPUs 544; 32 GPUs 246; the maximum is 160."
	for gpus, n := range map[int]int{1: 5939, 8: 2382, 4: 647, 16: 579, 2: 544, 32: 246} {
		check("jobs of "+strconv.Itoa(gpus)+" GPUs", int64(s.ByGPUs[gpus]), int64(n))
	}
	maxGPUs := 0
	for g := range s.ByGPUs {
		maxGPUs = max(maxGPUs, g)
	}
	check("most GPUs", int64(maxGPUs), 160)
	// "GPU jobs: mean 6.45 GPUs" — in hundredths, rounded.
	check("mean GPUs ×100", (s.GPUs*100*2+int64(s.GPUJobs))/(2*int64(s.GPUJobs)), 645)
	// "Status is 49.8% Pass, 31.3% Killed, 18.9% Failed" (of GPU jobs), in tenths of a percent.
	pct := func(n int) int64 { return (int64(n)*2000 + int64(s.GPUJobs)) / (2 * int64(s.GPUJobs)) }
	check("succeeded ‰", pct(s.ByOutcome[core.JobSucceeded]), 498)
	check("cancelled ‰", pct(s.ByOutcome[core.JobCancelled]), 313)
	check("failed ‰", pct(s.ByOutcome[core.JobFailed]), 189)
	// "The whole file uses 358,608 GPU-hours (sum of gpu_num * run_time)."
	check("GPU-hours", (s.GPUMilliSeconds+1_800_000)/3_600_000, 358608)
	// "The longest job ran 22.7 days."
	check("longest in tenths of a day", (s.MaxDuration*10+43200)/86400, 227)

	// "median run time 277 s" (GPU jobs) and "the median inter-arrival gap is 27 s".
	var runs, gaps []int64
	for i, j := range tr.Jobs {
		if j.GPUs > 0 {
			runs = append(runs, j.Duration)
		}
		if i > 0 {
			gaps = append(gaps, j.Submit-tr.Jobs[i-1].Submit)
		}
	}
	check("median GPU run time", median(runs), 277)
	check("median gap", median(gaps), 27)

	// Every GPU job becomes a workload job; CPU-only ones are skipped and
	// counted.
	w, err := tr.Workload(DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	check("workload jobs", int64(len(w.Jobs)), 10796)
	if diff := cmp.Diff(map[string]int{"cpu-only job (no GPUs)": 4204}, SkipCounts(w.Skipped)); diff != "" {
		t.Errorf("skips (-want +got):\n%s", diff)
	}
}

// TestHeliosIntervalIsInterArrival is the evidence for reading interval
// as the gap between consecutive submissions: u_id is the jobs'
// submission order, and the file lists them sorted by submit time with
// ties (interval 0) in arbitrary order. If the running sum of interval is
// the submit time, then ordering the jobs by u_id must never go back in
// time — and it does not, although 576 rows are out of u_id order.
func TestHeliosIntervalIsInterArrival(t *testing.T) {
	tr := loadHelios(t)
	byID := slices.Clone(tr.Jobs)
	outOfOrder := 0
	for i, j := range tr.Jobs {
		if j.ID != strconv.Itoa(i) {
			outOfOrder++
		}
	}
	slices.SortFunc(byID, func(a, b Job) int {
		x, _ := strconv.Atoi(a.ID)
		y, _ := strconv.Atoi(b.ID)
		return x - y
	})
	for i := 1; i < len(byID); i++ {
		if byID[i].Submit < byID[i-1].Submit {
			t.Fatalf("u_id %s submitted at %d s, before u_id %s at %d s", byID[i].ID, byID[i].Submit, byID[i-1].ID, byID[i-1].Submit)
		}
	}
	if outOfOrder != 576 {
		t.Errorf("%d rows out of u_id order, want 576", outOfOrder)
	}
}

func median(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func TestReadHelios(t *testing.T) {
	cst := HeliosZone
	tests := []struct {
		name string
		in   string
		want Trace
	}{
		{
			name: "interval form as published, CRLF",
			in: "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\r\n" +
				"0,1,1,1,1,0,84,0,Pass\r\n1,1,8,40,1,94,87,0,Killed\r\n2,4,0,1,1,0,2,0,Failed\r\n",
			want: Trace{Name: "h.csv", Jobs: []Job{
				{ID: "0", User: "1", Submit: 0, Duration: 84, GPUs: 1, GPUMilli: 1000, CPUMilli: 1000, Nodes: 1, Status: "Pass"},
				{ID: "1", User: "1", Submit: 94, Duration: 87, GPUs: 8, GPUMilli: 1000, CPUMilli: 40000, Nodes: 1, Status: "Killed"},
				{ID: "2", User: "4", Submit: 94, Duration: 2, CPUMilli: 1000, Nodes: 1, Status: "Failed"},
			}},
		},
		{
			name: "columns in any order, only the required ones, no ids",
			in:   "run_time,interval,gpu_num\n10,5,2\n20,0,1\n",
			want: Trace{Name: "h.csv", Jobs: []Job{
				{ID: "0", Submit: 5, Duration: 10, GPUs: 2, GPUMilli: 1000},
				{ID: "1", Submit: 5, Duration: 20, GPUs: 1, GPUMilli: 1000},
			}},
		},
		{
			name: "cluster-log form: dates in UTC+8, vc as team, sorted by submit",
			in: "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n" +
				"1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n" +
				"1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n",
			want: Trace{Name: "h.csv", Start: time.Date(2020, 6, 9, 18, 41, 1, 0, cst), Jobs: []Job{
				{ID: "1425511", User: "uXBbc", Team: "vcJkd", Submit: 0, Duration: 36848, GPUs: 1, GPUMilli: 1000, CPUMilli: 1000, Nodes: 1, Status: "COMPLETED"},
				{ID: "1425512", User: "uVMrF", Team: "vchbv", Submit: 26, Duration: 249, GPUs: 4, GPUMilli: 1000, CPUMilli: 16000, Nodes: 1, Status: "FAILED"},
			}},
		},
		{
			name: "cluster-log form without duration: end − start; Unix seconds",
			in:   "job_id,gpu_num,submit_time,start_time,end_time\n7,1,1000,1010,1110\n8,2,1005,2000,2000\n",
			want: Trace{Name: "h.csv", Start: time.Unix(1000, 0).In(cst), Jobs: []Job{
				{ID: "7", Submit: 0, Duration: 100, GPUs: 1, GPUMilli: 1000},
				{ID: "8", Submit: 5, Duration: 0, GPUs: 2, GPUMilli: 1000},
			}},
		},
		{name: "header only", in: "gpu_num,interval,run_time\n", want: Trace{Name: "h.csv"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadHelios(strings.NewReader(tt.in), "h.csv")
			if err != nil {
				t.Fatal(err)
			}
			if !got.Start.Equal(tt.want.Start) {
				t.Errorf("Start = %v, want %v", got.Start, tt.want.Start)
			}
			got.Start, tt.want.Start = time.Time{}, time.Time{}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("trace (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadHeliosErrors(t *testing.T) {
	const head = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `h.csv: empty file`},
		{"no time column", "gpu_num,run_time\n1,2\n", `h.csv: missing columns "interval|submit_time"`},
		{"no run_time", "gpu_num,interval\n1,2\n", `h.csv: missing columns "run_time"`},
		{"no duration or end", "gpu_num,submit_time,start_time\n1,2,3\n", `h.csv: missing columns "end_time"`},
		{"negative interval", head + "0,1,1,1,1,0,84,0,Pass\n1,1,1,1,1,-5,84,0,Pass\n", `h.csv:3: interval: invalid value "-5": want an integer 0..3153600000`},
		{"negative run time", head + "0,1,1,1,1,0,-1,0,Pass\n", `h.csv:2: run_time: invalid value "-1"`},
		{"fractional GPUs", head + "0,1,1.5,1,1,0,84,0,Pass\n", `h.csv:2: gpu_num: invalid value "1.5": want an integer 0..1024`},
		{"too many GPUs", head + "0,1,2000,1,1,0,84,0,Pass\n", `h.csv:2: gpu_num: invalid value "2000"`},
		{"truncated row", head + "0,1,1,1,1,0\n", `h.csv:2: short row "6 cells": want 9 cells`},
		{"truncated mid-cell", head + "0,1,1,1,1,0,84,0,Pass\n1,1,1,1,1,133,7", `h.csv:3: short row "7 cells"`},
		{"duplicate id", head + "0,1,1,1,1,0,84,0,Pass\n0,1,1,1,1,0,84,0,Pass\n", `h.csv:3: u_id: duplicate job "0": want each job once (first on line 2)`},
		{"unterminated quote", head + "0,\"1,1,1,1,0,84,0,Pass\n", `h.csv:2: malformed CSV`},
		{"trace too long", head + "0,1,1,1,1,3153600000,1,0,Pass\n1,1,1,1,1,1,1,0,Pass\n", `h.csv:3: interval: trace too long "1"`},
		{"bad date", "gpu_num,submit_time,duration\n1,2020-13-01 00:00:00,5\n", `h.csv:2: submit_time: invalid value "2020-13-01 00:00:00"`},
		{"end before start", "gpu_num,submit_time,start_time,end_time\n1,5,10,9\n", `h.csv:2: end_time: invalid value "9"`},
		{"control character", head + "0,a\x01b,1,1,1,0,84,0,Pass\n", `h.csv:2: user: invalid value "a\x01b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHelios(strings.NewReader(tt.in), "h.csv")
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

func FuzzReadHelios(f *testing.F) {
	f.Add("u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\r\n0,1,1,1,1,0,84,0,Pass\r\n1,1,8,40,1,94,87,0,Killed\r\n")
	f.Add("run_time,interval,gpu_num\n10,5,2\n20,0,1\n")
	f.Add("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n" +
		"1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n")
	f.Add("job_id,gpu_num,submit_time,start_time,end_time\n7,1,1000,1010,1110\n8,2,1005,2000,2000\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadHelios(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			checkParseError(t, err)
			return
		}
		checkAccepted(t, tr)
	})
}

func BenchmarkReadHelios(b *testing.B) {
	data, err := os.ReadFile(heliosFile)
	if err != nil {
		b.Skipf("Helios excerpt not available: %v", err)
	}
	p := DefaultProfile()
	for b.Loop() {
		tr, err := ReadHelios(strings.NewReader(string(data)), "helios.csv")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Workload(p); err != nil {
			b.Fatal(err)
		}
	}
}
