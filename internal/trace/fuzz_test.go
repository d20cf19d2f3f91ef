package trace

import (
	"errors"
	"strings"
	"testing"
)

// The fuzzers check that the readers never panic, that every error is a
// *ParseError with a file name, and that every record they accept is
// within the documented bounds. Seeds: the cases below and the files under
// testdata/fuzz/<FuzzName>/ (crashers found earlier stay there).

func checkParseError(t *testing.T, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is a %T, not a *ParseError", err, err)
	}
	if pe.File != "fuzz.csv" {
		t.Fatalf("error %v does not name the file", err)
	}
	if !strings.HasPrefix(err.Error(), "fuzz.csv") {
		t.Fatalf("error %q does not start with the file name", err)
	}
}

func FuzzReadOpenbNodes(f *testing.F) {
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0227,32000,262144,0,\nopenb-node-0228,128000,786432,8,G3\n")
	f.Add("model,gpu,sn,memory_mib,cpu_milli\r\nT4,2,n,1,1\r\n")
	f.Add("sn,cpu_milli,memory_mib,gpu,model\na,\"1\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ReadOpenbNodes(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			checkParseError(t, err)
			return
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if n.Name == "" || seen[n.Name] {
				t.Fatalf("accepted empty or duplicate name %q", n.Name)
			}
			seen[n.Name] = true
			if n.CPUMilli < 0 || n.CPUMilli > MaxOpenbCPUMilli || n.MemMiB < 0 || n.MemMiB > MaxOpenbMemMiB || n.GPUs < 0 || n.GPUs > MaxOpenbGPUs {
				t.Fatalf("accepted out-of-range node %+v", n)
			}
			if n.GPUs > 0 && n.Model == "" {
				t.Fatalf("accepted GPUs without a model: %+v", n)
			}
		}
	})
}

func FuzzReadOpenbPods(f *testing.F) {
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"openb-pod-0035,16000,32768,1,220,V100M16|V100M32,LS,Pending,9967058,9968575,\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,12000,16384,8,1000\nq,1,0,0,0\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\np,1,1,1,1001,-1\n")
	f.Fuzz(func(t *testing.T, in string) {
		pods, err := ReadOpenbPods(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			checkParseError(t, err)
			return
		}
		seen := map[string]bool{}
		for _, p := range pods {
			if p.Name == "" || seen[p.Name] {
				t.Fatalf("accepted empty or duplicate name %q", p.Name)
			}
			seen[p.Name] = true
			if p.CPUMilli < 0 || p.MemMiB < 0 || p.NumGPU < 0 || p.NumGPU > MaxOpenbGPUs || p.GPUMilli < 0 || p.GPUMilli > MaxOpenbGPUMilli {
				t.Fatalf("accepted out-of-range pod %+v", p)
			}
			if p.NumGPU > 0 && p.GPUMilli == 0 {
				t.Fatalf("accepted GPUs without a share: %+v", p)
			}
			for _, m := range p.GPUSpec {
				if m == "" || strings.Contains(m, "|") {
					t.Fatalf("bad model %q in spec %v", m, p.GPUSpec)
				}
			}
			for _, tm := range []int64{p.CreationTime, p.DeletionTime, p.ScheduledTime} {
				if tm < NoTime {
					t.Fatalf("time %d below NoTime", tm)
				}
			}
		}
	})
}
