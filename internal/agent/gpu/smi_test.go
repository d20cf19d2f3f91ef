package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gpuRow builds a physical GPU reading for want tables.
func gpuRow(idx int, uuid, name string, util int, used, total int64, power, temp int) Reading {
	return Reading{Index: idx, UUID: uuid, Name: name, UtilPct: util, MemUsedMiB: used, MemTotalMiB: total, PowerW: power, TempC: temp}
}

func TestParseQueryGPU(t *testing.T) {
	tests := []struct {
		file string
		want []Reading
	}{
		{"smi/query-gpu-h100.csv", []Reading{
			gpuRow(0, "GPU-3f2a9c1e-7b4d-4e8a-9c21-5d6e7f8a9b01", "NVIDIA H100 80GB HBM3", 97, 71234, 81559, 652, 61),
			gpuRow(1, "GPU-8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e02", "NVIDIA H100 80GB HBM3", 0, 4, 81559, 70, 33),
			gpuRow(2, "GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c03", "NVIDIA H100 80GB HBM3", 45, 40960, 81559, 402, 55),
		}},
		{"smi/query-gpu-na.csv", []Reading{
			gpuRow(0, "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77", "Tesla T4", Unknown, Unknown, 15360, Unknown, Unknown),
			gpuRow(1, "GPU-6e6cb1e7-e44e-3c3d-635e-af4e9e3c9b88", "Tesla T4", 12, 1021, 15360, 28, 41),
		}},
		{"smi/query-gpu-mig.csv", []Reading{
			gpuRow(0, "GPU-9b7a6c5d-4e3f-4a2b-9c1d-0e9f8a7b6c10", "NVIDIA A100-SXM4-40GB", Unknown, 11462, 40960, 88, 33),
			gpuRow(1, "GPU-0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e11", "NVIDIA A100-SXM4-40GB", 58, 23100, 40960, 163, 38),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseQueryGPU(readFile(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseQueryGPUErrors(t *testing.T) {
	const ok = "0, GPU-a, H100, 1, 2, 3, 4.0, 5\n"
	tests := []struct {
		name, in string
		// line, column, field and value the error must name
		line, column int
		field, value string
	}{
		{"util over 100", ok + "1, GPU-b, H100, 101, 2, 3, 4, 5\n", 2, 4, "utilization.gpu", "101"},
		{"util not a number", "0, GPU-a, H100, busy, 2, 3, 4, 5\n", 1, 4, "utilization.gpu", "busy"},
		{"util with unit", "0, GPU-a, H100, 45 %, 2, 3, 4, 5\n", 1, 4, "utilization.gpu", "45 %"},
		{"negative memory", "0, GPU-a, H100, 1, -2, 3, 4, 5\n", 1, 5, "memory.used", "-2"},
		{"power garbage", "0, GPU-a, H100, 1, 2, 3, 4W, 5\n", 1, 7, "power.draw", "4W"},
		{"power NaN", "0, GPU-a, H100, 1, 2, 3, NaN, 5\n", 1, 7, "power.draw", "NaN"},
		{"index N/A", "[N/A], GPU-a, H100, 1, 2, 3, 4, 5\n", 1, 1, "index", "[N/A]"},
		{"uuid empty", "0, , H100, 1, 2, 3, 4, 5\n", 1, 2, "uuid", ""},
		{"temperature float", "0, GPU-a, H100, 1, 2, 3, 4, 5.5\n", 1, 8, "temperature.gpu", "5.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseQueryGPU([]byte(tt.in))
			var pe *core.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *core.ParseError", err)
			}
			got := [4]string{fmt.Sprint(pe.Line), fmt.Sprint(pe.Column), pe.Field, pe.Value}
			want := [4]string{fmt.Sprint(tt.line), fmt.Sprint(tt.column), tt.field, tt.value}
			if got != want {
				t.Errorf("error %q names line/column/field/value %v, want %v", err, got, want)
			}
			for _, part := range []string{fmt.Sprintf(":%d:", tt.line), tt.field, fmt.Sprintf("%q", tt.value)} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %s", err, part)
				}
			}
		})
	}
	_, err := ParseQueryGPU([]byte("0, GPU-a, H100, 1, 2, 3\n"))
	if err == nil || !strings.Contains(err.Error(), "6 fields") || !strings.Contains(err.Error(), "want 8 fields") {
		t.Errorf("short line: err = %v, want it to say 6 fields, want 8", err)
	}
}

func TestParseComputeApps(t *testing.T) {
	got, err := ParseComputeApps(readFile(t, "smi/apps-h100.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []App{
		{"GPU-3f2a9c1e-7b4d-4e8a-9c21-5d6e7f8a9b01", 48213, 70112},
		{"GPU-3f2a9c1e-7b4d-4e8a-9c21-5d6e7f8a9b01", 48290, 1100},
		{"GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c03", 50111, Unknown},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for _, empty := range []string{"", "\n", "No running processes found\n"} {
		if got, err := ParseComputeApps([]byte(empty)); err != nil || len(got) != 0 {
			t.Errorf("ParseComputeApps(%q) = %v, %v; want none", empty, got, err)
		}
	}
	if _, err := ParseComputeApps([]byte("GPU-a, 0, 5\n")); err == nil || !strings.Contains(err.Error(), "pid") {
		t.Errorf("pid 0: err = %v, want it to name pid", err)
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList(readFile(t, "smi/list-mig.txt"))
	if err != nil {
		t.Fatal(err)
	}
	mig := func(n int, uuid, profile string) Reading {
		r := unknownReading()
		r.Index, r.UUID, r.Name, r.MIG, r.ParentUUID, r.MIGIndex = 0, uuid, profile, true, "GPU-9b7a6c5d-4e3f-4a2b-9c1d-0e9f8a7b6c10", n
		return r
	}
	want := []Reading{
		mig(0, "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", "3g.20gb"),
		mig(1, "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb", "2g.10gb"),
		mig(2, "MIG-1e3b5a7c-9d2f-5e4a-8b6c-0d1f3e5a7b9c", "1g.5gb"),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for _, bad := range []string{
		"  MIG 1g.5gb Device 0: (UUID: MIG-x)\n",                          // before any GPU
		"GPU 0: A100 (UUID: GPU-a)\n  MIG 1g.5gb Device: (UUID: MIG-x)\n", // no number
		"GPU x: A100 (UUID: GPU-a)\n",
		"GPU 0: A100\n",
	} {
		if _, err := ParseList([]byte(bad)); err == nil {
			t.Errorf("ParseList(%q) succeeded, want an error", bad)
		}
	}
}

// replay is a Command that answers nvidia-smi calls from testdata files,
// by first argument, and records the calls.
type replay struct {
	files map[string]string // first argument's prefix → testdata file
	calls []string
	fail  error
}

func (r *replay) run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, strings.Join(append([]string{name}, args...), " "))
	if r.fail != nil {
		return nil, r.fail
	}
	for prefix, file := range r.files {
		if strings.HasPrefix(args[0], prefix) {
			return os.ReadFile(filepath.Join("testdata", file))
		}
	}
	return nil, fmt.Errorf("replay: no recording for %v", args)
}

func TestSMISample(t *testing.T) {
	r := &replay{files: map[string]string{"--query-gpu": "smi/query-gpu-h100.csv", "--query-compute-apps": "smi/apps-h100.csv"}}
	s := &SMI{Path: "/usr/bin/nvidia-smi", Run: r.run}
	got, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{
		"/usr/bin/nvidia-smi --query-gpu=" + QueryGPUFields + " --format=csv,noheader,nounits",
		"/usr/bin/nvidia-smi --query-compute-apps=" + QueryAppsFields + " --format=csv,noheader,nounits",
	}
	if d := cmp.Diff(wantCalls, r.calls); d != "" {
		t.Errorf("calls (-want +got)\n%s", d)
	}
	if len(got) != 3 {
		t.Fatalf("got %d readings, want 3", len(got))
	}
	wantProcs := [][]Process{
		{{PID: 48213, UsedMemMiB: 70112, SMUtilPct: Unknown}, {PID: 48290, UsedMemMiB: 1100, SMUtilPct: Unknown}},
		nil,
		{{PID: 50111, UsedMemMiB: Unknown, SMUtilPct: Unknown}},
	}
	for i, g := range got {
		if !g.ProcessesKnown {
			t.Errorf("GPU %d: ProcessesKnown false; nvidia-smi lists every compute process", i)
		}
		if d := cmp.Diff(wantProcs[i], g.Processes); d != "" {
			t.Errorf("GPU %d processes (-want +got)\n%s", i, d)
		}
	}
}

func TestSMISampleMIG(t *testing.T) {
	r := &replay{files: map[string]string{"--query-gpu": "smi/query-gpu-mig.csv", "--query-compute-apps": "smi/apps-mig.csv", "-L": "smi/list-mig.txt"}}
	got, err := (&SMI{Run: r.run}).Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != 3 || !strings.HasSuffix(r.calls[2], " -L") {
		t.Errorf("calls = %q, want nvidia-smi -L third (a GPU's utilization is [N/A])", r.calls)
	}
	var summary []string
	for _, g := range got {
		summary = append(summary, fmt.Sprintf("%d %s mig=%v procsKnown=%v procs=%d", g.Index, g.UUID[:8], g.MIG, g.ProcessesKnown, len(g.Processes)))
	}
	want := []string{
		"0 GPU-9b7a mig=false procsKnown=true procs=1",
		"0 MIG-c6d4 mig=true procsKnown=false procs=0",
		"0 MIG-cba6 mig=true procsKnown=false procs=0",
		"0 MIG-1e3b mig=true procsKnown=false procs=0",
		"1 GPU-0c1d mig=false procsKnown=true procs=1",
	}
	if d := cmp.Diff(want, summary); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestSMISampleErrors(t *testing.T) {
	r := &replay{fail: errors.New("exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")}
	_, err := (&SMI{Run: r.run}).Sample(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nvidia-smi: query gpus") || !strings.Contains(err.Error(), "driver") {
		t.Errorf("err = %v, want nvidia-smi: query gpus: … driver", err)
	}
	r = &replay{files: map[string]string{"--query-gpu": "smi/list-mig.txt"}}
	_, err = (&SMI{Run: r.run}).Sample(context.Background())
	var pe *core.ParseError
	if !errors.As(err, &pe) || pe.Line != 1 {
		t.Errorf("err = %v, want a parse error on line 1", err)
	}
}

// formatQueryGPU writes readings back in nvidia-smi's form, for the fuzz
// round trip.
func formatQueryGPU(rs []Reading) string {
	var b strings.Builder
	num := func(v int64) string {
		if v == Unknown {
			return "[N/A]"
		}
		return fmt.Sprint(v)
	}
	for _, r := range rs {
		name := r.Name
		if name == "" {
			name = "[N/A]"
		}
		fmt.Fprintf(&b, "%d, %s, %s, %s, %s, %s, %s, %s\n", r.Index, r.UUID, name, num(int64(r.UtilPct)), num(r.MemUsedMiB), num(r.MemTotalMiB), num(int64(r.PowerW)), num(int64(r.TempC)))
	}
	return b.String()
}

func FuzzParseQueryGPU(f *testing.F) {
	for _, file := range []string{"smi/query-gpu-h100.csv", "smi/query-gpu-na.csv", "smi/query-gpu-mig.csv"} {
		f.Add(readFile(f, file))
	}
	f.Add([]byte("0, GPU-a, H100, [Not Supported], 0, 0, [Unknown Error], -5\r\n\n"))
	f.Add([]byte("0,GPU-a,,100,1,2,0.49,0"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := ParseQueryGPU(in)
		if err != nil {
			var pe *core.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v is not a parse error with a line", err)
			}
			return
		}
		for _, r := range rs {
			if r.UtilPct != Unknown && (r.UtilPct < 0 || r.UtilPct > 100) {
				t.Fatalf("utilization %d out of range", r.UtilPct)
			}
			if r.MemUsedMiB < Unknown || r.MemTotalMiB < Unknown || r.PowerW < Unknown || r.Index < 0 || r.UUID == "" {
				t.Fatalf("reading out of range: %+v", r)
			}
		}
		again, err := ParseQueryGPU([]byte(formatQueryGPU(rs)))
		if err != nil {
			t.Fatalf("reparse of %q: %v", formatQueryGPU(rs), err)
		}
		if d := cmp.Diff(rs, again); d != "" {
			t.Fatalf("round trip (-first +second)\n%s", d)
		}
	})
}

func FuzzParseList(f *testing.F) {
	f.Add(readFile(f, "smi/list-mig.txt"))
	f.Add([]byte("GPU 0: NVIDIA H100 (UUID: GPU-a)\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		migs, err := ParseList(in)
		if err != nil {
			return
		}
		for _, m := range migs {
			if !m.MIG || m.ParentUUID == "" || m.UUID == "" || m.MIGIndex < 0 {
				t.Fatalf("bad MIG entry %+v", m)
			}
		}
	})
}

func FuzzParseComputeApps(f *testing.F) {
	f.Add(readFile(f, "smi/apps-h100.csv"))
	f.Add([]byte("No running processes found\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		apps, err := ParseComputeApps(in)
		if err != nil {
			return
		}
		for _, a := range apps {
			if a.PID < 1 || a.GPUUUID == "" || a.UsedMemMiB < Unknown {
				t.Fatalf("bad app %+v", a)
			}
		}
	})
}
