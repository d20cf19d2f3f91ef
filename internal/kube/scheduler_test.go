package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestAssume: a binding or an eviction the informer does not show yet
// counts as done in the next step, and is forgotten once it shows (or
// the pod is gone), so a node is never filled twice.
func TestAssume(t *testing.T) {
	s := &Scheduler{assumed: map[types.UID]string{}, evicted: map[types.UID]time.Time{}}
	bound, victim, gone := gpuPod("r", "bound", 1), gpuPod("r", "victim", 1).on("n1"), gpuPod("r", "gone", 1)
	s.assumed[bound.UID] = "n1"
	s.assumed[gone.UID] = "n2"
	s.evicted[victim.UID] = t0
	view := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range s.assume(pods, t0) {
			out = append(out, p.Name+"@"+p.Spec.NodeName+" deleting="+map[bool]string{true: "yes", false: "no"}[p.DeletionTimestamp != nil])
		}
		return out
	}
	got := view([]*corev1.Pod{bound.Pod, victim.Pod})
	if d := cmp.Diff([]string{"bound@n1 deleting=no", "victim@n1 deleting=yes"}, got); d != "" {
		t.Errorf("first step (-want +got):\n%s", d)
	}
	if bound.Spec.NodeName != "" || victim.DeletionTimestamp != nil {
		t.Error("assume changed the informer's objects; it must work on copies")
	}
	if _, ok := s.assumed[gone.UID]; ok {
		t.Error("the assumption about a pod that is gone is kept")
	}
	// The informer catches up: the assumptions go.
	caught := bound.DeepCopy()
	caught.Spec.NodeName = "n1"
	deleting := victim.DeepCopy()
	deleting.DeletionTimestamp = victim.CreationTimestamp.DeepCopy()
	view([]*corev1.Pod{caught, deleting})
	if len(s.assumed) != 0 || len(s.evicted) != 0 {
		t.Errorf("assumed %v, evicted %v after the informer showed both; want none", s.assumed, s.evicted)
	}
}
