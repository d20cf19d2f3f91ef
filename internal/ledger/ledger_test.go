package ledger

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// A team whose rounded share of a range is -1 µ has spent nothing: the
// loop state that carries the spend (store.ValidateLoop) refuses a
// negative amount, so one such line would fail every save.
func TestSpentNeverNegative(t *testing.T) {
	u := billing.UsageTotals{Lines: []billing.UsageLine{
		{Team: "ml", Cost: -1},
		{Team: "vision", Cost: 2_500_000},
	}}
	got := Spent(u)
	if got["ml"] != 0 || got["vision"] != 2_500_000 {
		t.Fatalf("Spent = %v, want ml 0 and vision 2.5", got)
	}
	s := store.LoopState{Spent: got}
	if err := store.ValidateLoop(&s); err != nil {
		t.Fatalf("ValidateLoop(spent %v): %v", got, err)
	}
	var neg = map[string]core.Micros{"ml": -1}
	if err := store.ValidateLoop(&store.LoopState{Spent: neg}); err == nil {
		t.Fatal("ValidateLoop took a negative spend")
	}
}
