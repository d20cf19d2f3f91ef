package kube

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

// gauge reads the value of family name with the given label values from
// reg; ok is false when there is no such series.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestMetrics: Kubernetes mode's collector says what the cluster shows:
// gpufleet's pods waiting and bound by tier, how long the oldest waiting
// one has waited, the GPUs of the schedulable nodes and those allocated
// (a pod another scheduler placed included), and the steps.
func TestMetrics(t *testing.T) {
	c := kubetest.Start(t)
	namespace(t, c, "ml")
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100}, gpus(8))
	create(t, c, gpuPod("ml", "other", 2).scheduler("someone-else").on("gpu-0").Pod)
	create(t, c, gpuPod("ml", "fits", 4).label(KeyTier, "core").Pod)
	create(t, c, gpuPod("ml", "too-big", 16).label(KeyTier, "offline").Pod)

	s, err := New(Config{Client: c.Client, Tick: 100 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	val := func(name string, labels map[string]string) float64 {
		v, _ := gauge(t, reg, name, labels)
		return v
	}
	eventually(t, 30*time.Second, "fits bound, too-big waiting", func() (bool, string) {
		bound := val("gpufleet_kube_pods", map[string]string{"tier": "core", "state": "bound"})
		waiting := val("gpufleet_kube_pods", map[string]string{"tier": "offline", "state": "waiting"})
		return bound == 1 && waiting == 1, fmt.Sprintf("core bound %v, offline waiting %v", bound, waiting)
	})
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpufleet_kube_pods", map[string]string{"tier": "core", "state": "waiting"}, 0},
		{"gpufleet_kube_pods", map[string]string{"tier": "offline", "state": "bound"}, 0},
		{"gpufleet_kube_gpus", map[string]string{"model": a100, "state": "allocatable"}, 8},
		{"gpufleet_kube_gpus", map[string]string{"model": a100, "state": "allocated"}, 6},
		{"gpufleet_kube_oldest_wait_seconds", map[string]string{"tier": "core"}, 0},
	} {
		if got := val(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if w := val("gpufleet_kube_oldest_wait_seconds", map[string]string{"tier": "offline"}); w <= 0 || w > 120 {
		t.Errorf("the offline pod's wait: %v s, want since its creation, under the test's length", w)
	}
	if n := val("gpufleet_kube_steps_total", nil); n < 1 {
		t.Errorf("steps %v, want some", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
}
