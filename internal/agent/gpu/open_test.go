package gpu

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/clock"
)

// stub is a Source whose Sample answers what the test says.
type stub struct {
	name   string
	err    error
	closed bool
}

func (s *stub) Name() string { return s.name }
func (s *stub) Sample(context.Context) ([]Reading, error) {
	if s.err != nil {
		return nil, s.err
	}
	return []Reading{{UUID: "GPU-stub"}}, nil
}
func (s *stub) Close() error { s.closed = true; return nil }

func noNVML() (Source, error) {
	return nil, unavailable("nvml unavailable: init: ERROR_LIBRARY_NOT_FOUND")
}

func TestOpenAuto(t *testing.T) {
	dcgm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-d\"} 5\n"))
	}))
	defer dcgm.Close()
	smiOK := (&replay{files: map[string]string{"--query-gpu": "smi/query-gpu-h100.csv", "--query-compute-apps": "smi/apps-none.csv"}}).run
	smiBroken := (&replay{fail: errors.New("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")}).run
	found := func(string) (string, error) { return "/usr/bin/nvidia-smi", nil }
	missing := func(f string) (string, error) { return "", &exec.Error{Name: f, Err: exec.ErrNotFound} }
	working := &stub{name: "nvml"}
	failing := &stub{name: "nvml", err: errors.New("device count: ERROR_UNKNOWN")}

	tests := []struct {
		name string
		o    Options
		want string // the source picked, or "" for an error
		// errHas lists what the error must say
		errHas []string
	}{
		{"nvml first", Options{openNVML: func() (Source, error) { return working, nil }, LookPath: found, Run: smiOK}, "nvml", nil},
		{"nvml unavailable, nvidia-smi on PATH", Options{openNVML: noNVML, LookPath: found, Run: smiOK}, "nvidia-smi", nil},
		{"nvml fails its first sample", Options{openNVML: func() (Source, error) { return failing, nil }, LookPath: found, Run: smiOK}, "nvidia-smi", nil},
		{"nvidia-smi broken, dcgm given", Options{openNVML: noNVML, LookPath: found, Run: smiBroken, DCGMURL: dcgm.URL}, "dcgm", nil},
		{"nvidia-smi missing, dcgm given", Options{openNVML: noNVML, LookPath: missing, DCGMURL: dcgm.URL}, "dcgm", nil},
		{"nothing", Options{openNVML: noNVML, LookPath: missing}, "", []string{"nvml unavailable", "nvidia-smi unavailable", "dcgm unavailable: no exporter URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Open(context.Background(), "auto", tt.o)
			if tt.want == "" {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("err %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.Name() != tt.want {
				t.Errorf("picked %s, want %s", src.Name(), tt.want)
			}
		})
	}
	if !failing.closed {
		t.Error("auto did not close the NVML source whose first sample failed")
	}
}

func TestOpenByName(t *testing.T) {
	o := Options{openNVML: noNVML, LookPath: func(string) (string, error) { return "", exec.ErrNotFound }}
	if _, err := Open(context.Background(), "nvml", o); !errors.Is(err, ErrUnavailable) {
		t.Errorf("nvml: err = %v, want ErrUnavailable", err)
	}
	if _, err := Open(context.Background(), "nvidia-smi", o); !errors.Is(err, ErrUnavailable) {
		t.Errorf("nvidia-smi: err = %v, want ErrUnavailable", err)
	}
	if _, err := Open(context.Background(), "dcgm", o); !errors.Is(err, ErrUnavailable) {
		t.Errorf("dcgm without URL: err = %v, want ErrUnavailable", err)
	}
	src, err := Open(context.Background(), "fake", o)
	if err != nil || src.Name() != "fake" {
		t.Errorf("fake: %v, %v", src, err)
	}
	_, err = Open(context.Background(), "rocm", o)
	if err == nil || !strings.Contains(err.Error(), `gpu-source: invalid value "rocm": want one of auto, nvml, nvidia-smi, dcgm, fake`) {
		t.Errorf("rocm: err = %v", err)
	}
	// The real NVML of this build: unavailable without a driver or cgo,
	// a working source with both.
	if src, err := Open(context.Background(), "nvml", Options{}); err == nil {
		src.Close()
	} else if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "nvml unavailable") {
		t.Errorf("real nvml: err = %v, want nvml unavailable", err)
	}
}

func TestFakeScript(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := clock.NewManual(start)
	busy := Reading{Index: 0, UUID: "GPU-a", UtilPct: 90, Processes: []Process{{PID: 7}}}
	idle := Reading{Index: 0, UUID: "GPU-a", UtilPct: 0, Processes: []Process{{PID: 7}}}
	f := NewFake(c, Step{At: time.Minute, Readings: []Reading{busy}}, Step{At: 5 * time.Minute, Readings: []Reading{idle}})
	utils := func() []int {
		rs, err := f.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, r := range rs {
			out = append(out, r.UtilPct)
		}
		return out
	}
	var got [][]int
	for _, d := range []time.Duration{0, time.Minute, 3 * time.Minute, time.Minute, time.Hour} {
		c.Advance(d)
		got = append(got, utils())
	}
	want := [][]int{nil, {90}, {90}, {0}, {0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	rs, _ := f.Sample(context.Background())
	rs[0].Processes[0].PID = 99
	if again, _ := f.Sample(context.Background()); again[0].Processes[0].PID != 7 {
		t.Error("a caller's change to a reading leaked into the script")
	}
	f.Fail(errors.New("driver gone"))
	if _, err := f.Sample(context.Background()); err == nil || err.Error() != "fake: driver gone" {
		t.Errorf("err = %v, want fake: driver gone", err)
	}

}

// TestMachine: the fake is sized by its board and reads what its loads
// say: a GPU without load idle, one with load busy, out-of-range loads
// clamped.
func TestMachine(t *testing.T) {
	loads := map[int]Load{3: {UtilPct: 90, MemMiB: 30000, PIDs: []int{41, 42}}, 5: {UtilPct: 400, MemMiB: 1 << 30}}
	m := NewMachine(Board{Count: 8, Model: "NVIDIA A100-SXM4-40GB", MemMiB: 40960}, func() map[int]Load { return loads })
	rs, err := m.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 8 {
		t.Fatalf("%d readings, want the board's 8", len(rs))
	}
	type row struct {
		Index, Util int
		Mem, Total  int64
		Model       string
	}
	var got []row
	for _, r := range rs {
		got = append(got, row{r.Index, r.UtilPct, r.MemUsedMiB, r.MemTotalMiB, r.Name})
		if !r.ProcessesKnown || r.PowerW < fakeIdleW || r.PowerW > fakeMaxW || r.TempC < fakeIdleC || r.TempC > fakeMaxC {
			t.Errorf("reading %+v: processes not known, or power or temperature out of range", r)
		}
	}
	var want []row
	for i := range 8 {
		want = append(want, row{i, 0, 0, 40960, "NVIDIA A100-SXM4-40GB"})
	}
	want[3].Util, want[3].Mem = 90, 30000
	want[5].Util, want[5].Mem = 100, 40960
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if d := cmp.Diff([]Process{{PID: 41, UsedMemMiB: 15000, SMUtilPct: Unknown}, {PID: 42, UsedMemMiB: 15000, SMUtilPct: Unknown}}, rs[3].Processes); d != "" {
		t.Errorf("GPU 3's processes (-want +got)\n%s", d)
	}
	if len(rs[5].Processes) != 0 {
		t.Errorf("GPU 5 lists processes %v, its load names none", rs[5].Processes)
	}
	if rs[3].UUID == rs[5].UUID {
		t.Error("two GPUs share a UUID")
	}
	if rs, _ := NewMachine(Board{}, nil).Sample(context.Background()); len(rs) != 1 || rs[0].Name != DefaultBoard.Model || rs[0].UtilPct != 0 {
		t.Errorf("unsized machine: %+v, want DefaultBoard idle", rs)
	}
	src, err := Open(context.Background(), "fake", Options{FakeBoard: Board{Count: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if rs, _ := src.Sample(context.Background()); len(rs) != 4 {
		t.Errorf("Open fake with a 4-GPU board: %d readings", len(rs))
	}
	for _, b := range []Board{{Count: 0, Model: "x", MemMiB: 1}, {Count: 65, Model: "x", MemMiB: 1}, {Count: 1, MemMiB: 1}, {Count: 1, Model: "x"}} {
		if b.Validate() == nil {
			t.Errorf("Board %+v valid, want an error", b)
		}
	}
}
