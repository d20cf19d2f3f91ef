package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// BenchmarkStore: go test -run '^$' -bench . ./internal/store/sqlite
func BenchmarkStore(b *testing.B) {
	storetest.Benchmarks(b, func(b *testing.B) store.Store {
		s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
