package trace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// openbDir is the shared copy of the openb trace, relative to this
// package's directory (go test runs in it).
const openbDir = "../../../shared/data/alibaba-openb-gpu-sharing"

func openbFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(openbDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("openb trace not available (the shared data is part of the test setup): %v", err)
	}
	return p
}

func TestReadOpenbNodes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []OpenbNode
	}{
		{
			name: "as published",
			in:   "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0227,32000,262144,0,\nopenb-node-0228,128000,786432,8,G3\n",
			want: []OpenbNode{
				{Name: "openb-node-0227", CPUMilli: 32000, MemMiB: 262144},
				{Name: "openb-node-0228", CPUMilli: 128000, MemMiB: 786432, GPUs: 8, Model: "G3"},
			},
		},
		{
			name: "columns by name, any order, case and space, unknown skipped, BOM, CRLF, blank line",
			in:   "\ufeff Model ,GPU,extra,SN,memory_mib,cpu_milli\r\nT4,2,x,n1,1024,8000\r\n\r\n",
			want: []OpenbNode{{Name: "n1", CPUMilli: 8000, MemMiB: 1024, GPUs: 2, Model: "T4"}},
		},
		{name: "header only", in: "sn,cpu_milli,memory_mib,gpu,model\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadOpenbNodes(strings.NewReader(tt.in), "nodes.csv")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadOpenbPods(t *testing.T) {
	header := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	tests := []struct {
		name string
		in   string
		want []OpenbPod
	}{
		{
			name: "as published",
			in: header +
				"openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497\n" +
				"openb-pod-0035,16000,32768,1,220,V100M16|V100M32,LS,Pending,9967058,9968575,\n" +
				"openb-pod-0040,4000,0,0,0,,BE,Running,0,1,0\n",
			want: []OpenbPod{
				{Name: "openb-pod-0017", CPUMilli: 88000, MemMiB: 327680, NumGPU: 8, GPUMilli: 1000, QoS: "Burstable", Phase: "Succeeded", CreationTime: 9437497, DeletionTime: 10769854, ScheduledTime: 9437497},
				{Name: "openb-pod-0035", CPUMilli: 16000, MemMiB: 32768, NumGPU: 1, GPUMilli: 220, GPUSpec: []string{"V100M16", "V100M32"}, QoS: "LS", Phase: "Pending", CreationTime: 9967058, DeletionTime: 9968575, ScheduledTime: NoTime},
				{Name: "openb-pod-0040", CPUMilli: 4000, NumGPU: 0, QoS: "BE", Phase: "Running", CreationTime: 0, DeletionTime: 1, ScheduledTime: 0},
			},
		},
		{
			name: "the five columns of the multigpu files",
			in:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,12000,16384,1,1000\n",
			want: []OpenbPod{{Name: "p", CPUMilli: 12000, MemMiB: 16384, NumGPU: 1, GPUMilli: 1000, CreationTime: NoTime, DeletionTime: NoTime, ScheduledTime: NoTime}},
		},
		{
			name: "spec with empty parts",
			in:   "gpu_milli,num_gpu,memory_mib,cpu_milli,name,gpu_spec\n500,1,1,1,p,|T4||A10|\n",
			want: []OpenbPod{{Name: "p", CPUMilli: 1, MemMiB: 1, NumGPU: 1, GPUMilli: 500, GPUSpec: []string{"T4", "A10"}, CreationTime: NoTime, DeletionTime: NoTime, ScheduledTime: NoTime}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadOpenbPods(strings.NewReader(tt.in), "pods.csv")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenbErrors(t *testing.T) {
	nodeHeader := "sn,cpu_milli,memory_mib,gpu,model\n"
	podHeader := "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
	tests := []struct {
		name  string
		pods  bool
		in    string
		want  string
		where ParseError // File, Line, Column, Value compared
	}{
		{name: "empty file", in: "", want: `x.csv: empty file: want a header row naming the columns sn,cpu_milli,memory_mib,gpu,model`, where: ParseError{File: "x.csv"}},
		{name: "missing column", in: "sn,cpu_milli,gpu\n", want: `x.csv:1: missing columns "memory_mib,model": want a header with sn,cpu_milli,memory_mib,gpu,model`, where: ParseError{File: "x.csv", Line: 1, Value: "memory_mib,model"}},
		{name: "duplicate column", in: "sn,SN,cpu_milli,memory_mib,gpu,model\n", want: `x.csv:1: sn: duplicate column: want each column once`, where: ParseError{File: "x.csv", Line: 1, Field: "sn"}},
		{name: "not a number", in: nodeHeader + "a,1,1,2,T4\nb,x,1,2,T4\n", want: `x.csv:3: cpu_milli: invalid value "x": want an integer 0..1000000000`, where: ParseError{File: "x.csv", Line: 3, Field: "cpu_milli", Value: "x"}},
		{name: "negative", in: nodeHeader + "a,1,-5,2,T4\n", want: `x.csv:2: memory_mib: invalid value "-5": want an integer 0..1099511627776`, where: ParseError{File: "x.csv", Line: 2, Field: "memory_mib", Value: "-5"}},
		{name: "too many GPUs", in: nodeHeader + "a,1,1,65,T4\n", want: `x.csv:2: gpu: invalid value "65": want an integer 0..64`, where: ParseError{File: "x.csv", Line: 2, Field: "gpu", Value: "65"}},
		{name: "GPUs without model", in: nodeHeader + "a,1,1,2,\n", want: `x.csv:2: model: empty GPU model: want the model of the node's 2 GPUs`, where: ParseError{File: "x.csv", Line: 2, Field: "model"}},
		{name: "duplicate node", in: nodeHeader + "a,1,1,0,\na,1,1,0,\n", want: `x.csv:3: sn: duplicate node "a": want each node once (first on line 2)`, where: ParseError{File: "x.csv", Line: 3, Field: "sn", Value: "a"}},
		{name: "short row", in: nodeHeader + "a,1,1\n", want: `x.csv:2: short row "3 cells": want 5 cells, one per header column (a truncated file?)`, where: ParseError{File: "x.csv", Line: 2, Value: "3 cells"}},
		{name: "malformed CSV", in: nodeHeader + "a,\"1,1,0,\n", want: `x.csv:2: malformed CSV: extraneous or missing " in quoted-field (parse error on line 2, column 11: extraneous or missing " in quoted-field)`, where: ParseError{File: "x.csv", Line: 2}},
		{name: "share above a GPU", pods: true, in: podHeader + "p,1,1,1,1001\n", want: `x.csv:2: gpu_milli: invalid value "1001": want an integer 0..1000`, where: ParseError{File: "x.csv", Line: 2, Field: "gpu_milli", Value: "1001"}},
		{name: "GPUs without share", pods: true, in: podHeader + "p,1,1,2,0\n", want: `x.csv:2: gpu_milli: invalid value "0": want a share of 1..1000 per GPU for a pod asking for 2 GPUs`, where: ParseError{File: "x.csv", Line: 2, Field: "gpu_milli", Value: "0"}},
		{name: "bad time", pods: true, in: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\np,1,1,0,0,-3\n", want: `x.csv:2: creation_time: invalid value "-3": want seconds, an integer >= 0, or empty`, where: ParseError{File: "x.csv", Line: 2, Field: "creation_time", Value: "-3"}},
		{name: "empty pod name", pods: true, in: podHeader + " ,1,1,0,0\n", want: `x.csv:2: name: empty name: want the pod's name`, where: ParseError{File: "x.csv", Line: 2, Field: "name"}},
		{name: "duplicate pod", pods: true, in: podHeader + "p,1,1,0,0\np,1,1,0,0\n", want: `x.csv:3: name: duplicate pod "p": want each pod once (first on line 2)`, where: ParseError{File: "x.csv", Line: 3, Field: "name", Value: "p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.pods {
				_, err = ReadOpenbPods(strings.NewReader(tt.in), "x.csv")
			} else {
				_, err = ReadOpenbNodes(strings.NewReader(tt.in), "x.csv")
			}
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%T is not a *ParseError", err)
			}
			got := ParseError{File: pe.File, Line: pe.Line, Field: pe.Field, Value: pe.Value}
			if got != tt.where {
				t.Errorf("location %+v, want %+v", got, tt.where)
			}
		})
	}
}

func TestLoadOpenbMissingFile(t *testing.T) {
	_, err := LoadOpenbPods(filepath.Join(t.TempDir(), "none.csv"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want one wrapping os.ErrNotExist", err)
	}
	_, err = LoadOpenbNodes(filepath.Join(t.TempDir(), "none.csv"))
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "open node list: ") {
		t.Errorf("err = %v, want open node list: … wrapping os.ErrNotExist", err)
	}
}

// TestOpenbNodeFiles checks the published node lists against the counts in
// the data's README.
func TestOpenbNodeFiles(t *testing.T) {
	all, err := LoadOpenbNodes(openbFile(t, "openb_node_list_all_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := LoadOpenbNodes(openbFile(t, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]int{}
	gpus := 0
	for _, n := range all {
		byKind[fmt.Sprintf("%s×%d", n.Model, n.GPUs)]++
		gpus += n.GPUs
	}
	want := map[string]int{
		"G2×8": 549, "T4×2": 387, "×0": 310, "P100×2": 131, "G3×8": 39, "V100M16×4": 28, "V100M32×8": 21,
		"V100M16×1": 19, "T4×4": 17, "V100M32×4": 9, "V100M16×8": 8, "P100×1": 3, "A10×1": 2,
	}
	if len(all) != 1523 || gpus != 6212 {
		t.Errorf("all_node: %d nodes, %d GPUs; want 1,523 and 6,212", len(all), gpus)
	}
	if diff := cmp.Diff(want, byKind); diff != "" {
		t.Errorf("all_node by model×GPUs (-want +got):\n%s", diff)
	}
	gpus = 0
	for _, n := range gpu {
		if n.GPUs == 0 {
			t.Errorf("gpu_node lists CPU-only node %s", n.Name)
		}
		gpus += n.GPUs
	}
	if len(gpu) != 1213 || gpus != 6212 {
		t.Errorf("gpu_node: %d nodes, %d GPUs; want 1,213 and 6,212", len(gpu), gpus)
	}
}

// TestOpenbDefaultPods checks the production pod list against the counts
// in the data's README.
func TestOpenbDefaultPods(t *testing.T) {
	pods, err := LoadOpenbPods(openbFile(t, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	byGPUs := map[int]int{}
	qos := map[string]int{}
	phase := map[string]int{}
	fractional := 0
	var milli int64
	for i := range pods {
		p := &pods[i]
		byGPUs[p.NumGPU]++
		qos[p.QoS]++
		phase[p.Phase]++
		if p.NumGPU == 1 && p.GPUMilli < 1000 {
			fractional++
		}
		if p.NumGPU > 1 && p.GPUMilli != 1000 {
			t.Errorf("%s: %d GPUs of %d milli: only single-GPU pods share", p.Name, p.NumGPU, p.GPUMilli)
		}
		milli += p.TotalGPUMilli()
	}
	if len(pods) != 8152 {
		t.Errorf("%d pods, want 8,152", len(pods))
	}
	if diff := cmp.Diff(map[int]int{1: 6989, 0: 1088, 8: 44, 2: 16, 4: 15}, byGPUs); diff != "" {
		t.Errorf("pods by num_gpu (-want +got):\n%s", diff)
	}
	if fractional != 3078 {
		t.Errorf("%d fractional pods, want 3,078", fractional)
	}
	if diff := cmp.Diff(map[string]int{"LS": 4647, "BE": 3398, "Burstable": 100, "Guaranteed": 7}, qos); diff != "" {
		t.Errorf("pods by qos (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"Running": 5193, "Failed": 1870, "Pending": 897, "Succeeded": 192}, phase); diff != "" {
		t.Errorf("pods by phase (-want +got):\n%s", diff)
	}
	if milli != 6_086_800 {
		t.Errorf("total GPU request %d milli, want 6,086,800 (6,086.8 GPUs)", milli)
	}
}

// TestOpenbPodVariants reads every published pod list: they all parse and
// have the README's sizes.
func TestOpenbPodVariants(t *testing.T) {
	want := map[string]int{
		"cpu0": 7064, "cpu037": 7336, "cpu050": 7439, "cpu072": 7608, "cpu100": 7853, "cpu200": 8832,
		"cpu235": 9240, "cpu250": 9420, "cpu300": 10094, "default": 8152,
		"gpushare100": 8152, "gpushare20": 8152, "gpushare40": 8152, "gpushare60": 8152, "gpushare80": 8152,
		"gpuspec05": 8152, "gpuspec10": 8152, "gpuspec20": 8152, "gpuspec25": 8152, "gpuspec33": 8152,
		"multigpu20": 8324, "multigpu30": 8508, "multigpu40": 8746, "multigpu50": 9061,
	}
	openbFile(t, "openb_pod_list_default.csv")
	for v, n := range want {
		pods, err := LoadOpenbPods(filepath.Join(openbDir, "openb_pod_list_"+v+".csv"))
		if err != nil {
			t.Errorf("%s: %v", v, err)
			continue
		}
		if len(pods) != n {
			t.Errorf("%s: %d pods, want %d", v, len(pods), n)
		}
	}
	specs := 0
	pods, err := LoadOpenbPods(filepath.Join(openbDir, "openb_pod_list_gpuspec33.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if len(p.GPUSpec) > 0 {
			specs++
		}
	}
	if specs == 0 {
		t.Error("gpuspec33: no pod has a GPU-type constraint")
	}
}

func BenchmarkReadOpenbPods(b *testing.B) {
	data, err := os.ReadFile(openbFile(b, "openb_pod_list_default.csv"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ReadOpenbPods(strings.NewReader(string(data)), "default"); err != nil {
			b.Fatal(err)
		}
	}
}
