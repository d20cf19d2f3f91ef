package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// TestBudgetCapStopsRenting: in the simulator as in the server, a team's
// monthly budget acts on the ledger's month-to-date spend
// (ledger.Book, by ledger.Refresh): the team is warned at 80%, and once
// its spend reaches the cap nothing more of its work is placed or rented
// for until the next month (warned again there once past 80%), while a team without a budget runs as it
// would. Without budgets the same workload runs all of it in its month.
func TestBudgetCapStopsRenting(t *testing.T) {
	w := burstyWorkload(3)
	next := time.Date(t0.Year(), t0.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	run := func(budget core.Micros) (starts map[string][]time.Time, alerts []core.Event, res *Result) {
		cfg := testConfig(w)
		cfg.Teams = []core.Team{{ID: "team0", Weight: 1, MonthlyBudget: budget}, {ID: "team1", Weight: 1}, {ID: "team2", Weight: 1}}
		starts = map[string][]time.Time{}
		cfg.Units = func(u engine.Unit) { starts[u.Job.Team] = append(starts[u.Job.Team], u.Start) }
		cfg.Transcript = func(e core.Event) {
			if e.Kind == "budget" {
				alerts = append(alerts, e)
			}
		}
		p, _ := policy.Preset("gpufleet")
		res, err := Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		return starts, alerts, res
	}
	after := func(ts []time.Time) (n int) {
		for _, s := range ts {
			if !s.Before(next) {
				n++
			}
		}
		return n
	}
	free, none, base := run(0)
	if len(none) != 0 || after(free["team0"]) != 0 {
		t.Fatalf("without a budget: alerts %v, %d of team0's units start next month", none, after(free["team0"]))
	}
	capped, alerts, res := run(200 * core.MicrosPerUnit)
	// One warning a month: this month's, and the next month's once the
	// held work spends past 80% there too.
	var thisMonth, nextMonth int
	for _, a := range alerts {
		if !strings.HasPrefix(a.Reason, "team team0 has spent ") {
			t.Errorf("budget alert %q, want team0's", a.Reason)
		}
		if a.At.Before(next) {
			thisMonth++
		} else {
			nextMonth++
		}
	}
	if thisMonth != 1 || nextMonth > 1 {
		t.Fatalf("budget alerts %v: %d this month and %d the next, want one and at most one", alerts, thisMonth, nextMonth)
	}
	held := after(capped["team0"])
	t.Logf("team0 (budget 200): alert at %s; %d of %d units held to %s by the cap; bill %s (without the budget %s)",
		alerts[0].At.Format(time.RFC3339), held, len(capped["team0"]), next.Format("2006-01-02"), res.Cost, base.Cost)
	if held == 0 {
		t.Errorf("the cap held none of team0's work to the next month")
	}
	for _, team := range []string{"team1", "team2"} {
		if n := after(capped[team]); n != 0 {
			t.Errorf("%s, without a budget, has %d units starting next month", team, n)
		}
	}
	if res.Unfinished != 0 {
		t.Errorf("%d units unfinished: the held work should run once the month's spend starts again", res.Unfinished)
	}
}
