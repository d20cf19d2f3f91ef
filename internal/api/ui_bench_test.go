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
// pending (jobs of 100 shards) on SQLite: the request's cost must not
// follow the queue.
//
//	go test -run '^$' -bench OverviewQueue -benchtime 10x -benchmem ./internal/api
func BenchmarkOverviewQueue(b *testing.B) {
	benchOverviewQueue(b, func(b *testing.B) store.Store {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "q.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return st
	})
}

// BenchmarkOverviewQueuePostgres is BenchmarkOverviewQueue on PostgreSQL.
func BenchmarkOverviewQueuePostgres(b *testing.B) {
	benchOverviewQueue(b, func(b *testing.B) store.Store { return pgStore(b) })
}

func benchOverviewQueue(b *testing.B, open func(*testing.B) store.Store) {
	for _, units := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", units), func(b *testing.B) {
			st := open(b)
			b.Cleanup(func() { st.Close() })
			fillQueue(b, st, units)
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

// fillQueue writes uiStore's teams, leases, units and samples to st, and
// units pending units of team a in jobs of 100 shards.
func fillQueue(b *testing.B, st store.Store, units int) {
	b.Helper()
	fillUIStore(b, st)
	for i := 0; i < units/100; i++ {
		j := core.Job{ID: fmt.Sprintf("q%d", i), Team: "a", Tier: core.TierRegular, Shards: 100,
			Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: uiNow.Add(-time.Hour)}
		if _, _, err := st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
			b.Fatal(err)
		}
	}
}
