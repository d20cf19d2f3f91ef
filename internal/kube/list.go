package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// The states of a pod as `gpufleet jobs --kubernetes` lists it.
const (
	PodWaiting     = "waiting"     // not bound: gpufleet has not placed it (Waiting says why)
	PodBound       = "bound"       // bound to a node, not running yet
	PodRunning     = "running"     // running on its node
	PodSucceeded   = "succeeded"   // ended, exit 0
	PodFailed      = "failed"      // ended otherwise
	PodTerminating = "terminating" // being deleted (an eviction's grace period)
)

// PodRow is one of gpufleet's pods as a listing shows it: Kubernetes
// mode keeps no store, so its jobs are the pods the apiserver holds.
type PodRow struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Team      string    `json:"team"`
	Tier      string    `json:"tier"`
	GPUs      int       `json:"gpus"`
	State     string    `json:"state"`
	Node      string    `json:"node,omitempty"`
	Created   time.Time `json:"created"`
	// Waiting is why an unbound pod waits: the message of its
	// PodScheduled=False condition (gpufleet's reason, without the
	// "gpufleet: " prefix), or "" when none is written yet.
	Waiting string `json:"waiting,omitempty"`
	// Problem is what gpufleet cannot read of the pod (a bad annotation):
	// its team and tier are then the defaults.
	Problem string `json:"problem,omitempty"`
}

// ListPods lists the pods that name gpufleet (o's scheduler name) in
// spec.schedulerName, in namespace ("" for all), by namespace and name.
func ListPods(ctx context.Context, client kubernetes.Interface, namespace string, o Options) ([]PodRow, error) {
	l, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.schedulerName", o.schedulerName()).String()})
	if err != nil {
		return nil, fmt.Errorf("kube: list pods: %w", err)
	}
	pods := make([]*corev1.Pod, 0, len(l.Items))
	for i := range l.Items {
		pods = append(pods, &l.Items[i])
	}
	return PodRows(pods, o), nil
}

// PodRows makes the rows of the pods that name gpufleet, by namespace
// and name.
func PodRows(pods []*corev1.Pod, o Options) []PodRow {
	var out []PodRow
	for _, p := range pods {
		if p.Spec.SchedulerName != o.schedulerName() {
			continue
		}
		r := PodRow{Namespace: p.Namespace, Name: p.Name, Team: o.Team(p.Namespace), Tier: "regular", GPUs: PodGPUs(p),
			Node: p.Spec.NodeName, Created: p.CreationTimestamp.Time}
		if s, err := PodSpec(p, o); err == nil {
			r.Team, r.Tier = s.Team, string(s.Tier)
		} else {
			r.Problem = err.Error()
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			r.State = PodSucceeded
		case p.Status.Phase == corev1.PodFailed:
			r.State = PodFailed
		case p.DeletionTimestamp != nil:
			r.State = PodTerminating
		case p.Spec.NodeName == "":
			r.State = PodWaiting
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					r.Waiting = strings.TrimPrefix(c.Message, ReasonText(""))
				}
			}
		case p.Status.Phase == corev1.PodRunning:
			r.State = PodRunning
		default:
			r.State = PodBound
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
