package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func hourly() []core.Offer {
	return []core.Offer{{ID: "test/r1/a100x1", Provider: "test", Region: "r1", InstanceType: "a100x1", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960,
		VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
		Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 3600}}}}
}

// world is a store file, a sim cloud on a manual clock, and a loop.
type world struct {
	t    *testing.T
	path string
	st   store.Store
	// opener opens the world's store again (the SQLite file by default).
	opener func() (store.Store, error)
	cloud  *sim.Cloud
	clk    *clock.Manual
	loop   *Loop
	// configure, if set, changes each loop's Config before it is made
	// (offers, policy).
	configure func(*Config)
}

func newWorld(t *testing.T) *world { t.Helper(); return newWorldOn(t, nil) }

// newWorldOn is newWorld on the store opener returns (SQLite if nil).
func newWorldOn(t *testing.T, opener func() (store.Store, error)) *world {
	t.Helper()
	clk := clock.NewManual(t0)
	w := &world{t: t, path: t.TempDir() + "/loop.db", cloud: newTestCloud(t, clk), clk: clk, opener: opener}
	if w.opener == nil {
		w.opener = func() (store.Store, error) { return sqlite.Open(context.Background(), w.path, sqlite.Options{}) }
	}
	w.open()
	t.Cleanup(func() { w.st.Close() })
	if err := w.st.Teams().CreateTeam(context.Background(), core.Team{ID: "a", Name: "a", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	return w
}

// newTestCloud is the world's sim cloud: machines ready two minutes
// after launch, named sim-000001 and on.
func newTestCloud(t *testing.T, clk clock.Clock) *sim.Cloud {
	t.Helper()
	cloud, err := sim.New(sim.Config{Offers: hourly(), Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(2 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	return cloud
}

// open (re)opens the store and starts a new loop on it, reconciling.
func (w *world) open() {
	w.t.Helper()
	st, err := w.opener()
	if err != nil {
		w.t.Fatal(err)
	}
	w.st = st
	cfg := Config{Store: st, Provider: w.cloud, Offers: hourly(), Clock: w.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}, Executor: VirtualTime{}}
	if w.configure != nil {
		w.configure(&cfg)
	}
	w.loop, err = NewLoop(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.loop.Reconcile(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

// restart closes the store and opens it again with a new loop.
func (w *world) restart() {
	w.t.Helper()
	if err := w.st.Close(); err != nil {
		w.t.Fatal(err)
	}
	w.open()
}

func (w *world) submit(id string, tier core.Tier, est time.Duration) {
	w.t.Helper()
	j := core.Job{ID: id, Team: "a", Tier: tier, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, EstDuration: est, Submit: w.clk.Now()}
	if _, _, err := w.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
		w.t.Fatal(err)
	}
}

// run ticks every 5 s of manual time for d.
func (w *world) run(d time.Duration) { w.t.Helper(); w.runEvery(d, DefaultTick) }

// runEvery ticks every step of manual time for d.
func (w *world) runEvery(d, step time.Duration) {
	w.t.Helper()
	for end := w.clk.Now().Add(d); w.clk.Now().Before(end); w.clk.Advance(step) {
		if err := w.loop.Tick(context.Background()); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) job(id string) store.Job {
	w.t.Helper()
	j, err := w.st.Jobs().GetJob(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

func (w *world) leases() []store.Lease {
	w.t.Helper()
	p, err := w.st.Leases().ListLeases(context.Background(), store.LeaseFilter{Limit: store.MaxLimit})
	if err != nil {
		w.t.Fatal(err)
	}
	return p.Items
}

func (w *world) held() []provider.Machine {
	w.t.Helper()
	ms, err := w.cloud.List(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return ms
}

func (w *world) events(kind string) []core.Event {
	w.t.Helper()
	p, err := w.st.Events().ListEvents(context.Background(), store.EventFilter{Kind: kind, Limit: store.MaxLimit})
	if err != nil {
		w.t.Fatal(err)
	}
	return p.Items
}

// TestJobLifecycle: submit → lease intent and acquisition → ready →
// placed → succeeded after its duration → lease released on its billing
// boundary, each decision in the event trail.
func TestJobLifecycle(t *testing.T) {
	w := newWorld(t)
	w.submit("j1", core.TierCore, 30*time.Minute)
	w.run(2 * time.Minute)
	ls := w.leases()
	if len(ls) != 1 || ls[0].ClientToken != ls[0].ID || ls[0].ProviderID == "" || ls[0].Requested.IsZero() {
		t.Fatalf("after 2 min: leases %+v", ls)
	}
	if len(w.events("acquire")) == 0 && len(w.events("lease.launched")) == 0 {
		t.Error("no acquisition in the event trail")
	}
	w.run(3 * time.Minute)
	if j := w.job("j1"); j.State != core.JobRunning {
		t.Fatalf("after 5 min: job %s", j.State)
	}
	// The loop keeps the demand it saw between ticks (the store does
	// not): the job's GPU, waiting, then running.
	if d := w.loop.demand; len(d) == 0 || d[len(d)-1].Milli != int64(core.WholeGPU) {
		t.Errorf("demand history %+v, want the running job's GPU last", d)
	}
	if ls := w.leases(); ls[0].State != core.LeaseReady {
		t.Fatalf("after 5 min: lease %s", ls[0].State)
	}
	w.run(30 * time.Minute)
	if j := w.job("j1"); j.State != core.JobSucceeded {
		t.Fatalf("after 35 min: job %s", j.State)
	}
	if len(w.events("unit.succeeded")) != 1 {
		t.Error("no unit.succeeded event")
	}
	l := w.leases()[0]
	if l.State != core.LeaseReady {
		t.Fatalf("idle lease released before its boundary: %s at %s", l.State, l.End)
	}
	w.run(90 * time.Minute)
	l = w.leases()[0]
	if l.State != core.LeaseReleased || len(w.held()) != 0 {
		t.Fatalf("lease not released: %+v, provider holds %v", l, w.held())
	}
	billed := l.End.Sub(l.Start)
	if billed > time.Hour || billed < 50*time.Minute {
		t.Errorf("released after %s of billing, want just before the hour boundary", billed)
	}
	if len(w.leases()) != 1 {
		t.Errorf("%d leases for one job", len(w.leases()))
	}
}

// TestRestartMidway restarts the loop at every interesting moment: after
// the intent, while provisioning, while running; no job is lost and no
// lease is acquired twice.
func TestRestartMidway(t *testing.T) {
	for _, at := range []time.Duration{5 * time.Second, time.Minute, 3 * time.Minute, 20 * time.Minute} {
		t.Run(at.String(), func(t *testing.T) {
			w := newWorld(t)
			w.submit("j1", core.TierCore, 30*time.Minute)
			w.submit("j2", core.TierCore, 30*time.Minute)
			w.run(at)
			w.restart()
			w.submit("j3", core.TierCore, 10*time.Minute)
			w.runEvery(3*time.Hour, 30*time.Second)
			for _, id := range []string{"j1", "j2", "j3"} {
				if j := w.job(id); j.State != core.JobSucceeded {
					t.Errorf("job %s %s", id, j.State)
				}
			}
			tokens := map[string]bool{}
			for _, l := range w.leases() {
				if tokens[l.ClientToken] {
					t.Errorf("client token %s twice", l.ClientToken)
				}
				tokens[l.ClientToken] = true
				if !l.State.Final() {
					t.Errorf("lease %s still %s after 3 idle hours", l.ID, l.State)
				}
			}
			if st := w.cloud.Stats(); len(w.held()) != 0 {
				t.Errorf("provider still holds %v (%+v)", w.held(), st)
			}
			if n := len(w.cloud.Machines()); n != len(w.leases()) {
				t.Errorf("provider rented %d machines for %d leases", n, len(w.leases()))
			}
		})
	}
}

// TestReconcile: a machine the store lacks is adopted; a lease whose
// machine vanished is marked failed.
func TestReconcile(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	stray, err := w.cloud.Acquire(ctx, provider.AcquireRequest{ClientToken: "lost-intent", OfferID: hourly()[0].ID, Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	gone := store.Lease{Lease: core.Lease{ID: "Lgone", OfferID: hourly()[0].ID, Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: "Lgone"}, Requested: t0}
	if err := w.st.Leases().CreateLease(ctx, gone); err != nil {
		t.Fatal(err)
	}
	gone.State, gone.ProviderID, gone.Start = core.LeaseReady, "nowhere-1", t0
	if err := w.st.Leases().UpdateLease(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := w.loop.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	adopted, err := w.st.Leases().LeaseByProviderID(ctx, stray.ProviderID)
	if err != nil || adopted.State.Final() {
		t.Fatalf("stray machine not adopted: %+v %v", adopted, err)
	}
	g, err := w.st.Leases().GetLease(ctx, "Lgone")
	if err != nil || g.State != core.LeaseFailed {
		t.Fatalf("vanished lease: %+v %v", g, err)
	}
	if len(w.events("lease.adopted")) != 1 || len(w.events("lease.vanished")) != 1 {
		t.Error("reconcile events missing")
	}
	// The adopted machine is idle: the loop releases it in time.
	w.runEvery(2*time.Hour, 30*time.Second)
	if len(w.held()) != 0 {
		t.Errorf("adopted machine never released: %v", w.held())
	}
}

func TestCancelStopsUnit(t *testing.T) {
	w := newWorld(t)
	w.submit("j1", core.TierCore, 5*time.Hour)
	w.run(5 * time.Minute)
	if j := w.job("j1"); j.State != core.JobRunning {
		t.Fatalf("job %s", j.State)
	}
	if _, err := w.st.Jobs().CancelJob(context.Background(), "j1", w.clk.Now()); err != nil {
		t.Fatal(err)
	}
	w.runEvery(2*time.Hour, 30*time.Second)
	units, err := w.st.Units().ListUnits(context.Background(), "j1")
	if err != nil || units[0].State != core.JobCancelled {
		t.Fatalf("unit: %+v %v", units, err)
	}
	if len(w.held()) != 0 {
		t.Errorf("machine of a cancelled job kept: %v", w.held())
	}
}

// crashy fails Acquire as a crash would: before calling the cloud, or
// after the cloud rented the machine but before the answer came back.
type crashy struct {
	provider.Provider
	before, after bool
}

func (c *crashy) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	if c.before {
		return provider.Machine{}, context.DeadlineExceeded
	}
	m, err := c.Provider.Acquire(ctx, req)
	if c.after && err == nil {
		return provider.Machine{}, context.DeadlineExceeded
	}
	return m, err
}

// TestCrashAroundAcquire: an intent written but never sent, and a machine
// rented whose answer was lost, each end as exactly one machine after a
// restart.
func TestCrashAroundAcquire(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after bool
	}{{"before the call", true, false}, {"after the call", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.loop.cfg.Provider = &crashy{Provider: w.cloud, before: tc.before, after: tc.after}
			w.submit("j1", core.TierCore, 20*time.Minute)
			w.run(2 * time.Minute)
			ls := w.leases()
			if len(ls) != 1 || ls[0].State != core.LeaseRequested {
				t.Fatalf("intent: %+v", ls)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.before]; len(w.cloud.Machines()) != want {
				t.Fatalf("provider rented %d, want %d", len(w.cloud.Machines()), want)
			}
			w.restart() // a new loop on the real provider
			w.runEvery(2*time.Hour, 30*time.Second)
			if j := w.job("j1"); j.State != core.JobSucceeded {
				t.Errorf("job %s", j.State)
			}
			if n, m := len(w.leases()), len(w.cloud.Machines()); n != 1 || m != 1 {
				t.Errorf("%d leases, %d machines rented; want 1 and 1", n, m)
			}
			if len(w.held()) != 0 {
				t.Errorf("machine kept: %v", w.held())
			}
		})
	}
}

// TestVanishedMachineRequeues: the machine of a running job disappears
// while the loop is down; on restart the lease is failed and the job runs
// again elsewhere to success.
func TestVanishedMachineRequeues(t *testing.T) {
	w := newWorld(t)
	w.submit("j1", core.TierCore, 20*time.Minute)
	w.run(5 * time.Minute)
	if j := w.job("j1"); j.State != core.JobRunning {
		t.Fatalf("job %s", j.State)
	}
	l := w.leases()[0]
	if err := w.cloud.Release(context.Background(), l.ProviderID); err != nil { // gone behind the loop's back
		t.Fatal(err)
	}
	w.restart()
	if g, _ := w.st.Leases().GetLease(context.Background(), l.ID); g.State != core.LeaseFailed {
		t.Fatalf("vanished lease %s", g.State)
	}
	w.runEvery(2*time.Hour, 30*time.Second)
	if j := w.job("j1"); j.State != core.JobSucceeded {
		t.Errorf("job %s", j.State)
	}
	if len(w.events("unit.requeued")) != 1 || len(w.leases()) != 2 {
		t.Errorf("requeued %d times, %d leases", len(w.events("unit.requeued")), len(w.leases()))
	}
}

// TestAdoptUnknownOffer: a stray machine of an offer the catalog lacks is
// recorded and released, and the loop keeps running.
func TestAdoptUnknownOffer(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	other := hourly()
	other[0].ID = "test/r1/other"
	cloud, err := sim.New(sim.Config{Offers: append(hourly(), other...), Source: rand.NewPCG(3, 4), Clock: w.clk})
	if err != nil {
		t.Fatal(err)
	}
	w.cloud = cloud
	m, err := cloud.Acquire(ctx, provider.AcquireRequest{ClientToken: "stray", OfferID: other[0].ID, Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	w.restart()
	l, err := w.st.Leases().LeaseByProviderID(ctx, m.ProviderID)
	if err != nil || l.State != core.LeaseReleased {
		t.Fatalf("stray of an unknown offer: %+v %v", l, err)
	}
	if len(w.held()) != 0 {
		t.Errorf("still held: %v", w.held())
	}
	w.submit("j1", core.TierCore, 10*time.Minute)
	w.runEvery(time.Hour, 30*time.Second)
	if j := w.job("j1"); j.State != core.JobSucceeded {
		t.Errorf("job %s", j.State)
	}
}

// TestRestartWithFreshCloud is a restart of a server on the sim provider:
// the machines die with the process, and the new process's cloud names
// its machines as the old one did (sim-000001 and on, the worst case: a
// server sets an incarnation that makes them differ). The old leases are
// marked failed, their jobs requeued, and every tick after the restart
// succeeds: the jobs from before and after it are scheduled and run on
// new machines that carry the old ones' ids.
func TestRestartWithFreshCloud(t *testing.T) {
	for _, st := range []string{"provisioning", "running"} {
		t.Run(st, func(t *testing.T) {
			w := newWorld(t)
			w.submit("j1", core.TierCore, 30*time.Minute)
			w.submit("j2", core.TierCore, 30*time.Minute)
			if st == "provisioning" { // rented after the core tier's minute of waiting, ready two minutes later
				w.run(90 * time.Second)
			} else {
				w.run(5 * time.Minute)
			}
			before := map[string]bool{}
			for _, l := range w.leases() {
				if l.ProviderID == "" {
					t.Fatalf("lease %s has no machine before the restart", l.ID)
				}
				before[l.ProviderID] = true
			}
			if len(before) == 0 {
				t.Fatal("no lease before the restart")
			}
			w.cloud = newTestCloud(t, w.clk)
			w.restart()
			w.submit("j3", core.TierCore, 10*time.Minute)
			w.runEvery(2*time.Hour, 30*time.Second) // fails the test at the first failed tick
			for _, id := range []string{"j1", "j2", "j3"} {
				if j := w.job(id); j.State != core.JobSucceeded {
					t.Errorf("job %s %s", id, j.State)
				}
			}
			reused := 0
			live := map[string]string{}
			for _, l := range w.leases() {
				if l.ProviderID != "" && !l.State.Final() {
					if other, dup := live[l.ProviderID]; dup {
						t.Errorf("leases %s and %s both live on machine %s", other, l.ID, l.ProviderID)
					}
					live[l.ProviderID] = l.ID
				}
			}
			for _, m := range w.cloud.Machines() {
				if before[m.ProviderID] {
					reused++
				}
			}
			if reused == 0 {
				t.Errorf("no machine after the restart took an id from before it (%v, now %v): the test proved nothing", before, w.cloud.Machines())
			}
		})
	}
}

// TestUnrunnableEvent: a job stored that no offer can run (accepted
// under another catalog, or put in the store directly) is reported once
// with the reason, instead of waiting in silence; a runnable one is not.
func TestUnrunnableEvent(t *testing.T) {
	w := newWorld(t)
	for id, req := range map[string]core.Request{
		"z100":  {GPUs: 1, MilliPerGPU: core.WholeGPU, Models: []string{"Z100"}},
		"huge":  {GPUs: 1, MilliPerGPU: core.WholeGPU, MemPerGPUMiB: 900_000},
		"plain": {GPUs: 1, MilliPerGPU: core.WholeGPU},
	} {
		j := core.Job{ID: id, Team: "a", Tier: core.TierCore, Request: req, EstDuration: time.Hour, Submit: w.clk.Now()}
		if _, _, err := w.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
			t.Fatal(err)
		}
	}
	w.run(10 * time.Minute) // many ticks
	got := map[string]string{}
	for _, e := range w.events("unit.unrunnable") {
		if _, dup := got[e.Subject]; dup {
			t.Errorf("%s reported twice", e.Subject)
		}
		got[e.Subject] = e.Reason
	}
	if len(got) != 2 || !strings.Contains(got["z100"], "models") || !strings.Contains(got["z100"], "A100") || !strings.Contains(got["huge"], "gpu_mem_mib") {
		t.Errorf("unrunnable events %v, want z100 (models) and huge (gpu_mem_mib)", got)
	}
	if j := w.job("plain"); j.State != core.JobRunning {
		t.Errorf("the runnable job is %s", j.State)
	}
}

// panicky is a provider whose Poll panics the first left times.
type panicky struct {
	provider.Provider
	left int
}

func (p *panicky) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	if p.left > 0 {
		p.left--
		panic("broken state")
	}
	return p.Provider.Poll(ctx, now)
}

// TestTickPanicIsAFailedTick: a panic inside a tick fails that tick with
// the reason, leaves the process and the loop alive, and the next ticks
// schedule work as before.
func TestTickPanicIsAFailedTick(t *testing.T) {
	w := newWorld(t)
	loop, err := NewLoop(Config{Store: w.st, Provider: &panicky{Provider: w.cloud, left: 1}, Offers: hourly(), Clock: w.clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}, Executor: VirtualTime{}})
	if err != nil {
		t.Fatal(err)
	}
	w.submit("j1", core.TierCore, 30*time.Minute)
	if err := loop.Tick(context.Background()); err == nil || !strings.Contains(err.Error(), "panic: broken state") {
		t.Fatalf("panicking tick: %v, want an error naming the panic", err)
	}
	for range 60 {
		w.clk.Advance(DefaultTick)
		if err := loop.Tick(context.Background()); err != nil {
			t.Fatalf("tick after the panic: %v", err)
		}
	}
	if j := w.job("j1"); j.State != core.JobRunning {
		t.Errorf("job after the panicked tick: %s, want running", j.State)
	}
}

// failingRelease is a provider whose next fails releases fail.
type failingRelease struct {
	provider.Provider
	fails int
}

func (p *failingRelease) Release(ctx context.Context, pid string) error {
	if p.fails > 0 {
		p.fails--
		return errors.New("release refused for a while")
	}
	return p.Provider.Release(ctx, pid)
}

// TestFailedReleaseRetried: a machine whose release the provider refused
// is released again by the next ticks, not left running (and paid for)
// until the server restarts; the trail says so.
func TestFailedReleaseRetried(t *testing.T) {
	w := newWorld(t)
	flaky := &failingRelease{Provider: w.cloud, fails: 2}
	w.configure = func(c *Config) { c.Provider = flaky }
	w.restart()
	w.submit("j1", core.TierCore, 30*time.Minute)
	// Until the lease ends on its billing boundary (TestJobLifecycle).
	for i := 0; ; i++ {
		if i > 2000 {
			t.Fatalf("lease never released: %+v", w.leases())
		}
		w.clk.Advance(DefaultTick)
		if err := w.loop.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ls := w.leases(); len(ls) == 1 && ls[0].State == core.LeaseReleased {
			break
		}
	}
	if flaky.fails != 1 || len(w.held()) != 1 || w.held()[0].State == provider.Released {
		t.Fatalf("after the refused release: %d refusals left, provider holds %+v", flaky.fails, w.held())
	}
	// The next tick reconciles, and the provider refuses again; the one
	// after releases it.
	w.run(2 * DefaultTick)
	if flaky.fails != 0 {
		t.Fatalf("no release tried again: %d refusals left", flaky.fails)
	}
	if held := w.held(); len(held) != 0 && held[0].State != provider.Released {
		t.Fatalf("provider still holds %+v after the retries", held)
	}
	if n := len(w.events("lease.rereleased")); n != 2 {
		t.Errorf("%d lease.rereleased events, want 2 (one a try)", n)
	}
	// The loop goes on: new work gets a machine.
	w.submit("j2", core.TierCore, 10*time.Minute)
	w.run(5 * time.Minute)
	if j := w.job("j2"); j.State != core.JobRunning {
		t.Errorf("j2 %s after the retried release, want running", j.State)
	}
}
