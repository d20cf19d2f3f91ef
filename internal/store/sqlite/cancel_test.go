package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

// TestCancelledTxLeavesNoTransaction: a transaction whose context ends at
// any moment — before, during or after BEGIN, a statement or COMMIT —
// leaves the writer connection out of any transaction, so the next one
// starts (an HTTP client that gives up must not stop the control loop).
func TestCancelledTxLeavesNoTransaction(t *testing.T) {
	st, err := Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3000 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%200)*time.Microsecond)
		_ = st.Tx(ctx, func(tx store.Tx) error {
			_, err := tx.Teams().ListTeams(ctx)
			return err
		})
		cancel()
		if err := st.Tx(context.Background(), func(tx store.Tx) error {
			_, err := tx.Teams().ListTeams(context.Background())
			return err
		}); err != nil {
			t.Fatalf("transaction %d after a cancelled one: %v", i, err)
		}
	}
}
