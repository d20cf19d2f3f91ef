package gpu

import (
	"context"
	"os/exec"
	"testing"
)

// TestRealSourcesAgree runs only on a machine with a GPU: nvidia-smi and
// (with cgo) NVML must both read it and agree on the devices, their
// models and their memory. Elsewhere it skips, saying why.
func TestRealSourcesAgree(t *testing.T) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		t.Skip("no nvidia-smi on PATH: nothing real to read")
	}
	ctx := context.Background()
	smi, err := (&SMI{Path: path}).Sample(ctx)
	if err != nil {
		t.Fatalf("nvidia-smi is here but does not read: %v", err)
	}
	if len(smi) == 0 {
		t.Fatal("nvidia-smi read no GPU")
	}
	for _, r := range smi {
		t.Logf("nvidia-smi: %+v", r)
	}
	n, err := NewNVML()
	if err != nil {
		t.Skipf("NVML: %v", err)
	}
	defer n.Close()
	nv, err := n.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byUUID := map[string]Reading{}
	for _, r := range nv {
		byUUID[r.UUID] = r
		t.Logf("nvml: %+v", r)
	}
	for _, s := range smi {
		r, ok := byUUID[s.UUID]
		if !ok {
			t.Errorf("%s: nvidia-smi sees it, NVML does not", s.UUID)
			continue
		}
		if r.Name != s.Name || r.Index != s.Index {
			t.Errorf("%s: NVML says %d %q, nvidia-smi %d %q", s.UUID, r.Index, r.Name, s.Index, s.Name)
		}
		// Drivers differ in whether what they reserve counts in the
		// total; a few percent apart is the same GPU.
		if d := r.MemTotalMiB - s.MemTotalMiB; d < -r.MemTotalMiB/20 || d > r.MemTotalMiB/20 {
			t.Errorf("%s: memory total NVML %d MiB, nvidia-smi %d MiB", s.UUID, r.MemTotalMiB, s.MemTotalMiB)
		}
	}
}
