package storetest

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
)

// Benchmarks measures a backend: the stores come from open, one per
// sub-benchmark. It reports submissions per second beside ns/op.
func Benchmarks(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("Submit", func(b *testing.B) { benchSubmit(b, open(b), false, false) })
	b.Run("SubmitParallel", func(b *testing.B) { benchSubmit(b, open(b), true, false) })
	b.Run("SubmitRepeat", func(b *testing.B) { benchSubmit(b, open(b), false, true) })
	b.Run("SubmitRepeatParallel", func(b *testing.B) { benchSubmit(b, open(b), true, true) })
}

// benchSubmit submits jobs with idempotency keys: new ones, or (repeat)
// the same ones again, which must return the stored job.
func benchSubmit(b *testing.B, s store.Store, parallel, repeat bool) {
	c := b.Context()
	if err := s.Teams().CreateTeam(c, team("bench")); err != nil {
		b.Fatal(err)
	}
	const distinct = 1000
	if repeat {
		for i := range distinct {
			if _, _, err := s.Jobs().SubmitJob(c, job(fmt.Sprintf("r%d", i), "bench"), fmt.Sprintf("key-%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var n atomic.Int64
	one := func() error {
		i := n.Add(1)
		id, key := fmt.Sprintf("j%d", i), fmt.Sprintf("key-%d", i)
		if repeat {
			key = fmt.Sprintf("key-%d", i%distinct)
		}
		_, created, err := s.Jobs().SubmitJob(c, job(id, "bench"), key)
		if err == nil && created == repeat {
			err = fmt.Errorf("submit %s with key %s: created %v", id, key, created)
		}
		return err
	}
	b.ResetTimer()
	if parallel {
		// Eight goroutines per CPU: an API server has many requests in
		// flight, which PostgreSQL can commit together.
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := one(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if err := one(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}
