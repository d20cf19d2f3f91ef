package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestBudgetsSeeTheLedger: the loop's team budgets see the ledger's
// month-to-date spend (SQLite).
func TestBudgetsSeeTheLedger(t *testing.T) { budgetsSeeTheLedger(t, newWorld(t)) }

// TestPostgresBudgetsSeeTheLedger is TestBudgetsSeeTheLedger on
// PostgreSQL.
func TestPostgresBudgetsSeeTheLedger(t *testing.T) {
	budgetsSeeTheLedger(t, newWorldOn(t, pgOpener(t)))
}

// budgetsSeeTheLedger: team a, with a budget of 10, runs a job with no
// estimate (it runs until cancelled, at 2 an hour). Past 80% of the
// budget it gets the "budget" event; past the cap a new job of a waits,
// with the budget as its reason, and rents no machine, while team b
// (no budget) still gets one. The spend the loop used equals, to the
// micro-unit, the dashboard overview's budget spend and the usage
// report's team line.
func budgetsSeeTheLedger(t *testing.T, w *world) {
	ctx := context.Background()
	budget := 10 * core.MicrosPerUnit
	if err := w.st.Teams().UpdateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1, MonthlyBudget: budget}); err != nil {
		t.Fatal(err)
	}
	if err := w.st.Teams().CreateTeam(ctx, core.Team{ID: "b", Name: "b", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	submit := func(id, team string, est time.Duration) {
		t.Helper()
		j := core.Job{ID: id, Team: team, Tier: core.TierCore, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, EstDuration: est, Submit: w.clk.Now()}
		if _, _, err := w.st.Jobs().SubmitJob(ctx, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	spent := func() core.Micros {
		t.Helper()
		ls, err := w.st.Loop().LoadLoop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ls.Spent["a"]
	}

	// Under 80%: no alert, yet the loop sees the spend.
	submit("a1", "a", 0)
	w.run(4 * time.Hour)
	if j := w.job("a1"); j.State != core.JobRunning {
		t.Fatalf("a1 %s after 4h", j.State)
	}
	if s := spent(); s < 7*core.MicrosPerUnit || s >= budget*8/10 {
		t.Fatalf("after 4h the loop saw team a spend %s, want in [7, 8) (2 an hour)", s)
	}
	if ev := w.events("budget"); len(ev) != 0 {
		t.Fatalf("budget alert under 80%%: %+v", ev)
	}

	// Past 80%: the alert, once.
	w.run(30 * time.Minute)
	ev := w.events("budget")
	if len(ev) != 1 || !strings.Contains(ev[0].Reason, "team a has spent") || !strings.Contains(ev[0].Reason, "of its 10.00 budget (80.") {
		t.Fatalf("after 4h30: budget events %+v, want one for team a at 80%%", ev)
	}
	if s := spent(); s < budget*8/10 {
		t.Fatalf("alerted at spend %s", s)
	}

	// Past the cap: a's new job rents nothing and waits on the budget;
	// b's new job gets a machine.
	w.run(time.Hour + 30*time.Minute)
	if s := spent(); s < budget {
		t.Fatalf("after 6h the loop saw team a spend %s, want past its cap %s", s, budget)
	}
	before := len(w.leases())
	submit("a2", "a", 30*time.Minute)
	submit("b1", "b", 30*time.Minute)
	w.run(10 * time.Minute)
	if j := w.job("a2"); j.State != core.JobPending {
		t.Errorf("a2 over team a's cap: %s, want pending", j.State)
	}
	if j := w.job("b1"); j.State != core.JobRunning {
		t.Errorf("b1 of team b (no budget): %s, want running", j.State)
	}
	ls := w.leases()
	if len(ls) != before+1 {
		t.Fatalf("%d leases after a2 and b1, want %d: one new, for b1", len(ls), before+1)
	}
	for _, l := range ls {
		for _, f := range l.For {
			if f == "a2" {
				t.Errorf("lease %s rented for a2 over team a's cap", l.ID)
			}
		}
	}
	if len(w.events("budget")) != 1 {
		t.Errorf("budget alert repeated: %+v", w.events("budget"))
	}
	// Why a2 waits: the step on the state as the loop left it (with the
	// spend it saved) names the budget.
	var st *engine.State
	if err := w.st.Tx(ctx, func(tx store.Tx) error {
		var err error
		st, _, err = loadEngineState(ctx, tx, w.loop.offer)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st.Offers = w.loop.cfg.RentOffers
	d := engine.Step(st, w.clk.Now(), w.loop.cfg.Engine)
	why := ""
	for _, wt := range d.Waiting {
		if wt.Unit.Job.ID == "a2" {
			why = wt.Reason
		}
	}
	if !strings.Contains(why, "team a has spent") || !strings.Contains(why, "monthly budget") {
		t.Errorf("a2 waits for %q, want team a's budget", why)
	}
	for _, a := range d.Acquire {
		t.Errorf("a step over the cap rents %s for %v", a.Offer.ID, a.For)
	}

	// The spend the loop used is the dashboard's and the usage report's,
	// to the micro-unit: a tick that reads the ledger, then the API at
	// the same instant.
	w.clk.Advance(ledger.RefreshEvery)
	if err := w.loop.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.loop.ledger.refresh.At().Equal(w.clk.Now()) {
		t.Fatalf("the tick at %s did not read the ledger (last read %s)", w.clk.Now(), w.loop.ledger.refresh.At())
	}
	used, err := w.st.Loop().LoadLoop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := api.EnsureAdminToken(ctx, w.st, w.clk)
	if err != nil {
		t.Fatal(err)
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: hourly()}
	ts := httptest.NewServer(api.New(cat, w.clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(w.st)))
	defer ts.Close()
	get := func(path string, out any) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	var ov readmodel.Overview
	get("/api/v1/overview", &ov)
	var rep api.UsageReportView
	get("/api/v1/reports/usage", &rep)
	if !rep.From.Equal(ov.MonthStart) || !ov.AsOf.Equal(w.clk.Now()) {
		t.Fatalf("report from %s, overview month %s as of %s, now %s", rep.From, ov.MonthStart, ov.AsOf, w.clk.Now())
	}
	for _, team := range []string{"a", "b"} {
		var dash, report json.Number = "missing", "missing"
		for _, b := range ov.Budgets {
			if b.Team == team {
				dash = b.Spent
			}
		}
		for _, l := range rep.Teams {
			if l.Team == team {
				report = l.Cost
			}
		}
		loop := readmodel.Amount(used.Spent[team])
		if loop != dash || loop != report || used.Spent[team] <= 0 {
			t.Errorf("team %s: the loop's budgets saw %s, the dashboard %s, the usage report %s", team, loop, dash, report)
		}
	}
	for _, b := range ov.Budgets {
		if b.Team == "a" && (!b.Alert || !b.Exhausted) {
			t.Errorf("dashboard budget of a: %+v, want alert and exhausted", b)
		}
	}
}

// TestSpentReadOncePerMinute: the loop reads the ledger on its first
// tick, then again only once ledger.RefreshEvery has passed or the launched
// leases changed, and on the first tick of a month, whose spend starts
// from nothing.
func TestSpentReadOncePerMinute(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.submit("j1", core.TierCore, 0) // runs until cancelled
	w.run(10 * time.Minute)
	if w.job("j1").State != core.JobRunning {
		t.Fatalf("j1 %s", w.job("j1").State)
	}
	tick := func() {
		t.Helper()
		if err := w.loop.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.clk.Advance(ledger.RefreshEvery)
	tick()
	read := w.loop.ledger.refresh.At()
	if !read.Equal(w.clk.Now()) {
		t.Fatalf("no read after %s: last %s, now %s", ledger.RefreshEvery, read, w.clk.Now())
	}
	was := w.loop.ledger.spent["a"]
	for range int(ledger.RefreshEvery/DefaultTick) - 1 {
		w.clk.Advance(DefaultTick)
		tick()
		if !w.loop.ledger.refresh.At().Equal(read) {
			t.Fatalf("read again at %s, %s after the last, with no lease changed", w.clk.Now(), w.clk.Now().Sub(read))
		}
	}
	w.clk.Advance(DefaultTick)
	tick()
	if !w.loop.ledger.refresh.At().Equal(w.clk.Now()) || w.loop.ledger.spent["a"] <= was {
		t.Fatalf("at %s after the last read: read %s, spend %s then %s", w.clk.Now().Sub(read), w.loop.ledger.refresh.At(), was, w.loop.ledger.spent["a"])
	}
	// A launch is read at the next tick, whatever the time since the
	// last read.
	read = w.loop.ledger.refresh.At()
	w.submit("j2", core.TierCore, 0)
	for n := len(w.leases()); ; {
		w.clk.Advance(DefaultTick)
		tick()
		if w.clk.Now().Sub(read) >= ledger.RefreshEvery {
			t.Fatalf("no lease launched for j2 within %s", ledger.RefreshEvery)
		}
		if ls := w.leases(); len(ls) > n && !ls[len(ls)-1].Start.IsZero() {
			break
		}
	}
	if !w.loop.ledger.refresh.At().Equal(read) {
		t.Fatalf("read at %s, before the new lease was loaded", w.loop.ledger.refresh.At())
	}
	w.clk.Advance(DefaultTick)
	tick()
	if !w.loop.ledger.refresh.At().Equal(w.clk.Now()) {
		t.Fatalf("the tick after a launch, %s after the last read, did not read", w.clk.Now().Sub(read))
	}

	// A new month: the month's spend restarts, read on its first tick.
	april := time.Date(2026, 4, 1, 0, 0, 30, 0, time.UTC)
	w.clk.Advance(april.Sub(w.clk.Now()))
	tick()
	ls, err := w.st.Loop().LoadLoop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 30 s of j1's GPU at 2 an hour, rounded half to even (j2's machine
	// became ready in the jump: j2 starts at this tick, and its idle
	// machine is nobody's spend).
	if got, want := ls.Spent["a"], core.Micros(core.MulDivHalfEven(int64(2*core.MicrosPerUnit), 30, 3600)); got != want {
		t.Errorf("April's first tick: team a spent %s, want %s", got, want)
	}
}

// TestSpentKeptWhenLedgerFails: a ledger that cannot be read (a lease of
// an offer the catalog lacks) fails no tick; the budgets keep the last
// spend read.
func TestSpentKeptWhenLedgerFails(t *testing.T) {
	w := newWorld(t)
	w.submit("j1", core.TierCore, 0)
	w.run(30 * time.Minute)
	was := w.loop.ledger.spent["a"]
	if was <= 0 {
		t.Fatalf("spend %s after 30 min", was)
	}
	w.loop.ledger.cat = &pricing.Catalog{Currency: "USD"} // knows no offer
	w.run(2 * ledger.RefreshEvery)
	ls, err := w.st.Loop().LoadLoop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ls.Spent["a"] != was || w.loop.ledger.spent["a"] != was {
		t.Errorf("after failed reads the budgets saw %s (cached %s), want the last read %s", ls.Spent["a"], w.loop.ledger.spent["a"], was)
	}
	if w.job("j1").State != core.JobRunning {
		t.Errorf("j1 %s", w.job("j1").State)
	}
}
