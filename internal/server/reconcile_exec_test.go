package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider/exec"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// TestRestartMachineReadyAfterReconcile is the window
// TestServeKill9DuringAcquisitions (cmd/gpufleet) hit under CPU load,
// made deterministic: the server is restarted over a lease whose machine
// is still provisioning when Reconcile lists it, and is ready by the
// first tick's Poll. The lease must become ready; it used to stay
// provisioning for good, because the exec provider's first Poll recorded
// the machine as already seen in its new state and no later poll
// reported a change.
func TestRestartMachineReadyAfterReconcile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The machine as the provider shows it: provisioning at the first
	// call (Reconcile's list), ready at every later one.
	calls := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "provider.sh")
	body := `#!/usr/bin/env bash
cat >/dev/null
n=$(cat ` + calls + ` 2>/dev/null || echo 0); echo $((n + 1)) > ` + calls + `
state=ready; ready=',"ready_at":"2026-03-02T09:02:00Z"'
if [ "$n" -eq 0 ]; then state=provisioning ready=""; fi
m='{"provider_id":"m1","client_token":"L1","offer":"test/r1/a100x1","mode":"on-demand","state":"'$state'","launched_at":"2026-03-02T09:00:00Z"'$ready'}'
case "$1" in
list) echo '{"machines":['$m']}' ;;
release) echo '{}' ;;
*) echo '{"machine":'$m'}' ;;
esac
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loop.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// What the killed server left: lease L1 launched as machine m1,
	// provisioning.
	sl := store.Lease{Lease: core.Lease{ID: "L1", OfferID: "test/r1/a100x1", Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: "L1"}, Requested: t0}
	if err := st.Leases().CreateLease(ctx, sl); err != nil {
		t.Fatal(err)
	}
	sl.State, sl.ProviderID, sl.Start = core.LeaseProvisioning, "m1", t0
	if err := st.Leases().UpdateLease(ctx, sl); err != nil {
		t.Fatal(err)
	}

	p, err := exec.New(exec.Config{Script: script, Timeout: 10 * time.Second, PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(t0.Add(3 * time.Minute))
	loop, err := NewLoop(Config{Store: st, Provider: p, Offers: hourly(), Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: engine.Config{}, Executor: VirtualTime{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Leases().GetLease(ctx, "L1"); err != nil || got.State != core.LeaseProvisioning {
		t.Fatalf("after reconcile: %+v %v, want L1 provisioning (the provider listed m1 provisioning)", got, err)
	}
	for range 5 {
		if err := loop.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(DefaultTick)
	}
	got, err := st.Leases().GetLease(ctx, "L1")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != core.LeaseReady || !got.ReadyAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("lease L1 is %s (ready at %s) after 5 ticks; machine m1 has been ready since %s", got.State, got.ReadyAt, t0.Add(2*time.Minute))
	}
}
