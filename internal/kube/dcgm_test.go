package kube

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

var scrapeAt = time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)

// TestParseDCGMPods reads a scrape in dcgm-exporter's layout with its
// Kubernetes mode on (testdata/dcgm-k8s.prom: the label set and order of
// the exporter's own output): the GPUs attributed to a pod, GPU_UTIL
// over GR_ENGINE_ACTIVE, FB_USED as memory, the unattributed GPU and the
// other metrics left out.
func TestParseDCGMPods(t *testing.T) {
	body, err := os.ReadFile("testdata/dcgm-k8s.prom")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseDCGMPods("scrape", "gpu-a", body, scrapeAt)
	if err != nil {
		t.Fatal(err)
	}
	want := []PodGPU{
		{Node: "gpu-a", GPU: 0, UUID: "GPU-5f1c2a4e-8d3b-4b6a-9e0f-1a2b3c4d5e60", Hostname: "dcgm-exporter-x7k2p", Namespace: "research", Pod: "train-0", Container: "trainer", UtilPct: 97, MemUsedMiB: 61234, At: scrapeAt},
		{Node: "gpu-a", GPU: 1, UUID: "GPU-7a2b3c4d-5e6f-4a8b-9c0d-1e2f3a4b5c61", Hostname: "dcgm-exporter-x7k2p", Namespace: "research", Pod: "notebook", Container: "jupyter", UtilPct: 0, MemUsedMiB: 1024, At: scrapeAt},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}

	// A MIG instance publishes GR_ENGINE_ACTIVE (a ratio), not GPU_UTIL.
	mig := "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"3\",UUID=\"GPU-x\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",namespace=\"nlp\",pod=\"p\",container=\"c\"} 0.42\n" +
		"DCGM_FI_DEV_GPU_UTIL{gpu=\"4\",namespace=\"nlp\",pod=\"q\"} 12\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"4\",namespace=\"nlp\",pod=\"q\"} 0.99\n"
	got, err = ParseDCGMPods("mig", "gpu-b", []byte(mig), scrapeAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].UtilPct != 42 || got[0].MIG != "2" || got[0].MemUsedMiB != -1 || got[1].UtilPct != 12 {
		t.Errorf("MIG and GPU_UTIL over GR_ENGINE_ACTIVE: %+v; want 42%% on instance 2 (memory unknown), then 12%% (GPU_UTIL wins)", got)
	}
}

func TestParseDCGMPodsErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in            string
		line                int
		field, value, allow string
	}{
		{"util over 100", "# c\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",namespace=\"a\",pod=\"p\"} 250\n", 2, "DCGM_FI_DEV_GPU_UTIL", "250", "a percentage, 0..100"},
		{"engine ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",namespace=\"a\",pod=\"p\"} 42\n", 1, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "42", "a ratio, 0..1"},
		{"no gpu", "DCGM_FI_DEV_FB_USED{namespace=\"a\",pod=\"p\"} 5\n", 1, "DCGM_FI_DEV_FB_USED label gpu", "", "the GPU's index, an integer ≥ 0"},
		{"no namespace", "DCGM_FI_DEV_FB_USED{gpu=\"0\",pod=\"p\"} 5\n", 1, "DCGM_FI_DEV_FB_USED label namespace", "", "the namespace of pod p"},
		{"negative memory", "DCGM_FI_DEV_FB_USED{gpu=\"0\",namespace=\"a\",pod=\"p\"} -1\n", 1, "DCGM_FI_DEV_FB_USED", "-1", "MiB, ≥ 0"},
		{"two pods on a GPU", "DCGM_FI_DEV_FB_USED{gpu=\"0\",namespace=\"a\",pod=\"p\"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",namespace=\"a\",pod=\"q\"} 1\n", 2, "DCGM_FI_DEV_GPU_UTIL label pod", "a/q", "GPU 0's pod on its other samples, a/p"},
		{"not the format", "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 5\n", 1, "DCGM_FI_DEV_GPU_UTIL labels", "5", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDCGMPods("scrape", "n", []byte(tt.in), scrapeAt)
			var pe *core.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *core.ParseError", err)
			}
			if pe.File != "scrape" || pe.Line != tt.line || pe.Field != tt.field || (tt.allow != "" && (pe.Value != tt.value || pe.Allowed != tt.allow)) {
				t.Errorf("error %q: line %d field %q value %q allowed %q; want %d %q %q %q", err, pe.Line, pe.Field, pe.Value, pe.Allowed, tt.line, tt.field, tt.value, tt.allow)
			}
		})
	}
}

func TestParseDCGMSelector(t *testing.T) {
	if sel, err := ParseDCGMSelector("--dcgm-selector", DefaultDCGMSelector); err != nil || sel.String() != DefaultDCGMSelector {
		t.Errorf("default: %v, %v", sel, err)
	}
	for _, bad := range []string{"", "app in (", "a=b=c"} {
		_, err := ParseDCGMSelector("--dcgm-selector", bad)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "--dcgm-selector" || fe.Value != bad {
			t.Errorf("ParseDCGMSelector(%q) = %v; want a field error naming --dcgm-selector and the value", bad, err)
		}
	}
}
