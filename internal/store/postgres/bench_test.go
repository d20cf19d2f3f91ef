package postgres

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// BenchmarkStore: go test -run '^$' -bench . ./internal/store/postgres
func BenchmarkStore(b *testing.B) {
	storetest.Benchmarks(b, func(b *testing.B) store.Store {
		s, err := Open(b.Context(), testDSN(b), Options{Schema: newSchema(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
