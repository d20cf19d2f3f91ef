package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
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
	m.observe(st, 0)
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
