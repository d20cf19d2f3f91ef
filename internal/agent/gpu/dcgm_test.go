package gpu

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestParseDCGM(t *testing.T) {
	tests := []struct {
		file string
		want []Reading
	}{
		{"dcgm/h100x2.prom", []Reading{
			gpuRow(0, "GPU-3f2a9c1e-7b4d-4e8a-9c21-5d6e7f8a9b01", "NVIDIA H100 80GB HBM3", 97, 71234, 71234+9844+481, 652, 61),
			gpuRow(1, "GPU-8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e02", "NVIDIA H100 80GB HBM3", 0, 4, 4+80674+881, 70, 33),
		}},
		{"dcgm/a100-mig.prom", []Reading{
			{Index: 0, UUID: "GPU-9b7a6c5d-4e3f-4a2b-9c1d-0e9f8a7b6c10", Name: "NVIDIA A100-SXM4-40GB", UtilPct: Unknown, MemUsedMiB: Unknown, MemTotalMiB: Unknown, PowerW: 88, TempC: 33},
			{Index: 0, Name: "3g.20gb", MIG: true, ParentUUID: "GPU-9b7a6c5d-4e3f-4a2b-9c1d-0e9f8a7b6c10", MIGIndex: 1, UtilPct: 73, MemUsedMiB: 10012, MemTotalMiB: 19712, PowerW: Unknown, TempC: Unknown},
			{Index: 0, Name: "1g.5gb", MIG: true, ParentUUID: "GPU-9b7a6c5d-4e3f-4a2b-9c1d-0e9f8a7b6c10", MIGIndex: 9, UtilPct: 0, MemUsedMiB: 0, MemTotalMiB: 4864, PowerW: Unknown, TempC: Unknown},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseDCGM(tt.file, readFile(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseDCGMErrors(t *testing.T) {
	tests := []struct {
		name, in    string
		line        int
		field, text string
	}{
		{"no gpu label", "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-a\"} 5\n", 1, "DCGM_FI_DEV_GPU_UTIL label gpu", ""},
		{"bad gpu label", "# c\nDCGM_FI_DEV_GPU_UTIL{gpu=\"x\"} 5\n", 2, "DCGM_FI_DEV_GPU_UTIL label gpu", "x"},
		{"util over 100", "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 250\n", 1, "DCGM_FI_DEV_GPU_UTIL", "250"},
		{"NaN power", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} NaN\n", 1, "DCGM_FI_DEV_POWER_USAGE", "NaN"},
		{"bad value", "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} hot\n", 1, "DCGM_FI_DEV_GPU_TEMP", "hot"},
		{"engine ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"} 7\n", 1, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDCGM("scrape", []byte(tt.in))
			var pe *core.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *core.ParseError", err)
			}
			if pe.Line != tt.line || pe.Field != tt.field || pe.Value != tt.text {
				t.Errorf("error %q: line %d field %q value %q; want %d %q %q", err, pe.Line, pe.Field, pe.Value, tt.line, tt.field, tt.text)
			}
		})
	}
	// Metrics DCGM does not use may be anything the format allows.
	if rs, err := ParseDCGM("scrape", []byte("DCGM_FI_DEV_XID_ERRORS{err_code=\"0\"} 0\nother 1e9\n")); err != nil || len(rs) != 0 {
		t.Errorf("unused metrics: %v, %v; want no reading and no error", rs, err)
	}
}

func TestDCGMSample(t *testing.T) {
	body := readFile(t, "dcgm/h100x2.prom")
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.WriteHeader(status)
		w.Write(body)
	}))
	defer srv.Close()
	src := &DCGM{URL: srv.URL + "/metrics", Client: srv.Client()}
	got, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].UtilPct != 97 || got[1].ProcessesKnown {
		t.Errorf("readings = %+v; want 2, GPU 0 at 97%%, processes not known", got)
	}
	status = http.StatusServiceUnavailable
	if _, err := src.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: err = %v, want it to say 503", err)
	}
	status, body = http.StatusOK, []byte("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} lots\n")
	if _, err := src.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), `"lots"`) {
		t.Errorf("bad body: err = %v, want it to quote the value", err)
	}
	srv.Close()
	if _, err := src.Sample(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "dcgm: ") {
		t.Errorf("closed server: err = %v, want a dcgm: error", err)
	}
}

// FuzzParseDCGM checks that ParseDCGM never panics nor returns a value
// out of range, and that its errors are parse errors with a line (the
// parser's own agreement with expfmt is promtext's FuzzParse).
func FuzzParseDCGM(f *testing.F) {
	f.Add(readFile(f, "dcgm/h100x2.prom"))
	f.Add(readFile(f, "dcgm/a100-mig.prom"))
	f.Add([]byte("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 250\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} NaN\n"))
	f.Add([]byte("DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"} 0.5\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := ParseDCGM("fuzz", in)
		if err != nil {
			var pe *core.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v is not a parse error with a line", err)
			}
			return
		}
		for _, r := range rs {
			if r.UtilPct < Unknown || r.UtilPct > 100 || r.MemUsedMiB < Unknown || r.MemTotalMiB < Unknown || r.PowerW < Unknown || r.TempC < Unknown {
				t.Fatalf("reading out of range: %+v", r)
			}
		}
	})
}

// BenchmarkParseDCGM parses an eight-GPU scrape.
func BenchmarkParseDCGM(b *testing.B) {
	one := readFile(b, "dcgm/h100x2.prom")
	var body []byte
	for i := 0; i < 4; i++ {
		body = append(body, one...)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ParseDCGM("bench", body); err != nil {
			b.Fatal(err)
		}
	}
}
