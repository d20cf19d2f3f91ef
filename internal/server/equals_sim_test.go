package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// The replay TestServerEqualsSimulator runs: a synthetic trace of
// parityJobs jobs (trace.Generate, the generator of "gpufleet trace gen",
// seed parityTraceSeed) under the default policy on the demo catalog,
// the sim provider's fixed provisioning delay that "gpufleet sim" uses
// by default and its seed parityCloudSeed.
const (
	parityJobs      = 2000
	parityTraceSeed = 19
	parityCloudSeed = 1
	parityDelay     = 2 * time.Minute
)

// parityRun is what one side of the comparison decided.
type parityRun struct {
	// Decisions are the engine's decision events in order (Step's
	// Decisions.Events and the reclaim notices).
	Decisions []parityEvent
	Units     map[string]parityUnit
	Leases    map[string]parityLease
	// Bill is the cost of every lease; Ledger (server only) is the
	// ledger's bill over the replay.
	Bill, Ledger core.Micros
	// Spent (server only) is each team's cost in the ledger over the
	// replay.
	Spent map[string]core.Micros
}

type parityEvent struct {
	At                    time.Time
	Kind, Subject, Reason string
}

type parityUnit struct {
	State                   core.JobState
	Start, End              time.Time
	Done                    time.Duration
	Reclaims, Preemptions   int
	NoSpot                  bool
	LostMilliSeconds        int64
	DeferredUntil, LastCkpt time.Time
}

type parityLease struct {
	Offer      string
	Mode       core.BillingMode
	Start, End time.Time
	Reclaimed  bool
	Cost       core.Micros
}

// decisionKind reports whether an event kind is compared: the engine's
// decisions (Step's events, the reclaim notice) and what the provider
// reported of the leases (lease.*, recorded by the loop steps both share,
// internal/loop), as opposed to what only the server records around them
// (unit.*, job.*, agent.*: the executor's reports, which the simulator
// keeps no trail of).
func decisionKind(kind string) bool {
	return !strings.Contains(kind, ".") || strings.HasPrefix(kind, "lease.")
}

// TestServerEqualsSimulator replays one trace of 2,000 jobs through the
// simulator (sim.Run, what "gpufleet sim" runs) and through the live
// server path: jobs submitted through the REST API at their submit
// times, the store (SQLite, PostgreSQL), the loop's Tick on a manual
// clock, the sim provider with the simulator's fixed delay and seed, and
// the virtual-time executor. The loop ticks at the instants the
// simulator stepped at (sim.Config.Stepped): the simulator is
// event-driven, the server ticks every few seconds, and what is compared
// is what each decides at the same instants from the same inputs. Both
// must make the same decisions (every engine event, in order), end every
// unit the same way (state, start and end of its last run, work done,
// reclaims, preemptions, lost work), hold the same leases (offer, mode,
// start, end, reclaimed, cost) and bill the same to the micro-unit: the
// simulator's total against the stored leases' bill and the ledger's.
//
// The teams carry no monthly budget here; TestServerEqualsSimulatorBudgets
// is the same comparison with budgets.
func TestServerEqualsSimulator(t *testing.T) {
	fx := newParityFixture(t)
	want, steps := fx.simulate(t)
	t.Logf("simulator: %d jobs, %d steps, %d decisions, %d leases, bill %s", len(fx.w.Jobs), len(steps), len(want.Decisions), len(want.Leases), money(want.Bill))
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // the two replays share nothing but their inputs
			var open func() (store.Store, error)
			if backend == "postgres" {
				open = pgOpener(t)
			} else {
				path := t.TempDir() + "/parity.db"
				open = func() (store.Store, error) { return sqlite.Open(context.Background(), path, sqlite.Options{}) }
			}
			start := time.Now()
			got := fx.serve(t, open, steps)
			t.Logf("server on %s: %d ticks in %s, %d decisions, %d leases, bill %s, ledger %s", backend, len(steps), time.Since(start).Round(time.Millisecond),
				len(got.Decisions), len(got.Leases), money(got.Bill), money(got.Ledger))
			compareParity(t, want, got)
		})
	}
}

// TestServerEqualsSimulatorBudgets is the same comparison with two
// teams on monthly budgets (SQLite and PostgreSQL): both loops set the
// budgets' spend (State.Spent) with the ledger's month-to-date spend by
// the same refresh rule (ledger.Refresh; the server from its store,
// ledger.MonthToDate, the simulator from its own leases and runs,
// ledger.Book), so the 80% alerts fire at the same step, the caps hold
// back the same work, and the decisions and bills stay equal.
func TestServerEqualsSimulatorBudgets(t *testing.T) {
	fx := newParityFixture(t)
	budgets := map[string]core.Micros{"team-01": 5000 * core.MicrosPerUnit, "team-02": 1000 * core.MicrosPerUnit}
	for i := range fx.teams {
		fx.teams[i].MonthlyBudget = budgets[fx.teams[i].ID]
	}
	want, steps := fx.simulate(t)
	alerts := map[string]time.Time{}
	for _, e := range want.Decisions {
		for team := range budgets {
			if e.Kind == "budget" && strings.HasPrefix(e.Reason, "team "+team+" ") {
				alerts[team] = e.At
			}
		}
	}
	t.Logf("simulator: %d steps to %s, %d decisions, %d leases, bill %s; budget alerts %v", len(steps), steps[len(steps)-1], len(want.Decisions), len(want.Leases), money(want.Bill), alerts)
	for team := range budgets {
		if _, ok := alerts[team]; !ok {
			t.Errorf("no budget alert for team %s in the simulator", team)
		}
	}
	// The cap: work of a capped team submitted this month waits for the
	// next (every job of the trace is submitted in its first days, and
	// without budgets all of it has run by then).
	teamOf := map[string]*core.Job{}
	for _, j := range fx.w.Jobs {
		teamOf[j.ID] = j
	}
	next := ledger.MonthStart(fx.start).AddDate(0, 1, 0)
	held := map[string]int{}
	for key, u := range want.Units {
		j := teamOf[strings.SplitN(key, "#", 2)[0]]
		if budgets[j.Team] > 0 && j.Submit.Before(next) && !u.Start.Before(next) {
			held[j.Team]++
		}
	}
	t.Logf("units of budgeted teams held back to %s by the cap: %v", next.Format("2006-01-02"), held)
	if held["team-02"] == 0 {
		t.Errorf("team-02's cap held back no work: units held to the next month %v", held)
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var open func() (store.Store, error)
			if backend == "postgres" {
				open = pgOpener(t)
			} else {
				path := t.TempDir() + "/parity.db"
				open = func() (store.Store, error) { return sqlite.Open(context.Background(), path, sqlite.Options{}) }
			}
			start := time.Now()
			got := fx.serve(t, open, steps)
			t.Logf("server on %s: %d ticks in %s, %d decisions, bill %s, ledger %s, spent %v", backend, len(steps), time.Since(start).Round(time.Millisecond),
				len(got.Decisions), money(got.Bill), money(got.Ledger), got.Spent)
			compareParity(t, want, got)
		})
	}
}

// TestServerEqualsSimulatorUnderCapacity is the same comparison on the
// trace's first 700 jobs with the provider holding at most 12 machines
// of an offer (SQLite only): acquisitions fail with ErrCapacity at every
// step while an offer is full, and a machine released in a step frees
// its place for that step's acquisitions in both loops (the simulator
// acquired before it released, the server after: they parted at the
// first step that did both on a full offer).
func TestServerEqualsSimulatorUnderCapacity(t *testing.T) {
	fx := newParityFixture(t)
	fx.w.Jobs = fx.w.Jobs[:700]
	fx.capacity = 12
	want, steps := fx.simulate(t)
	path := t.TempDir() + "/parity.db"
	got := fx.serve(t, func() (store.Store, error) { return sqlite.Open(context.Background(), path, sqlite.Options{}) }, steps)
	compareParity(t, want, got)
}

// TestServerEqualsSimulatorLearned is the comparison (SQLite) on the
// first 700 jobs with the estimates users give in a profile's scaled
// mode — about twice the run time, ± 50%, one job in ten without one —
// under the default policy, which plans on durations learned from the
// jobs that finish: both loops learn the same model and plan alike.
func TestServerEqualsSimulatorLearned(t *testing.T) {
	prof := trace.DefaultProfile()
	prof.Estimates = trace.Estimates{Mode: trace.EstimatesScaled, FactorMilli: 2000, NoiseMilli: 500, MissingPPM: 100_000}
	fx := newParityFixtureWith(t, prof)
	if !fx.pol.Durations.Learn {
		t.Fatal("the default policy does not learn durations")
	}
	fx.w.Jobs = fx.w.Jobs[:700]
	biased, none := 0, 0
	for _, j := range fx.w.Jobs {
		switch {
		case j.EstDuration == 0:
			none++
		case j.EstDuration != fx.w.Actual[j.ID]:
			biased++
		}
	}
	if none == 0 || biased < 500 {
		t.Fatalf("%d jobs without an estimate and %d with one off; want some and most", none, biased)
	}
	want, steps := fx.simulate(t)
	path := t.TempDir() + "/parity.db"
	got := fx.serve(t, func() (store.Store, error) { return sqlite.Open(context.Background(), path, sqlite.Options{}) }, steps)
	compareParity(t, want, got)
}

func money(m core.Micros) string {
	return fmt.Sprintf("%d.%06d", m/core.MicrosPerUnit, m%core.MicrosPerUnit)
}

// parityFixture is the replay's inputs, the same for both sides.
type parityFixture struct {
	w      *sim.Workload
	offers []core.Offer
	teams  []core.Team
	pol    policy.Policy
	start  time.Time
	// capacity is the most machines of an offer the provider holds (0:
	// no limit).
	capacity int
}

func newParityFixture(t *testing.T) *parityFixture {
	t.Helper()
	return newParityFixtureWith(t, trace.DefaultProfile())
}

// newParityFixtureWith is newParityFixture under the workload profile p.
func newParityFixtureWith(t *testing.T, p *trace.Profile) *parityFixture {
	t.Helper()
	gc := trace.DefaultGenConfig()
	gc.Jobs = parityJobs
	tr := trace.Generate(gc, parityTraceSeed)
	tw, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	offers := pricing.Demo().Offers
	w := sim.NewWorkload(tw, offers, 0)
	if len(w.Jobs) < parityJobs {
		t.Fatalf("the trace gives %d jobs the catalog can run (skipped %v); want %d", len(w.Jobs), w.Skipped, parityJobs)
	}
	fx := &parityFixture{w: w, offers: offers, pol: policy.Default()}
	seen := map[string]bool{}
	for _, j := range w.Jobs {
		if !seen[j.Team] {
			seen[j.Team] = true
			fx.teams = append(fx.teams, core.Team{ID: j.Team, Name: j.Team, Weight: 1})
		}
		if fx.start.IsZero() || j.Submit.Before(fx.start) {
			fx.start = j.Submit
		}
	}
	sort.Slice(fx.teams, func(i, k int) bool { return fx.teams[i].ID < fx.teams[k].ID })
	return fx
}

// provider is the sim provider both sides rent from (the simulator
// fills in Offers, Clock and Source as serve's would be): the fixed
// provisioning delay "gpufleet sim" assumes, and, so that the replay
// meets every provider event the two loops handle, a 2% chance that a
// machine fails while provisioning (provider.Failed), at most parityCap
// machines of an offer (provider.ErrCapacity on Acquire) and spot
// outages every day (reclaim notices, reclaims, and ErrCapacity on spot
// while out).
func (fx *parityFixture) provider() provsim.Config {
	var steps []provsim.Step
	for day := range 4 {
		from := time.Duration(day)*24*time.Hour + 6*time.Hour + time.Duration(day)*5*time.Hour
		steps = append(steps,
			provsim.Step{Offset: from, Relative: true, Offer: provsim.AllOffers, Available: false},
			provsim.Step{Offset: from + 40*time.Minute, Relative: true, Offer: provsim.AllOffers, Available: true})
	}
	return provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(parityDelay), Capacity: fx.capacity, FailureBP: new(int64(200))},
		Availability: &provsim.Availability{File: "parity", Steps: steps}}
}

// parityCap is the most machines of one offer the provider holds at once.
const parityCap = 12

// serverProvider is provider() as the server gets it.
func (fx *parityFixture) serverProvider(clk clock.Clock) provsim.Config {
	c := fx.provider()
	c.Offers, c.Clock, c.Source = fx.pol.Offers(fx.offers), clk, rand.NewPCG(parityCloudSeed, 0x5eed)
	return c
}

// simulate runs the simulator and returns what it decided and the
// instants it stepped at.
func (fx *parityFixture) simulate(t *testing.T) (parityRun, []time.Time) {
	t.Helper()
	out := parityRun{Units: map[string]parityUnit{}, Leases: map[string]parityLease{}}
	var steps []time.Time
	cfg := sim.Config{Workload: fx.w, Offers: fx.offers, Teams: fx.teams, TimeOfUse: policy.SiteTariff(fx.offers), Seed: parityCloudSeed,
		Provider: fx.provider(),
		Transcript: func(e core.Event) {
			if decisionKind(e.Kind) {
				out.Decisions = append(out.Decisions, parityEvent{At: e.At.UTC(), Kind: e.Kind, Subject: e.Subject, Reason: e.Reason})
			}
		},
		Leases: func(l sim.LeaseRecord) {
			out.Leases[l.ID] = parityLease{Offer: l.Offer, Mode: l.Mode, Start: l.Start.UTC(), End: l.End.UTC(), Reclaimed: l.Reclaimed, Cost: l.Cost}
		},
		Units: func(u engine.Unit) {
			out.Units[u.Key()] = parityUnit{State: u.State, Start: u.Start.UTC(), End: u.End.UTC(), Done: u.Done, Reclaims: u.Reclaims, Preemptions: u.Preemptions,
				NoSpot: u.NoSpot, LostMilliSeconds: u.LostMilliSeconds, DeferredUntil: u.DeferredUntil.UTC(), LastCkpt: u.LastCheckpoint.UTC()}
		},
		Stepped: func(now time.Time) { steps = append(steps, now) },
	}
	res, err := sim.Run(context.Background(), cfg, fx.pol)
	if err != nil {
		t.Fatal(err)
	}
	out.Bill = res.Cost
	kinds := map[string]int{}
	for _, e := range out.Decisions {
		kinds[e.Kind]++
	}
	t.Logf("simulator: decisions by kind %v; reclaims %d, preemptions %d, moves %d, acquire failures %d, unfinished %d, deadline misses %d",
		kinds, res.Reclaims, res.Preemptions, res.Moves, res.AcquireFailures, res.Unfinished, res.DeadlineMisses)
	return out, steps
}

// serve replays the workload through the live server path on the store
// open opens, ticking at steps, and returns what it decided.
func (fx *parityFixture) serve(t *testing.T, open func() (store.Store, error), steps []time.Time) parityRun {
	t.Helper()
	ctx := context.Background()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewManual(fx.start)
	cloud, err := provsim.New(fx.serverProvider(clk))
	if err != nil {
		t.Fatal(err)
	}
	rent := fx.pol.Offers(fx.offers)
	ecfg, err := fx.pol.Engine(rent, fx.start)
	if err != nil {
		t.Fatal(err)
	}
	ecfg.Fleet = ecfg.Fleet.Defaults()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	loop, err := NewLoop(Config{Store: st, Provider: cloud, Offers: fx.offers, RentOffers: rent, TimeOfUse: fx.pol.Tariff(fx.offers),
		Engine: ecfg, Clock: clk, Log: log, Executor: VirtualTime{Actual: fx.w.Actual}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range fx.teams {
		if err := st.Teams().CreateTeam(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	secret, err := api.EnsureAdminToken(ctx, st, clk)
	if err != nil {
		t.Fatal(err)
	}
	cat := &pricing.Catalog{Currency: fx.offers[0].Currency, Offers: fx.offers}
	ts := httptest.NewServer(api.New(cat, clk, log, api.WithStore(st), api.WithPolicy(fx.pol), api.WithRateLimit(httpapi.RateLimit{})))
	defer ts.Close()
	if err := loop.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}

	jobs := slices.Clone(fx.w.Jobs)
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].Submit.Before(jobs[k].Submit) })
	next := 0
	for _, now := range steps {
		clk.Set(now)
		for ; next < len(jobs) && !jobs[next].Submit.After(now); next++ {
			fx.submit(t, ts.URL, secret, jobs[next])
		}
		if err := loop.Tick(ctx); err != nil {
			t.Fatalf("tick at %s: %v", now, err)
		}
	}
	if next != len(jobs) {
		t.Fatalf("%d of %d jobs submitted by the simulator's last step", next, len(jobs))
	}
	return fx.read(t, st, clk.Now())
}

// submit posts j to the API as an admin naming the job, and checks the
// job the store keeps is the one the simulator replays.
func (fx *parityFixture) submit(t *testing.T, url, secret string, j *core.Job) {
	t.Helper()
	r := j.Request
	body, err := json.Marshal(api.JobRequest{ID: j.ID, Team: j.Team, User: j.User, Tier: string(j.Tier), GPUs: r.GPUs, GPUMilli: int64(r.MilliPerGPU),
		GPUMemMiB: r.MemPerGPUMiB, Models: r.Models, Throughput: r.Throughput, CPUMilli: r.CPUMilli, MemMiB: r.MemMiB, Shards: j.Shards,
		EstDurationSeconds: int64(j.EstDuration / time.Second), Deadline: j.Deadline, Interruptible: j.Interruptible, Deferrable: j.Deferrable,
		CheckpointSeconds: int64(j.CheckpointInterval / time.Second), Workload: r.Workload, Accelerators: r.Accelerators})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url+"/api/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit job %s: %d %s", j.ID, resp.StatusCode, b)
	}
	var v api.JobView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Submit.Equal(j.Submit) || v.EstDurationSeconds*int64(time.Second) != int64(j.EstDuration) || !v.Deadline.Equal(j.Deadline) {
		t.Fatalf("job %s as submitted: submit %s est %ds deadline %s; the simulator's: %s %s %s", j.ID, v.Submit, v.EstDurationSeconds, v.Deadline, j.Submit, j.EstDuration, j.Deadline)
	}
}

// read collects what the server decided from its store.
func (fx *parityFixture) read(t *testing.T, st store.Store, now time.Time) parityRun {
	t.Helper()
	ctx := context.Background()
	out := parityRun{Units: map[string]parityUnit{}, Leases: map[string]parityLease{}}
	for cursor := ""; ; {
		page, err := st.Events().ListEvents(ctx, store.EventFilter{Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			if decisionKind(e.Kind) {
				out.Decisions = append(out.Decisions, parityEvent{At: e.At.UTC(), Kind: e.Kind, Subject: e.Subject, Reason: e.Reason})
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	for _, j := range fx.w.Jobs {
		us, err := st.Units().ListUnits(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			out.Units[unitEngine(&u, j).Key()] = parityUnit{State: u.State, Start: u.Start.UTC(), End: u.End.UTC(), Done: u.Done, Reclaims: u.Reclaims,
				Preemptions: u.Preemptions, NoSpot: u.NoSpot, LostMilliSeconds: u.LostMilliSeconds, DeferredUntil: u.DeferredUntil.UTC(), LastCkpt: u.LastCheckpoint.UTC()}
		}
	}
	cat := &pricing.Catalog{Currency: fx.offers[0].Currency, Offers: fx.offers}
	for cursor := ""; ; {
		page, err := st.Leases().ListLeases(ctx, store.LeaseFilter{Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Items {
			if l.Start.IsZero() {
				continue // never launched: nothing billed (the simulator records none)
			}
			end := l.End
			if end.IsZero() {
				end = now // still held: cut at the end, as the simulator does
			}
			o, err := cat.Offer(l.OfferID)
			if err != nil {
				t.Fatal(err)
			}
			b, err := billing.LeaseCost(o, &l.Lease, end, l.State == core.LeaseReclaimed) // every term, as the simulator bills it
			if err != nil {
				t.Fatal(err)
			}
			out.Leases[l.ID] = parityLease{Offer: l.OfferID, Mode: l.Mode, Start: l.FirstStart().UTC(), End: end.UTC(), Reclaimed: l.State == core.LeaseReclaimed, Cost: b.Amount}
			out.Bill += b.Amount
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	in, err := ledger.Load(ctx, st, cat, fx.start, now, now)
	if err != nil {
		t.Fatal(err)
	}
	u, err := ledger.Over(in, fx.start)
	if err != nil {
		t.Fatal(err)
	}
	out.Ledger = u.Bill
	out.Spent = ledger.Spent(u)
	return out
}

// compareParity reports every aspect in which got (the server) differs
// from want (the simulator), each with its diff.
func compareParity(t *testing.T, want, got parityRun) {
	t.Helper()
	// Decisions: the first divergence, with a few events around it, and
	// the counts (a divergence changes everything after it).
	n := min(len(want.Decisions), len(got.Decisions))
	first := n
	for i := range n {
		if want.Decisions[i] != got.Decisions[i] {
			first = i
			break
		}
	}
	if first < n || len(want.Decisions) != len(got.Decisions) {
		lo := max(first-3, 0)
		t.Errorf("decisions differ from #%d of %d (simulator) / %d (server); -simulator +server around it:\n%s", first, len(want.Decisions), len(got.Decisions),
			cmp.Diff(want.Decisions[lo:min(first+8, len(want.Decisions))], got.Decisions[lo:min(first+8, len(got.Decisions))]))
	}
	if d := cmp.Diff(want.Units, got.Units); d != "" {
		t.Errorf("units differ (-simulator +server):\n%s", clip(d, 60))
	}
	if d := cmp.Diff(want.Leases, got.Leases); d != "" {
		t.Errorf("leases differ (-simulator +server):\n%s", clip(d, 60))
	}
	if want.Bill != got.Bill {
		t.Errorf("bill: simulator %s, server's leases %s (%+d micros)", money(want.Bill), money(got.Bill), got.Bill-want.Bill)
	}
	if want.Bill != got.Ledger {
		t.Errorf("bill: simulator %s, server's ledger %s (%+d micros)", money(want.Bill), money(got.Ledger), got.Ledger-want.Bill)
	}
}

// clip keeps the first lines of a long diff.
func clip(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) <= lines {
		return s
	}
	return strings.Join(ls[:lines], "\n") + fmt.Sprintf("\n… %d more lines", len(ls)-lines)
}
