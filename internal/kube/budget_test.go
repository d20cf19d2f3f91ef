package kube

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// TestPreemptionUnderBudgetKeepsStepping: a victim a PodDisruptionBudget
// protects answers the eviction with 429; the loop logs it and steps on
// (the next step asks again), instead of waiting out client-go's ten
// Retry-After retries (100 s) with its lock held. The victim keeps
// running and the preemptor waits while the budget holds.
func TestPreemptionUnderBudgetKeepsStepping(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	namespace(t, c, "ml")
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100}, gpus(8))
	create(t, c, gpuPod("ml", "batch", 8).label(KeyTier, "offline").label("app", "batch").ann(KeyInterruptible, "true").Pod)
	one := intstr.FromInt32(1)
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("ml").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "batch"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logged syncBuffer
	s, err := New(Config{Client: c.Client, Engine: engine.Config{Sched: sched.Config{MinRuntime: time.Millisecond}},
		Tick: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// No disruption controller runs here: the budget's status is never
	// computed, and the API refuses every eviction it covers (429).
	eventually(t, 30*time.Second, "batch running", func() (bool, string) {
		p := getPod(t, c, "ml", "batch")
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	create(t, c, gpuPod("ml", "serve", 8).label(KeyTier, "core").Pod)
	time.Sleep(time.Second) // the preemption is tried
	before := s.Steps()
	time.Sleep(3 * time.Second)
	if n := s.Steps() - before; n < 5 {
		t.Errorf("%d steps in 3 s of 200 ms ticks while the eviction is refused: the loop waits on it", n)
	}
	if p := getPod(t, c, "ml", "batch"); p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("batch %s (deleting %v) though its budget forbids the eviction", p.Status.Phase, p.DeletionTimestamp != nil)
	}
	if p := getPod(t, c, "ml", "serve"); p.Spec.NodeName != "" {
		t.Errorf("serve bound to %s while batch holds the node", p.Spec.NodeName)
	}
	// Asked again at every step, said once a minute.
	if n := strings.Count(logged.String(), "eviction failed"); n != 1 {
		t.Errorf("the refused eviction logged %d times in 4 s, want once:\n%s", n, logged.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the log's writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
