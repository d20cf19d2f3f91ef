package reliability

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"github.com/gpufleet/gpufleet/internal/server"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// spotOffers is one 1-GPU machine type on demand and on spot (two-minute
// notice), priced by the hour.
func spotOffers() []core.Offer {
	return []core.Offer{{ID: "test/r1/a100x1", Provider: "test", Region: "r1", InstanceType: "a100x1", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960,
		VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
		Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 3600},
			{Mode: core.Spot, Price: 600_000, Per: core.Hour, Granularity: 1, Reclaim: &core.ReclaimModel{MonthlyRateBP: 500, NoticeSeconds: 120}},
		}}}
}

// loopWorld is the live control loop on a SQLite store and a sim cloud,
// on a manual clock.
type loopWorld struct {
	t     *testing.T
	st    store.Store
	cloud *sim.Cloud
	clk   *clock.Manual
	loop  *server.Loop
}

func newLoopWorld(t *testing.T, cfg sim.Config) *loopWorld {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewManual(t0)
	cfg.Offers, cfg.Clock = spotOffers(), clk
	cfg.SeriesStart = t0
	cloud, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, t.TempDir()+"/loop.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Teams().CreateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	loop, err := server.NewLoop(server.Config{Store: st, Provider: cloud, Offers: spotOffers(), Clock: clk, Executor: server.VirtualTime{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	return &loopWorld{t: t, st: st, cloud: cloud, clk: clk, loop: loop}
}

func (w *loopWorld) submit(n int, interruptible bool, dur time.Duration) {
	w.t.Helper()
	for i := range n {
		j := core.Job{ID: fmt.Sprintf("j%03d", i), Team: "a", Tier: core.TierRegular, Submit: w.clk.Now(),
			Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, EstDuration: dur,
			Interruptible: interruptible, CheckpointInterval: 5 * time.Minute}
		if _, _, err := w.st.Jobs().SubmitJob(context.Background(), j, ""); err != nil {
			w.t.Fatal(err)
		}
	}
}

// runFor ticks every step of manual time until d has passed.
func (w *loopWorld) runFor(d, step time.Duration) {
	w.t.Helper()
	for end := w.clk.Now().Add(d); w.clk.Now().Before(end); {
		w.clk.Advance(step)
		if err := w.loop.Tick(context.Background()); err != nil {
			w.t.Fatalf("tick at %s: %v", w.clk.Now(), err)
		}
	}
}

// jobStates counts the jobs by state.
func (w *loopWorld) jobStates() map[core.JobState]int {
	w.t.Helper()
	out := map[core.JobState]int{}
	for cursor := ""; ; {
		page, err := w.st.Jobs().ListJobs(context.Background(), store.JobFilter{Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, j := range page.Items {
			out[j.State]++
		}
		if cursor = page.Next; cursor == "" {
			return out
		}
	}
}

// checkLeases asserts that the store and the provider agree: every
// machine the provider holds is one live lease of the store (none
// forgotten), no two leases share a machine or a client token (none
// duplicated), and every live lease the store has past its request is
// held by the provider.
func (w *loopWorld) checkLeases() (machines int) {
	w.t.Helper()
	ctx := context.Background()
	ms, err := w.cloud.List(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	live, err := w.st.Leases().ListLiveLeases(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	byProvider := map[string]string{}
	tokens := map[string]bool{}
	for _, l := range live {
		if l.ProviderID != "" {
			if other, dup := byProvider[l.ProviderID]; dup {
				w.t.Errorf("machine %s held by leases %s and %s", l.ProviderID, other, l.ID)
			}
			byProvider[l.ProviderID] = l.ID
		}
		if tokens[l.ClientToken] {
			w.t.Errorf("client token %s used twice", l.ClientToken)
		}
		tokens[l.ClientToken] = true
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.ClientToken] {
			w.t.Errorf("provider rented twice for client token %s", m.ClientToken)
		}
		seen[m.ClientToken] = true
		if _, ok := byProvider[m.ProviderID]; !ok {
			sl, err := w.st.Leases().LeaseByProviderID(ctx, m.ProviderID)
			w.t.Errorf("provider machine %s (%s) is not a live lease of the store: %+v %v", m.ProviderID, m.State, sl, err)
		}
	}
	return len(ms)
}

func (w *loopWorld) countEvents(kind string) int {
	w.t.Helper()
	n := 0
	for cursor := ""; ; {
		page, err := w.st.Events().ListEvents(context.Background(), store.EventFilter{Kind: kind, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			w.t.Fatal(err)
		}
		n += len(page.Items)
		if cursor = page.Next; cursor == "" {
			return n
		}
	}
}

// TestReclaimStorm takes spot capacity away every twenty minutes for
// six hours under forty interruptible jobs: each time every spot machine
// gets a reclaim notice and goes two minutes later. The loop must
// checkpoint and requeue, keep the store and the provider in step
// throughout, and finish every job.
func TestReclaimStorm(t *testing.T) {
	var steps []sim.Step
	for m := 0; m < 6*60; m += 20 {
		steps = append(steps,
			sim.Step{Offset: time.Duration(m) * time.Minute, Relative: true, Offer: sim.AllOffers, Available: true},
			sim.Step{Offset: time.Duration(m+15) * time.Minute, Relative: true, Offer: sim.AllOffers, Available: false})
	}
	w := newLoopWorld(t, sim.Config{Source: rand.NewPCG(7, 7), Default: sim.Settings{Delay: sim.Fixed(time.Minute)},
		Availability: &sim.Availability{File: "storm", Steps: steps}})
	w.submit(40, true, 90*time.Minute)
	maxMachines := 0
	for range 6 * 60 {
		w.runFor(time.Minute, 30*time.Second)
		maxMachines = max(maxMachines, w.checkLeases())
	}
	w.runFor(24*time.Hour, 5*time.Minute)
	w.checkLeases()
	states := w.jobStates()
	if states[core.JobSucceeded] != 40 {
		t.Errorf("job states after the storm: %v, want 40 succeeded", states)
	}
	notices := w.countEvents("reclaim-notice")
	if notices < 20 {
		t.Errorf("%d reclaim-notice events: the storm did not reach the jobs", notices)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "a storm of spot reclaims: all spot capacity withdrawn every 20 minutes for 6 hours under 40 interruptible jobs",
		Amount: fmt.Sprintf("%d reclaim notices to running units, up to %d machines at once, store and provider compared every minute", notices, maxMachines),
		Held:   "no lease forgotten or duplicated at any check, every job succeeded"})
}

// TestClockJumpsForward runs jobs, then moves the clock three days ahead
// at once (a suspended host, a corrected clock). The loop must take the
// jump in one tick: the jobs end, the machines are released, and the
// store and the provider agree.
func TestClockJumpsForward(t *testing.T) {
	w := newLoopWorld(t, sim.Config{Source: rand.NewPCG(3, 3), Default: sim.Settings{Delay: sim.Fixed(time.Minute)}})
	w.submit(10, false, 2*time.Hour)
	w.runFor(30*time.Minute, 30*time.Second)
	if got := w.checkLeases(); got == 0 {
		t.Fatal("no machines rented before the jump")
	}
	running := w.jobStates()[core.JobRunning]
	if running == 0 {
		t.Fatalf("no job running before the jump: %v", w.jobStates())
	}
	w.clk.Advance(72 * time.Hour)
	for range 3 {
		if err := w.loop.Tick(context.Background()); err != nil {
			t.Fatalf("tick after the jump: %v", err)
		}
		w.clk.Advance(time.Second)
	}
	states := w.jobStates()
	if states[core.JobSucceeded] != 10 {
		t.Errorf("job states after the jump: %v, want 10 succeeded", states)
	}
	w.runFor(2*time.Hour, time.Minute)
	if left := w.checkLeases(); left != 0 {
		t.Errorf("%d machines still rented two hours after the work ended", left)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "the clock jumped 72 hours forward with 10 jobs running",
		Amount: fmt.Sprintf("%d jobs running at the jump", running),
		Held:   "every job ended succeeded, every machine released, the store and the provider agree"})
}
