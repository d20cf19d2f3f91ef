package api

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// BenchmarkOverviewQueue builds the overview of uiStore's fleet (three
// leases, one unit running) with 1,000, 10,000 and 100,000 more units
// pending (jobs of 100 shards): the request's cost must not follow the
// queue.
//
//	go test -run '^$' -bench OverviewQueue -benchtime 20x ./internal/api
func BenchmarkOverviewQueue(b *testing.B) {
	for _, units := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", units), func(b *testing.B) {
			st := queueStore(b, units)
			b.ResetTimer()
			for b.Loop() {
				ov, err := BuildOverview(context.Background(), st, uiCatalog(), uiNow, "")
				if err != nil {
					b.Fatal(err)
				}
				if got := ov.QueueByTier["regular"]; got != units {
					b.Fatalf("regular queue %d, want %d", got, units)
				}
			}
		})
	}
}

// queueStore is a SQLite store with uiStore's teams, leases, units and
// samples, plus units pending units of team a in jobs of 100 shards.
func queueStore(b *testing.B, units int) store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "q.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	fillUIStore(b, st)
	for i := 0; i < units/100; i++ {
		j := core.Job{ID: fmt.Sprintf("q%d", i), Team: "a", Tier: core.TierRegular, Shards: 100,
			Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: uiNow.Add(-time.Hour)}
		if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
			b.Fatal(err)
		}
	}
	return st
}
