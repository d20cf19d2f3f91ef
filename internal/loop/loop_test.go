package loop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/sched"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// world is an engine state asking for two one-GPU machines of an offer
// the simulated cloud holds one of, on a manual clock.
func world(t *testing.T) (*engine.State, *provsim.Cloud, *clock.Manual) {
	t.Helper()
	offers := []core.Offer{{ID: "test/r1/a100x1", Provider: "test", Region: "r1", InstanceType: "a100x1", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960,
		VCPUs: 8, MemoryMiB: 65536, Currency: "USD", Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 3600}}}}
	clk := clock.NewManual(t0)
	zero := int64(0)
	cloud, err := provsim.New(provsim.Config{Offers: offers, Source: rand.NewPCG(1, 2), Clock: clk,
		Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute), Capacity: 1, FailureBP: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	st := &engine.State{Offers: offers, Teams: []core.Team{{ID: "a", Weight: 1}}}
	for i := range 2 {
		j := &core.Job{ID: fmt.Sprintf("j%d", i), Team: "a", Tier: core.TierCore, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU},
			EstDuration: time.Hour, Submit: t0.Add(-time.Hour)}
		st.Units = append(st.Units, &engine.Unit{Unit: sched.Unit{Job: j}, State: core.JobPending, Since: j.Submit})
	}
	d := engine.Step(st, t0, engine.Config{})
	if created := engine.Apply(st, d); len(created) != 2 {
		t.Fatalf("the engine asked for %d machines, want 2 (one a unit)", len(created))
	}
	return st, cloud, clk
}

func kinds(evs []core.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind+" "+e.Subject)
	}
	return strings.Join(out, ", ")
}

// Acquire launches what the provider has room for and fails the rest
// with the engine's refusal (no more of that offer while it holds); the
// machine's ready event is Observe's; each answer reaches the hook once.
func TestAcquireThenObserve(t *testing.T) {
	st, cloud, clk := world(t)
	ctx := context.Background()
	var answered []string
	h := Hooks{Answered: func(le *engine.Lease, m provider.Machine, _ provider.Bootstrap, err error) {
		answered = append(answered, fmt.Sprintf("%s:%s:%v", le.ID, m.ProviderID, errors.Is(err, provider.ErrCapacity)))
	}}
	got := Acquire(ctx, st, cloud, t0, h)
	if k := kinds(got.Events); k != "lease.launched L1, lease.failed L2" || len(got.Changed) != 2 || len(got.Postponed) != 0 {
		t.Fatalf("acquire: events %q, %d changed, postponed %v", k, len(got.Changed), got.Postponed)
	}
	if fmt.Sprint(answered) != "[L1:sim-000001:false L2::true]" {
		t.Errorf("answers %v", answered)
	}
	if st.Leases[0].State != core.LeaseProvisioning || st.Leases[0].ProviderID != "sim-000001" || st.Leases[1].State != core.LeaseFailed || len(st.Refused) != 1 {
		t.Errorf("leases after acquire: %+v / %+v, refused %v", st.Leases[0].Lease, st.Leases[1].Lease, st.Refused)
	}
	if again := Acquire(ctx, st, cloud, t0, h); len(again.Changed) != 0 {
		t.Errorf("a second Acquire asked again for %d leases: nothing is requested any more", len(again.Changed))
	}
	clk.Advance(2 * time.Minute)
	evs, ended, err := Observe(ctx, st, cloud, clk.Now(), engine.Config{}, Hooks{})
	if err != nil || kinds(evs) != "lease.ready L1" || len(ended) != 0 || st.Leases[0].State != core.LeaseReady {
		t.Fatalf("observe: %q ended %v %v; L1 %s", kinds(evs), ended, err, st.Leases[0].State)
	}
}

// A lease whose bootstrap cannot be made, or whose acquisition fails for
// another reason than capacity, stays requested and is asked for again,
// with the same client token (one machine however often asked).
func TestAcquirePostponed(t *testing.T) {
	st, cloud, _ := world(t)
	ctx := context.Background()
	failing := true
	h := Hooks{Bootstrap: func(le *engine.Lease) (provider.Bootstrap, error) {
		if failing {
			return provider.Bootstrap{}, errors.New("no join token (injected)")
		}
		return provider.Bootstrap{LeaseID: le.ID}, nil
	}}
	got := Acquire(ctx, st, cloud, t0, h)
	if len(got.Postponed) != 2 || len(got.Changed) != 0 || len(cloud.Machines()) != 0 || st.Leases[0].State != core.LeaseRequested {
		t.Fatalf("with no bootstrap: postponed %v, changed %d, %d machines", got.Postponed, len(got.Changed), len(cloud.Machines()))
	}
	failing = false
	got = Acquire(ctx, st, cloud, t0, h)
	if len(got.Postponed) != 0 || st.Leases[0].State != core.LeaseProvisioning || len(cloud.Machines()) != 1 {
		t.Fatalf("once the bootstrap is there: postponed %v, L1 %s, %d machines", got.Postponed, st.Leases[0].State, len(cloud.Machines()))
	}
}

// A release of a machine the provider no longer knows is no error; the
// others' errors come back by machine.
func TestReleaseUnknownMachine(t *testing.T) {
	_, cloud, _ := world(t)
	if errs := Release(context.Background(), cloud, []string{"sim-999999"}); len(errs) != 0 {
		t.Errorf("release of an unknown machine: %v", errs)
	}
}
