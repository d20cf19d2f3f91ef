package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestTypicalWorkload(t *testing.T) {
	rep := func(n int, r core.Request) []core.Request {
		out := make([]core.Request, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	var reqs []core.Request
	reqs = append(reqs, rep(5, share(4, 500))...)
	reqs = append(reqs, rep(3, whole(8, 1))...)
	// The same as whole(8, 1) but for memory, which is not part of a type.
	big := whole(8, 1)
	big.MemMiB = 1 << 20
	reqs = append(reqs, big)
	// Two types of one pod each: the tie is ordered by larger CPU first.
	reqs = append(reqs, core.Request{CPUMilli: 2000}, core.Request{CPUMilli: 3000, MilliPerGPU: 700, Models: []string{"T4"}})
	reqs = append(reqs, core.Request{GPUs: 1, MilliPerGPU: 1000, CPUMilli: 1000, Models: []string{"T4", "A10"}})

	all := []PodType{
		{CPUMilli: 4000, GPUs: 1, MilliPerGPU: 500, Count: 5},
		{CPUMilli: 8000, GPUs: 1, MilliPerGPU: 1000, Count: 4},
		{CPUMilli: 3000, Count: 1},
		{CPUMilli: 2000, Count: 1},
		{CPUMilli: 1000, GPUs: 1, MilliPerGPU: 1000, Models: []string{"T4", "A10"}, Count: 1},
	}
	// 12 requests: counts 5, 4, 1, 1, 1. A cut keeps types until 100 ×
	// their count reaches popularity × 12.
	tests := []struct {
		popularity int
		want       []PodType
	}{
		{100, all},
		{41, all[:1]}, // 500 >= 492
		{42, all[:2]}, // 500 < 504
		{75, all[:2]}, // 900 >= 900
		{76, all[:3]}, // 900 < 912
		{95, all},     // 1100 < 1140
		{0, all},      // the default, 95
	}
	for _, tt := range tests {
		got := TypicalWorkload(reqs, tt.popularity)
		if diff := cmp.Diff(tt.want, got.Types); diff != "" {
			t.Errorf("popularity %d (-want +got):\n%s", tt.popularity, diff)
		}
	}
	if got := TypicalWorkload(nil, 95); len(got.Types) != 0 || got.Total() != 0 {
		t.Errorf("empty trace: %+v", got)
	}
}
