package api

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/readmodel/readmodeltest"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// BenchmarkOverviewQueue builds the overview of readmodeltest.Store's fleet (three
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
				ov, err := readmodel.BuildOverview(context.Background(), st, readmodeltest.Catalog(), readmodeltest.Now, "", policy.Default().Idle)
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

// fillQueue writes readmodeltest.Store's teams, leases, units and samples to st, and
// units pending units of team a in jobs of 100 shards.
func fillQueue(b *testing.B, st store.Store, units int) {
	b.Helper()
	readmodeltest.Fill(b, st)
	t, err := st.Teams().GetTeam(context.Background(), "a")
	if err != nil {
		b.Fatal(err)
	}
	t.UnitLimit = core.MaxUnitLimit // the queue is larger than the default limit
	if err := st.Teams().UpdateTeam(context.Background(), t); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < units/100; i++ {
		j := core.Job{ID: fmt.Sprintf("q%d", i), Team: "a", Tier: core.TierRegular, Shards: 100,
			Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: readmodeltest.Now.Add(-time.Hour)}
		if _, _, err := st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOverviewHistory builds the overview of readmodeltest.Store's fleet with
// 1,000 and 5,000 leases released last month: this month's figures read
// the leases held this month, selected by the store, not the history.
//
//	go test -run '^$' -bench OverviewHistory -benchtime 10x -benchmem ./internal/api
func BenchmarkOverviewHistory(b *testing.B) {
	for _, n := range []int{1_000, 5_000} {
		b.Run(fmt.Sprintf("released=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "h.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			readmodeltest.Fill(b, st)
			start := readmodeltest.Now.AddDate(0, -1, 0)
			for i := range n {
				id := fmt.Sprintf("old%d", i)
				err := st.Tx(ctx, func(tx store.Tx) error {
					l := store.Lease{Lease: core.Lease{ID: id, OfferID: "t/r/s2", Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: id}, Requested: start}
					if err := tx.Leases().CreateLease(ctx, l); err != nil {
						return err
					}
					l.State, l.ProviderID, l.Start = core.LeaseProvisioning, "p-"+id, start
					if err := tx.Leases().UpdateLease(ctx, l); err != nil {
						return err
					}
					l.State, l.ReadyAt = core.LeaseReady, start
					if err := tx.Leases().UpdateLease(ctx, l); err != nil {
						return err
					}
					l.State, l.End = core.LeaseReleased, start.Add(time.Hour)
					return tx.Leases().UpdateLease(ctx, l)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := readmodel.BuildOverview(ctx, st, readmodeltest.Catalog(), readmodeltest.Now, "", policy.Default().Idle); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
