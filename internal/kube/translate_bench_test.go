package kube

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/gpufleet/internal/engine"
)

// BenchmarkStepPending is one step of the loop without the cluster:
// Build over 1,000 nodes of 8 GPUs and 5,000 waiting one-GPU pods (the
// first step of BenchmarkClusterBind's gpufleet run), engine.Step and
// Actions.
func BenchmarkStepPending(b *testing.B) {
	const nodes, pods = 1000, 5000
	var ns []*corev1.Node
	for i := range nodes {
		ns = append(ns, gpuNode(fmt.Sprintf("gpu-%d", i), 8, a100).Node)
	}
	var ps []*corev1.Pod
	for i := range pods {
		ps = append(ps, gpuPod("bench", fmt.Sprintf("p-%d", i), 1).Pod)
	}
	cfg := engine.Config{NoAcquire: true, NoRelease: true}
	b.ResetTimer()
	for b.Loop() {
		w := Build(ns, ps, Options{})
		a := w.Actions(engine.Step(w.State, t0, cfg))
		if len(a.Binds) != pods {
			b.Fatalf("%d pods bound of %d", len(a.Binds), pods)
		}
	}
}
