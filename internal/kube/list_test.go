package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRows: each state a listing shows, the waiting reason from the
// PodScheduled=False condition, the team map, and another scheduler's
// pod left out (TestJobsKubernetes in cmd/gpufleet runs it on a cluster).
func TestPodRows(t *testing.T) {
	now := metav1.NewTime(t0)
	waiting := gpuPod("speech", "w", 2).label(KeyTier, "offline").Pod
	waiting.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: ReasonText("quota of team nlp")}}
	bound := gpuPod("research", "b", 1).on("gpu-0").Pod
	bound.Status.Phase = corev1.PodPending
	running := gpuPod("research", "r", 4).on("gpu-0").Pod
	running.Status.Phase = corev1.PodRunning
	failed := gpuPod("research", "f", 1).on("gpu-0").Pod
	failed.Status.Phase = corev1.PodFailed
	ending := gpuPod("research", "e", 8).on("gpu-1").ann(KeyInterruptible, "true").Pod
	ending.Status.Phase, ending.DeletionTimestamp = corev1.PodRunning, &now
	other := gpuPod("research", "o", 1).scheduler("default-scheduler").Pod
	got := PodRows([]*corev1.Pod{waiting, bound, running, failed, ending, other}, Options{Teams: map[string]string{"speech": "nlp"}})
	want := []PodRow{
		{Namespace: "research", Name: "b", Team: "research", Tier: "regular", GPUs: 1, State: PodBound, Node: "gpu-0", Created: t0},
		{Namespace: "research", Name: "e", Team: "research", Tier: "regular", GPUs: 8, State: PodTerminating, Node: "gpu-1", Created: t0},
		{Namespace: "research", Name: "f", Team: "research", Tier: "regular", GPUs: 1, State: PodFailed, Node: "gpu-0", Created: t0},
		{Namespace: "research", Name: "r", Team: "research", Tier: "regular", GPUs: 4, State: PodRunning, Node: "gpu-0", Created: t0},
		{Namespace: "speech", Name: "w", Team: "nlp", Tier: "offline", GPUs: 2, State: PodWaiting, Created: t0, Waiting: "quota of team nlp"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
