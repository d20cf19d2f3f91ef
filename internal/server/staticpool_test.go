package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestStaticPoolWaits: on the static pool alone (serve --provider
// static: the engine leases joined machines and rents nothing), work
// with no free machine waits with a reason and no lease is made — no
// failed lease every tick — until an agent of a fitting offer joins;
// work no machine of the pool can run is said to be so.
func TestStaticPoolWaits(t *testing.T) {
	w := newWorld(t)
	offer := hourly()[0].ID
	var pool *AgentPool
	w.configure = func(c *Config) {
		var err error
		pool, err = NewAgentPool(c.Store, w.clk, []string{offer}, map[string]string{"box-1": offer}, AgentConfig{})
		if err != nil {
			t.Fatal(err)
		}
		c.Provider, c.Engine.NoAcquire = pool, true
	}
	w.restart()
	ctx := context.Background()
	w.submit("j1", core.TierCore, 10*time.Minute)
	big := core.Job{ID: "j2", Team: "a", Tier: core.TierCore, Request: core.Request{GPUs: 2, MilliPerGPU: core.WholeGPU}, EstDuration: time.Minute, Submit: w.clk.Now()}
	if _, _, err := w.st.Jobs().SubmitJob(ctx, big, ""); err != nil {
		t.Fatal(err)
	}
	w.run(time.Minute)
	if ls := w.leases(); len(ls) != 0 {
		t.Fatalf("%d leases with no machine joined, want none: %+v", len(ls), ls)
	}
	waits := w.events("unit.waiting")
	if len(waits) != 1 || waits[0].Subject != "j1" || !strings.Contains(waits[0].Reason, "static pool") {
		t.Errorf("unit.waiting events %+v, want one for j1", waits)
	}
	never := w.events("unit.unrunnable")
	if len(never) != 1 || never[0].Subject != "j2" || !strings.Contains(never[0].Reason, "no machine of the static pool can ever run it") {
		t.Errorf("unit.unrunnable events %+v, want one for j2", never)
	}

	// box-1 joins: j1 gets it at once.
	if _, _, err := w.st.Agents().SaveHeartbeat(ctx, store.Agent{ID: "box-1", OfferID: offer, LastSeen: w.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	beat := func() {
		if _, _, err := w.st.Agents().SaveHeartbeat(ctx, store.Agent{ID: "box-1", OfferID: offer, LastSeen: w.clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		beat()
		w.run(DefaultTick)
	}
	ls := w.leases()
	if len(ls) != 1 || ls[0].State != core.LeaseReady {
		t.Fatalf("leases after box-1 joined: %+v, want one ready", ls)
	}
	if j := w.job("j1"); j.State != core.JobRunning {
		t.Errorf("j1 %s, want running on box-1", j.State)
	}
	if n := len(w.events("lease.failed")); n != 0 {
		t.Errorf("%d failed leases, want none", n)
	}
}
