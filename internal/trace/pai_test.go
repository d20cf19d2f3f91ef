package trace

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The fixtures in testdata/pai/ follow the published schema
// (alibaba/clusterdata, cluster-trace-gpu-v2020/README.md and the .header
// files): headerless as released, and with a header in a shuffled column
// order. The rows are made up, in the release's number format.

// paiWant is the trace the fixtures make.
func paiWant() Trace {
	return Trace{
		Name:  "testdata/pai/pai_job_table.csv",
		Start: time.Unix(4549000, 0).In(PAIZone),
		Jobs: []Job{
			// 1 instance × 800% = eight whole GPUs, all on V100.
			{ID: "b2d0f1e3c4a5b6d7e8f90a12", User: "0d8e6e4f2c1a", Status: "Failed", Submit: 0, Duration: 550,
				GPUs: 8, GPUMilli: 1000, CPUMilli: 12000, MemMiB: 65536, Models: []string{"V100"}},
			// CPU-only: plan_gpu empty.
			{ID: "f6b4d5c7a8e9f0a1b2c3d4e5", User: "58540f191766", Status: "Terminated", Submit: 500, Duration: 380,
				CPUMilli: 500, MemMiB: 512},
			// ps 2 × (8 cores, 16 GB, no GPU) + worker 4 × (6 cores, 32 GB, 100%):
			// four whole GPUs; runs from the first task start to the last end.
			{ID: "a1c9e0d2b3f4a5c6d7e8f901", User: "58540f191766", Status: "Terminated", Submit: 1000, Duration: 4560950 - 4550100,
				GPUs: 4, GPUMilli: 1000, CPUMilli: 40000, MemMiB: 163840, Models: []string{"V100"}},
			// The README's example row: half a GPU on MISC (no constraint);
			// 29.296875 GB = 30000 MiB.
			{ID: "4b3f04b66a525d2df903eb16", User: "58540f191766", Status: "Terminated", Submit: 1879, Duration: 520,
				GPUs: 1, GPUMilli: 500, CPUMilli: 6000, MemMiB: 30000},
			// 3 × 50% (T4) + 1 × 25% (P100) = 175% → two whole GPUs, mixed
			// types → no constraint.
			{ID: "c3e1a2f4d5b6c7e8f90a1b23", User: "0d8e6e4f2c1a", Status: "Terminated", Submit: 3000, Duration: 560,
				GPUs: 2, GPUMilli: 1000, CPUMilli: 14000, MemMiB: 3*8704 + 4096},
		},
		Skipped: []Skip{
			{ID: "0000000000000000deadbeef/worker", Reason: "task of a job not in the job table"},
			{ID: "d4f2b3a5e6c7d8f90a1b2c34", Reason: "unfinished (no task end time)"},
			{ID: "e5a3c4b6f7d8e90a1b2c3d45", Reason: "no tasks"},
		},
	}
}

func TestLoadPAI(t *testing.T) {
	for _, files := range [][2]string{
		{"pai_job_table.csv", "pai_task_table.csv"},
		{"pai_job_table_header.csv", "pai_task_table_header.csv"},
		{"pai_job_table.csv", "pai_task_table_header.csv"},
	} {
		t.Run(files[0]+"+"+files[1], func(t *testing.T) {
			jobs := filepath.Join("testdata", "pai", files[0])
			got, err := LoadPAI(jobs, filepath.Join("testdata", "pai", files[1]))
			if err != nil {
				t.Fatal(err)
			}
			want := paiWant()
			want.Name = jobs
			if !got.Start.Equal(want.Start) {
				t.Errorf("Start = %v, want %v", got.Start, want.Start)
			}
			if got.Start.Location() != PAIZone {
				t.Errorf("Start in %v, want %v", got.Start.Location(), PAIZone)
			}
			got.Start, want.Start = time.Time{}, time.Time{}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("trace (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestReadPAITasksRecords(t *testing.T) {
	in := "4b3f04b66a525d2df903eb16,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC\n" +
		"x,worker,NaN,Running,0,,,,,\n"
	got, err := ReadPAITasks(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []PAITask{
		{Job: "4b3f04b66a525d2df903eb16", Task: "tensorflow", Instances: 1, Status: "Terminated", Start: 1739162, End: 1739200,
			CPUMilli: 6000, MemMiB: 30000, GPUMilli: 500, GPUType: "MISC"},
		{Job: "x", Task: "worker", Instances: 1, Status: "Running", Start: NoTime, End: NoTime},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
}

func TestReadPAIErrors(t *testing.T) {
	tests := []struct {
		name, jobs, tasks, want string
	}{
		{"job row too short", "a,b,c,Terminated,1.0\n", "", `jobs.csv:1: wrong number of fields "5": want 6 fields (job_name,inst_id,user,status,start_time,end_time), or a header row`},
		{"task table given as job table", "a,worker,1.0,Terminated,1.0,2.0,600.0,29.3,50.0,MISC\n", "", `jobs.csv:1: wrong number of fields "10"`},
		{"negative time", "a,b,c,Terminated,-1.0,2.0\n", "", `jobs.csv:1: start_time: invalid value "-1.0"`},
		{"exponent", "a,b,c,Terminated,1e6,2.0\n", "", `jobs.csv:1: start_time: invalid value "1e6"`},
		{"duplicate job", "a,b,c,Terminated,1.0,2.0\na,b,c,Terminated,1.0,2.0\n", "", `jobs.csv:2: job_name: duplicate job "a"`},
		{"empty job name", ",b,c,Terminated,1.0,2.0\n", "", `jobs.csv:1: job_name: empty name`},
		{"header missing start_time", "job_name,user\na,b\n", "", `jobs.csv:1: missing columns "start_time"`},
		{"plan_gpu over the limit", "", "a,w,1.0,T,1.0,2.0,600.0,1.0,102500.0,V100\n", `tasks.csv:1: plan_gpu: invalid value "102500.0": want a share of GPUs in percent, 0..102400`},
		{"fractional instances", "", "a,w,1.5,T,1.0,2.0,600.0,1.0,50.0,V100\n", `tasks.csv:1: inst_num: invalid value "1.5"`},
		{"bad memory", "", "a,w,1.0,T,1.0,2.0,600.0,lots,50.0,V100\n", `tasks.csv:1: plan_mem: invalid value "lots"`},
		{"task header missing plan_gpu", "", "job_name,start_time,end_time\na,1,2\n", `tasks.csv:1: missing columns "plan_gpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs := tt.jobs
			if jobs == "" {
				jobs = "a,b,c,Terminated,1.0,2.0\n"
			}
			_, err := ReadPAI(strings.NewReader(jobs), "jobs.csv", strings.NewReader(tt.tasks), "tasks.csv")
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

func TestJoinPAIGPUShares(t *testing.T) {
	// plan_gpu is per instance; the job's total decides: up to one GPU is
	// one shared GPU, more rounds up to whole GPUs.
	tests := []struct {
		name      string
		tasks     []PAITask
		gpus      int
		milli     int64
		models    []string
		skip      string
		instances int64
	}{
		{name: "a quarter", tasks: []PAITask{{GPUMilli: 250, GPUType: "T4"}}, gpus: 1, milli: 250, models: []string{"T4"}},
		{name: "two halves make one", tasks: []PAITask{{GPUMilli: 500, Instances: 2, GPUType: "T4"}}, gpus: 1, milli: 1000, models: []string{"T4"}},
		{name: "one and a half round up", tasks: []PAITask{{GPUMilli: 500, Instances: 3}}, gpus: 2, milli: 1000},
		{name: "eight in one instance", tasks: []PAITask{{GPUMilli: 8000, GPUType: "V100"}}, gpus: 8, milli: 1000, models: []string{"V100"}},
		{name: "MISC is no constraint", tasks: []PAITask{{GPUMilli: 1000, GPUType: "MISC"}}, gpus: 1, milli: 1000},
		{name: "zero instances ask for nothing", tasks: []PAITask{{GPUMilli: 1000, Instances: 0}}, instances: -1, gpus: 0, milli: 0},
		{name: "too many", tasks: []PAITask{{GPUMilli: 100_000, Instances: 11}}, skip: "asks for more than 1024 GPUs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.tasks {
				k := &tt.tasks[i]
				k.Job, k.Start, k.End = "j", 10, 20
				if k.Instances == 0 && tt.instances == 0 {
					k.Instances = 1
				}
			}
			tr := JoinPAI("p", []PAIJob{{Name: "j", Start: 5, End: 20}}, tt.tasks)
			if tt.skip != "" {
				if len(tr.Jobs) != 0 || len(tr.Skipped) != 1 || tr.Skipped[0].Reason != tt.skip {
					t.Fatalf("got jobs %v, skipped %v; want skipped %q", tr.Jobs, tr.Skipped, tt.skip)
				}
				return
			}
			if len(tr.Jobs) != 1 {
				t.Fatalf("jobs %v, skipped %v", tr.Jobs, tr.Skipped)
			}
			j := tr.Jobs[0]
			if j.GPUs != tt.gpus || j.GPUMilli != tt.milli || !cmp.Equal(j.Models, tt.models) {
				t.Errorf("GPUs %d × %d milli %v, want %d × %d %v", j.GPUs, j.GPUMilli, j.Models, tt.gpus, tt.milli, tt.models)
			}
			if err := tr.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestParseFixed(t *testing.T) {
	tests := []struct {
		in    string
		scale int
		v     int64
		exact bool
		ok    bool
	}{
		{"4550879.0", 0, 4550879, true, true},
		{"29.296875", 6, 29296875, true, true},
		{"50.0", 1, 500, true, true},
		{"12.35", 1, 124, false, true},
		{"12.34", 1, 123, false, true},
		{".5", 1, 5, true, true},
		{"3.", 0, 3, true, true},
		{"+1", 0, 1, true, true},
		{"0", 0, 0, true, true},
		{"000000000000000000001", 0, 1, true, true},
		{"", 0, 0, false, false},
		{".", 0, 0, false, false},
		{"-1", 0, 0, false, false},
		{"1e5", 0, 0, false, false},
		{"1,5", 0, 0, false, false},
		{"1234567890123456", 0, 0, false, false},
		{"1234567890123", 6, 0, false, false},
	}
	for _, tt := range tests {
		v, exact, ok := parseFixed(tt.in, tt.scale)
		if v != tt.v || exact != tt.exact || ok != tt.ok {
			t.Errorf("parseFixed(%q, %d) = %d, %t, %t; want %d, %t, %t", tt.in, tt.scale, v, exact, ok, tt.v, tt.exact, tt.ok)
		}
	}
}

func FuzzReadPAI(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input it finds, and that
	// takes a long time on inputs of kilobytes. testdata/pai/ holds the
	// larger fixtures.
	f.Add("4b3f,8cb3,5854,Terminated,4550879.0,4551416.0\nb2d0,2a3b,0d8e,Failed,4549000.0,4549700.0\nd4f2,4c5d,9f1a,Running,4553000.0,\n",
		"4b3f,tensorflow,1.0,Terminated,4550890.0,4551410.0,600.0,29.296875,50.0,MISC\nb2d0,worker,2.0,Failed,4549100.0,4549650.0,1200.0,64.0,800.0,V100\nd4f2,w,1.0,Running,4553060.0,,600.0,29.3,100.0,V100\n")
	f.Add("job_name,inst_id,user,status,start_time,end_time\na,b,c,Terminated,1.0,2.0\n",
		"gpu_type,plan_gpu,plan_mem,plan_cpu,end_time,start_time,status,inst_num,task_name,job_name\nT4,50.0,1.5,600.0,3.0,1.0,T,3.0,w,a\n,,1,50,3,1,T,1,ps,a\n")
	f.Add("a,b,c,Terminated,1.0,2.0\n", "a,w,2.0,T,1.0,3.0,600.0,1.5,50.0,V100\nz,w,1,T,1,2,,,100,T4\n")
	f.Add("job_name,start_time\na,1\n", "job_name,start_time,end_time,plan_gpu\na,1,2,800\n")
	f.Fuzz(func(t *testing.T, jobs, tasks string) {
		tr, err := ReadPAI(strings.NewReader(jobs), "fuzz.csv", strings.NewReader(tasks), "fuzz.csv")
		if err != nil {
			checkParseError(t, err)
			return
		}
		checkAccepted(t, tr)
		for _, s := range tr.Skipped {
			if s.ID == "" || s.Reason == "" {
				t.Fatalf("skip without id or reason: %+v", s)
			}
		}
	})
}
