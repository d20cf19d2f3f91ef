package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func simCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// smallOpenb writes a three-node cluster and a dozen pods in the openb
// format and returns their paths.
func smallOpenb(t *testing.T) (nodes, pods string) {
	t.Helper()
	dir := t.TempDir()
	nodes = filepath.Join(dir, "nodes.csv")
	pods = filepath.Join(dir, "pods.csv")
	writeSimFile(t, nodes, "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,G2\nn1,16000,65536,2,T4\nn2,8000,32768,0,\n")
	var b strings.Builder
	b.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	for i, row := range []string{
		"4000,8192,1,500,,LS", "2000,4096,1,300,T4,BE", "8000,16384,2,1000,,LS", "1000,1024,0,0,,BE",
		"6000,8192,1,1000,,LS", "3000,4096,1,700,,BE", "2000,2048,0,0,,BE", "4000,8192,1,250,G2|T4,LS",
	} {
		b.WriteString("openb-pod-" + string(rune('a'+i)) + "," + row + ",Running,0,10,0\n")
	}
	writeSimFile(t, pods, b.String())
	return nodes, pods
}

func writeSimFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// simOut is what the tests read back from "sim openb --json".
type simOut struct {
	NodeCount    int     `json:"node_count"`
	PodCount     int     `json:"pod_count"`
	CapacityGPUs float64 `json:"capacity_gpus"`
	Inflation    float64 `json:"inflation"`
	Seeds        []int64 `json:"seeds"`
	Policies     []struct {
		Policy          string  `json:"policy"`
		AllocationRatio float64 `json:"allocation_ratio"`
		UnallocatedGPUs float64 `json:"unallocated_gpus"`
		Runs            []struct {
			Seed            int64   `json:"seed"`
			AllocationRatio float64 `json:"allocation_ratio"`
			UnallocatedGPUs float64 `json:"unallocated_gpus"`
			Placed          int     `json:"placed"`
			Failed          int     `json:"failed"`
			Pods            int     `json:"pods"`
			Curve           []struct {
				ArrivedPct int `json:"arrived_pct"`
			} `json:"curve"`
		} `json:"runs"`
	} `json:"policies"`
}

func TestSimOpenbJSON(t *testing.T) {
	nodes, pods := smallOpenb(t)
	code, out, errs := simCLI(t, "sim", "openb", "--nodes", nodes, "--pods", pods, "--policy", "all", "--seeds", "1-3,7", "--inflation", "1.5", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var o simOut
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if o.NodeCount != 3 || o.PodCount != 8 || o.CapacityGPUs != 6 || o.Inflation != 1.5 || !slices.Equal(o.Seeds, []int64{1, 2, 3, 7}) {
		t.Errorf("header %+v", o)
	}
	var names []string
	for _, p := range o.Policies {
		names = append(names, p.Policy)
		if len(p.Runs) != 4 {
			t.Fatalf("%s: %d runs, want 4", p.Policy, len(p.Runs))
		}
		var mean, unalloc float64
		for i, r := range p.Runs {
			if r.Seed != o.Seeds[i] || r.Placed+r.Failed != r.Pods || r.AllocationRatio < 0 || r.AllocationRatio > 1 || r.Curve != nil {
				t.Errorf("%s run %d: %+v", p.Policy, i, r)
			}
			mean += r.AllocationRatio / 4
			unalloc += r.UnallocatedGPUs / 4
		}
		if math.Abs(mean-p.AllocationRatio) > 1e-12 || math.Abs(unalloc-p.UnallocatedGPUs) > 1e-9 {
			t.Errorf("%s: means %v %v, want %v %v", p.Policy, p.AllocationRatio, p.UnallocatedGPUs, mean, unalloc)
		}
	}
	if diff := cmp.Diff([]string{"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "gpufleet"}, names); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}

	// --curve keeps the curve; the same seed gives the same numbers.
	code, out2, errs := simCLI(t, "sim", "openb", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--seed", "2", "--inflation", "1.5", "--json", "--curve")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var o2 simOut
	if err := json.Unmarshal([]byte(out2), &o2); err != nil {
		t.Fatal(err)
	}
	if len(o2.Policies) != 1 || len(o2.Policies[0].Runs[0].Curve) == 0 || o2.Policies[0].Runs[0].AllocationRatio != o.Policies[5].Runs[1].AllocationRatio {
		t.Errorf("fgd seed 2 with --curve: %+v", o2.Policies)
	}
}

func TestSimOpenbTable(t *testing.T) {
	nodes, pods := smallOpenb(t)
	code, out, errs := simCLI(t, "sim", "openb", "--nodes", nodes, "--pods", pods, "--policy", "bestfit, FGD", "--seeds", "4,5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"openb: 3 nodes, 6 GPUs (nodes.csv); 8 pods (pods.csv); arrivals to 130% of capacity; seeds 4-5", "policy", "allocation", "unallocated GPUs", "bestfit", "fgd"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gpufleet") {
		t.Errorf("output has a policy not asked for:\n%s", out)
	}
	code, out, errs = simCLI(t, "sim", "openb", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--ties", "random")
	if code != 0 || !strings.Contains(out, "; random ties") {
		t.Errorf("--ties random: exit %d, %s%s", code, out, errs)
	}
}

func TestSimOpenbErrors(t *testing.T) {
	nodes, pods := smallOpenb(t)
	bad := filepath.Join(t.TempDir(), "bad.csv")
	writeSimFile(t, bad, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,2000\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown policy", []string{"--policy", "worstfit"}, 2, `--policy: invalid value "worstfit": want one of random, dotprod, gpuclustering, gpupacking, bestfit, fgd, gpufleet, or all`},
		{"reversed range", []string{"--seeds", "9-3"}, 2, `--seeds: invalid value "9-3"`},
		{"not a seed", []string{"--seeds", "x"}, 2, `--seeds: invalid value "x"`},
		{"too many seeds", []string{"--seeds", "0-5000"}, 2, "at most 1000"},
		{"negative inflation", []string{"--inflation", "-1"}, 2, `--inflation: invalid value "-1": want a ratio 0..10`},
		{"popularity", []string{"--popularity", "0"}, 2, `--popularity: invalid value "0"`},
		{"ties", []string{"--ties", "last"}, 2, `--ties: invalid value "last": want first or random`},
		{"not a flag value", []string{"--seed", "x"}, 2, "invalid argument"},
		{"argument", []string{"extra"}, 2, `unexpected argument "extra"`},
		{"missing file", []string{"--pods", filepath.Join(t.TempDir(), "none.csv")}, 1, "sim openb: open pod list:"},
		{"bad file", []string{"--pods", bad}, 1, `bad.csv:2: gpu_milli: invalid value "2000": want an integer 0..1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"sim", "openb", "--nodes", nodes, "--pods", pods}, tt.args...)
			code, out, errs := simCLI(t, args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errs, tt.code, tt.want)
			}
			if out != "" {
				t.Errorf("stdout on error: %q", out)
			}
		})
	}
}

func TestSimHelp(t *testing.T) {
	code, out, errs := simCLI(t, "sim")
	if code != 0 || !strings.Contains(out, "openb") {
		t.Errorf("sim: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
	}{
		{"42", []int64{42}},
		{"42-45", []int64{42, 43, 44, 45}},
		{" 1, 5 ,7-9,5", []int64{1, 5, 7, 8, 9}},
		{"0-0", []int64{0}},
	}
	for _, tt := range tests {
		got, err := parseSeeds(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseSeeds(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "-1", "3-", "a-b", "5-2", "1,,2", "0-1000"} {
		if _, err := parseSeeds(in); err == nil {
			t.Errorf("parseSeeds(%q): no error", in)
		}
	}
}

// TestSimOpenbPublished runs the real trace from the shared data: FGD on
// seed 42 lands where the artifact's seeds do.
func TestSimOpenbPublished(t *testing.T) {
	dir := "../../" + openbDataDir
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("openb trace not available (the shared data is part of the test setup): %v", err)
	}
	code, out, errs := simCLI(t, "sim", "openb", "--nodes", "../../"+defaultOpenbNodes, "--pods", "../../"+defaultOpenbPods, "--policy", "fgd", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var o simOut
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	if r := o.Policies[0].AllocationRatio; o.NodeCount != 1213 || o.CapacityGPUs != 6212 || r < 0.95 || r > 0.96 {
		t.Errorf("fgd seed 42: %d nodes, %v GPUs, allocation %v; want 1213, 6212, 95.0–96.0%%", o.NodeCount, o.CapacityGPUs, r)
	}
}
