package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestMetricsGPUSlices: the paid and idle GPU gauges count a quarter-GPU
// machine as 0.25 GPUs.
func TestMetricsGPUSlices(t *testing.T) {
	plan := &core.PricePlan{Mode: core.OnDemand, Price: core.MicrosPerUnit, Per: core.Hour, Granularity: 1}
	quarter := &core.Offer{ID: "q", GPUModel: "NVIDIA L4", GPUs: 1, SliceMilli: 250, Currency: "USD"}
	eight := &core.Offer{ID: "e", GPUModel: "H100", GPUs: 8, Currency: "USD"}
	st := &engine.State{Leases: []*engine.Lease{
		{Lease: core.Lease{ID: "L1", Mode: core.OnDemand, State: core.LeaseReady}, Offer: quarter, Plan: plan},
		{Lease: core.Lease{ID: "L2", Mode: core.OnDemand, State: core.LeaseReady}, Offer: eight, Plan: plan},
	}}
	m := newMetrics()
	m.observe(st, nil, time.Time{}, 0)
	if got := gauge(t, m.gpusPaid); got != 8.25 {
		t.Errorf("gpufleet_gpus_paid %v, want 8.25", got)
	}
	if got := gauge(t, m.idleGPUs); got != 8.25 {
		t.Errorf("gpufleet_gpus_idle_leases %v, want 8.25", got)
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestMetricsForAlerts: the series the alert rules in deploy/prometheus
// page on are set from the state: the oldest booting lease's age, leases
// by how soon they are billed again, agents by state, budgets and spend.
func TestMetricsForAlerts(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	plan := &core.PricePlan{Mode: core.OnDemand, Price: 2 * core.MicrosPerUnit, Per: core.Hour, Granularity: 3600}
	gpu := &core.Offer{ID: "g", GPUModel: "L4", GPUs: 1, Currency: "USD"}
	lease := func(id string, s core.LeaseState, started time.Duration) *engine.Lease {
		return &engine.Lease{Lease: core.Lease{ID: id, Mode: core.OnDemand, State: s, Start: now.Add(-started)}, Offer: gpu, Plan: plan}
	}
	st := &engine.State{
		Leases: []*engine.Lease{
			lease("boot-old", core.LeaseProvisioning, 12*time.Minute), // next boundary in 48 min
			lease("boot-new", core.LeaseProvisioning, 1*time.Minute),  // in 59 min
			lease("ready", core.LeaseReady, 57*time.Minute),           // in 3 min
			lease("gone", core.LeaseReleased, 2*time.Hour),            // not live
			{Lease: core.Lease{ID: "asked", Mode: core.OnDemand, State: core.LeaseRequested}, Offer: gpu, Plan: plan},
		},
		Teams: []core.Team{{ID: "ml", MonthlyBudget: 100 * core.MicrosPerUnit}, {ID: "free"}},
		Spent: map[string]core.Micros{"ml": 85 * core.MicrosPerUnit, "free": 7 * core.MicrosPerUnit},
	}
	agents := []store.Agent{{ID: "a1", State: store.AgentOK}, {ID: "a2", State: store.AgentDown}, {ID: "a3", State: store.AgentOK}}
	m := newMetrics()
	m.observe(st, agents, now, 0)
	want := `
# HELP gpufleet_agents Registered node agents by what the server believes of them (ok, suspect, down).
# TYPE gpufleet_agents gauge
gpufleet_agents{state="down"} 1
gpufleet_agents{state="ok"} 2
gpufleet_agents{state="suspect"} 0
# HELP gpufleet_fleet_leases_to_boundary Live launched leases by how soon their next billing boundary comes (within 5m, 15m, 1h, 1d, or later).
# TYPE gpufleet_fleet_leases_to_boundary gauge
gpufleet_fleet_leases_to_boundary{within="15m"} 0
gpufleet_fleet_leases_to_boundary{within="1d"} 0
gpufleet_fleet_leases_to_boundary{within="1h"} 2
gpufleet_fleet_leases_to_boundary{within="5m"} 1
gpufleet_fleet_leases_to_boundary{within="later"} 0
# HELP gpufleet_lease_oldest_boot_seconds How long the oldest provisioning lease has been booting since the provider launched it (0: none boots).
# TYPE gpufleet_lease_oldest_boot_seconds gauge
gpufleet_lease_oldest_boot_seconds 720
# HELP gpufleet_team_budget Each team's monthly budget in currency units (teams without a budget are not listed).
# TYPE gpufleet_team_budget gauge
gpufleet_team_budget{team="ml"} 100
# HELP gpufleet_team_spent What each team with a monthly budget has spent this month, in currency units.
# TYPE gpufleet_team_spent gauge
gpufleet_team_spent{team="ml"} 85
`
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.agents, m.boundary, m.booting, m.budget, m.spent)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestLeaderMetric: gpufleet_loop_leader is 1 while the loop leads and 0
// once it has stopped leading.
func TestLeaderMetric(t *testing.T) {
	w := newWorld(t)
	if got := gauge(t, w.loop.metrics.leader); got != 0 {
		t.Fatalf("before leading: gpufleet_loop_leader %v, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.loop.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for gauge(t, w.loop.metrics.leader) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("gpufleet_loop_leader never became 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if got := gauge(t, w.loop.metrics.leader); got != 0 {
		t.Errorf("after Run returned: gpufleet_loop_leader %v, want 0", got)
	}
}
