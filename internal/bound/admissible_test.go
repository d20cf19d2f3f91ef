package bound

import (
	"slices"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestAdmissible(t *testing.T) {
	offers := []core.Offer{
		{ID: "t4x1", GPUModel: "T4", GPUs: 1, GPUMemMiB: 16384},
		{ID: "a10x4", GPUModel: "A10", GPUs: 4, GPUMemMiB: 24576},
		{ID: "v100x8", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768},
		{ID: "a100x8", GPUModel: "A100", GPUs: 8, GPUMemMiB: 81920},
		{ID: "none", GPUModel: "V100", GPUs: 0},
	}
	job := func(gpus int, mem int64, models ...string) *core.Job {
		return &core.Job{ID: "j", Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU, MemPerGPUMiB: mem, Models: models}}
	}
	for _, tc := range []struct {
		name string
		j    *core.Job
		want []string
	}{
		{"one GPU: any machine", job(1, 0), []string{"t4x1", "a10x4", "v100x8", "a100x8"}},
		{"4 GPUs: one machine of 4 or more", job(4, 0), []string{"a10x4", "v100x8", "a100x8"}},
		{"8 GPUs: one 8-GPU machine", job(8, 0), []string{"v100x8", "a100x8"}},
		{"12-GPU gang: two machines of 6 or more", job(12, 0), []string{"v100x8", "a100x8"}},
		{"4 GPUs of 40 GiB: only the A100", job(4, 40960), []string{"a100x8"}},
		{"2 T4s: the largest T4 machine has 1 GPU, so 1 each", job(2, 0, "T4"), []string{"t4x1"}},
		{"8 GPUs on A10 only: two 4-GPU machines", job(8, 0, "A10"), []string{"a10x4"}},
		{"no machine of the model", job(1, 0, "H100"), nil},
	} {
		var got []string
		for _, i := range Admissible(tc.j, offers) {
			got = append(got, offers[i].ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
