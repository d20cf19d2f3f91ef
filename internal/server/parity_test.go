package server

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// The live-parity tests run the loop as serve configures it from a
// policy and a catalog (Config from policy.Policy: RentOffers, TimeOfUse,
// Engine), on a manual clock and the sim cloud, through the store.

// newPolicyWorld is a world whose loop runs pol over offers, as serve
// wires them.
func newPolicyWorld(t *testing.T, offers []core.Offer, pol policy.Policy) *world {
	t.Helper()
	clk := clock.NewManual(t0)
	cloud, err := sim.New(sim.Config{Offers: offers, Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(2 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	ecfg, err := pol.Engine(pol.Offers(offers), t0)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, path: filepath.Join(t.TempDir(), "loop.db"), cloud: cloud, clk: clk}
	w.opener = func() (store.Store, error) { return sqlite.Open(context.Background(), w.path, sqlite.Options{}) }
	w.configure = func(c *Config) {
		c.Offers, c.RentOffers, c.TimeOfUse, c.Engine = offers, pol.Offers(offers), pol.Tariff(offers), ecfg
	}
	w.open()
	t.Cleanup(func() { w.st.Close() })
	if err := w.st.Teams().CreateTeam(context.Background(), core.Team{ID: "a", Name: "a", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	return w
}

func preset(t *testing.T, name string) policy.Policy {
	t.Helper()
	p, err := policy.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLiveTimeOfUseFromCatalog: the catalog's own time-of-use window
// (0.3x from 11:00, two hours after the job arrives at 09:00) reaches
// the loop through the policy (serve's TimeOfUse: pol.Tariff), and a
// deferrable offline job is not rented for at once but in the window;
// under a policy that does not shift, the same job is rented for at
// once.
func TestLiveTimeOfUseFromCatalog(t *testing.T) {
	all := []time.Weekday{time.Sunday, time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday}
	tou := &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: all, StartHour: 11, EndHour: 17, MultiplierBP: 3000}}}
	offers := hourly()
	offers[0].Plans[0].TimeOfUse = tou
	window := time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC)

	shift := preset(t, "gpufleet")
	if shift.Tariff(offers) != tou {
		t.Fatalf("policy %s takes no tariff from the catalog", shift.Name)
	}
	w := newPolicyWorld(t, offers, shift)
	j := core.Job{ID: "night", Team: "a", Tier: core.TierOffline, Deferrable: true, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, EstDuration: 2 * time.Hour, Submit: w.clk.Now()}
	if _, _, err := w.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
		t.Fatal(err)
	}
	w.run(window.Add(-5 * time.Minute).Sub(w.clk.Now()))
	if ls := w.leases(); len(ls) != 0 {
		t.Fatalf("before the window: leases %+v, want none (the job waits for 0.3x)", ls)
	}
	if len(w.events("defer")) == 0 {
		t.Fatal("no defer event before the window")
	}
	w.run(30 * time.Minute)
	ls := w.leases()
	if len(ls) != 1 {
		t.Fatalf("by 11:25: leases %+v, want one, rented in the window", ls)
	}
	// Rented at the window (less the provisioning lead), so that it runs
	// in it.
	if r := ls[0].Requested; r.Before(window.Add(-10*time.Minute)) || r.After(window.Add(5*time.Minute)) {
		t.Errorf("lease requested at %s, want about the window's start %s", r.Format("15:04:05"), window.Format("15:04"))
	}
	if s := w.job("night").State; s != core.JobRunning {
		t.Errorf("night %s at 11:25, want running in the window", s)
	}

	// The same job under a policy that does not shift: rented at once.
	now := preset(t, "reactive")
	if now.Tariff(offers) != nil {
		t.Fatalf("policy %s shifts", now.Name)
	}
	w2 := newPolicyWorld(t, offers, now)
	j.Submit = w2.clk.Now()
	if _, _, err := w2.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
		t.Fatal(err)
	}
	w2.run(time.Hour + 5*time.Minute) // the reactive preset's offline wait target is within this
	if ls := w2.leases(); len(ls) != 1 || !ls[0].Requested.Before(window.Add(-50*time.Minute)) {
		t.Errorf("without shifting: leases %+v, want one rented well before the window", ls)
	}
}

// TestLiveReservedBaseKept: the reserved base of a policy file
// (reserved.gpus, as plan portfolio --policy-out writes it) is rented on
// its committed term by the loop with no work at all, kept live while
// it idles for days (no idle release), not rented again after a restart,
// and runs work that arrives without anything more being rented.
func TestLiveReservedBaseKept(t *testing.T) {
	offers := hourly()
	offers[0].Plans = append(offers[0].Plans, core.PricePlan{Mode: core.Monthly, Price: 700_000_000, Per: core.Month, Granularity: core.Month.Seconds(), Term: core.Month.Seconds()})
	pol, err := policy.Parse("base.yaml", []byte("name: base\nreserved:\n  mode: monthly\n  gpus:\n    A100: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := newPolicyWorld(t, offers, pol)
	base := func(when string) []store.Lease {
		t.Helper()
		var live []store.Lease
		for _, l := range w.leases() {
			if l.State.Final() {
				t.Errorf("%s: lease %s %s (%s): the base is never released", when, l.ID, l.State, l.Mode)
				continue
			}
			if l.Mode != core.Monthly {
				t.Errorf("%s: lease %s on %s, want only the monthly base", when, l.ID, l.Mode)
			}
			live = append(live, l)
		}
		if len(live) != 2 {
			t.Fatalf("%s: %d live leases %+v, want the base's 2", when, len(live), live)
		}
		return live
	}
	w.run(10 * time.Minute)
	first := base("10 min in, no work")
	for _, l := range first {
		if l.State != core.LeaseReady {
			t.Errorf("lease %s %s after 10 min, want ready", l.ID, l.State)
		}
	}
	w.runEvery(3*24*time.Hour, time.Minute)
	base("3 idle days later")
	w.restart()
	w.run(10 * time.Minute)
	after := base("after a restart")
	for i := range after {
		if after[i].ID != first[i].ID {
			t.Errorf("after a restart the base is %s, was %s", after[i].ID, first[i].ID)
		}
	}
	w.submit("j1", core.TierCore, 30*time.Minute)
	w.run(time.Minute)
	if s := w.job("j1").State; s != core.JobRunning {
		t.Errorf("j1 %s a minute after it came, want running on the base", s)
	}
	base("with j1 running")
	if n := len(w.held()); n != 2 {
		t.Errorf("the provider holds %d machines, want the base's 2", n)
	}
}

// TestDemandHistorySurvivesRestart: the demand history committed terms
// are priced on (engine.State.Demand) is saved with the loop state, and
// a new loop on the same store carries on from it: after a restart the
// history holds the hours before it, not only the ticks since.
func TestDemandHistorySurvivesRestart(t *testing.T) {
	w := newWorld(t)
	w.submit("j1", core.TierCore, 30*time.Minute)
	w.run(2 * time.Hour)
	before := w.loop.demand
	if len(before) != 2 || before[0].Milli != int64(core.WholeGPU) || before[1].Milli != 0 {
		t.Fatalf("demand after 2 h: %+v, want j1's GPU, then nothing", before)
	}
	ls, err := w.st.Loop().LoadLoop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Demand) != len(before) || !ls.Demand[0].At.Equal(before[0].At) {
		t.Fatalf("stored demand %+v, want the loop's %+v", ls.Demand, before)
	}
	w.restart()
	w.run(DefaultTick)
	after := w.loop.demand
	if len(after) < len(before) || !after[0].At.Equal(before[0].At) || after[0].At.After(t0) {
		t.Fatalf("demand after a restart starts at %v (%d points), want the first tick's %v (%d points before)", after[0].At, len(after), before[0].At, len(before))
	}
	for i := range before {
		if after[i] != before[i] {
			t.Errorf("point %d after a restart %+v, was %+v", i, after[i], before[i])
		}
	}
	w.submit("j2", core.TierCore, time.Hour)
	w.run(10 * time.Minute)
	if d := w.loop.demand; len(d) != 3 || d[2].Milli != int64(core.WholeGPU) || !d[0].At.Equal(before[0].At) {
		t.Errorf("demand with j2 after the restart: %+v, want the history before it and j2's GPU", d)
	}
}

// TestBudgetAlertOnceAcrossRestart: the 80% budget alert fires once,
// and a restart neither repeats it nor forgets the cap: team a's new job
// still rents nothing past it.
func TestBudgetAlertOnceAcrossRestart(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if err := w.st.Teams().UpdateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1, MonthlyBudget: 2 * core.MicrosPerUnit}); err != nil {
		t.Fatal(err)
	}
	w.submit("a1", core.TierCore, 0) // runs until cancelled, at 2 an hour
	w.run(55 * time.Minute)
	if n := len(w.events("budget")); n != 1 {
		t.Fatalf("%d budget alerts past 80%% of the budget, want 1", n)
	}
	w.restart()
	w.run(30 * time.Minute)
	if n := len(w.events("budget")); n != 1 {
		t.Errorf("%d budget alerts after a restart, want still 1", n)
	}
	open, err := w.st.Alerts().ListAlerts(ctx, store.AlertFilter{Kind: "budget", OpenOnly: true})
	if err != nil || len(open.Items) != 1 || open.Items[0].Team != "a" || !strings.Contains(open.Items[0].Reason, "budget") {
		t.Errorf("open budget alerts in the store: %+v, %v; want team a's", open.Items, err)
	}
	leases := len(w.leases())
	w.submit("a2", core.TierCore, 10*time.Minute)
	w.run(10 * time.Minute)
	if s := w.job("a2").State; s != core.JobPending {
		t.Errorf("a2 %s past team a's cap after a restart, want pending", s)
	}
	if n := len(w.leases()); n != leases {
		t.Errorf("%d leases, were %d: rented past the cap", n, leases)
	}
}
