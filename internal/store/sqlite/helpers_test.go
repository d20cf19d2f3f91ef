package sqlite

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func teamFor(id string) core.Team { return core.Team{ID: id, Name: id, Weight: 1} }

func jobFor(w, i int) core.Job {
	return core.Job{ID: fmt.Sprintf("w%d-%d", w, i), Team: "ml", Tier: core.TierRegular,
		Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}
