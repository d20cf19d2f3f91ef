package plan

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestDemandFromJobs(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	jobs := []core.Job{
		{ID: "a", Tier: core.TierRegular, Submit: t0, EstDuration: 2 * time.Hour, Request: core.Request{GPUs: 2, MilliPerGPU: 1000}},
		{ID: "b", Tier: core.TierOffline, Submit: t0.Add(30 * time.Minute), EstDuration: time.Hour, Interruptible: true, Request: core.Request{GPUs: 4, MilliPerGPU: 1000}},
		{ID: "c", Tier: core.TierCore, Submit: t0, EstDuration: time.Hour, Request: core.Request{GPUs: 1, MilliPerGPU: 1000, Models: []string{"V100"}}},
	}
	s, err := DemandFromJobs(jobs, "A100")
	if err != nil {
		t.Fatal(err)
	}
	if s.Hours != 3 || len(s.Classes) != 2 || s.Classes[0].GPUModel != "A100" {
		t.Fatalf("series %+v", s)
	}
	a := s.Classes[0]
	// Hour 0: 2 GPUs + half an hour of 4 → 4, of which b's 2 are
	// interruptible and (offline) deferrable; hour 1: the same; hour 2:
	// nothing. The parts are capped so they never exceed the whole.
	want, wantPart := []int64{4, 4, 0}, []int64{2, 2, 0}
	for h := range want {
		if a.GPUs[h] != want[h] || a.Interruptible[h] != wantPart[h] || a.Deferrable[h] != wantPart[h] {
			t.Errorf("hour %d: %d GPUs (%d interruptible, %d deferrable), want %d (%d, %d)", h, a.GPUs[h], a.Interruptible[h], a.Deferrable[h], want[h], wantPart[h], wantPart[h])
		}
	}
	if _, err := DemandFromJobs(jobs, ""); err == nil {
		t.Error("jobs without a model and no default accepted")
	}
}
