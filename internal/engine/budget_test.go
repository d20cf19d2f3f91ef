package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The 80% budget warning fires once a month per team: not again within
// the month, again in the next, where the last month's warning is
// cleared; a state kept from before the month was in the key (team id
// alone) is cleared, not taken for this month's.
func TestBudgetAlertOncePerMonth(t *testing.T) {
	st := readyFleet(1)
	st.Teams = []core.Team{{ID: "a", Weight: 1, MonthlyBudget: 100 * core.MicrosPerUnit}, {ID: "b", Weight: 1, MonthlyBudget: 100 * core.MicrosPerUnit}}
	st.Spent = map[string]core.Micros{"a": 90 * core.MicrosPerUnit, "b": 10 * core.MicrosPerUnit}
	st.BudgetAlerted = map[string]bool{"b": true} // kept by an older version
	cfg := Config{NoAcquire: true, NoRelease: true}
	step := func(at time.Time) string {
		d := historyStep(st, at, cfg)
		var out []string
		for _, a := range d.Alerts {
			if a.Kind == "budget" {
				out = append(out, "alert "+a.Team)
			}
		}
		for _, c := range d.Cleared {
			out = append(out, "cleared "+c.Kind+" "+c.Team)
		}
		return fmt.Sprint(out)
	}
	march := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	if got, want := step(march), "[alert a cleared budget b]"; got != want {
		t.Errorf("first step in March: %s, want %s", got, want)
	}
	if got := step(march.Add(time.Hour)); got != "[]" {
		t.Errorf("later in March: %s, want nothing", got)
	}
	if got, want := step(time.Date(2026, 4, 1, 0, 0, 1, 0, time.UTC)), "[alert a cleared budget a]"; got != want {
		t.Errorf("first step in April (a still past 80%%): %s, want %s", got, want)
	}
	if len(st.BudgetAlerted) != 1 || !st.BudgetAlerted["a@2026-04"] {
		t.Errorf("budget warnings kept: %v, want April's of a alone", st.BudgetAlerted)
	}
}
