package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/kube"
	"github.com/gpufleet/gpufleet/internal/kubetest"
)

func TestJobsKubeFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"jobs", "-n", "research"}, "--namespace needs --kubernetes"},
		{[]string{"jobs", "--kubeconfig", "k"}, "--kubeconfig needs --kubernetes"},
		{[]string{"jobs", "--kubernetes", "--server", "http://x"}, "--server does not go with --kubernetes"},
		{[]string{"jobs", "--kubernetes", "--all"}, "--all does not go with --kubernetes"},
		{[]string{"jobs", "--kubernetes", "--state", "pending"}, `--state: invalid value "pending": want with --kubernetes, one of waiting, bound, running, succeeded, failed, terminating`},
		{[]string{"jobs", "--kubernetes", "--tier", "urgent"}, `--tier: invalid value "urgent": want core, regular or offline`},
		{[]string{"jobs", "--kubernetes", "--kube-team", "a"}, `--kube-team: invalid value "a": want NAMESPACE=TEAM`},
		{[]string{"jobs", "--kubernetes"}, "jobs --kubernetes: no --kubeconfig, no KUBECONFIG, and not in a cluster"},
		{[]string{"serve", "--dcgm-port", "9400"}, "--dcgm-port needs --kubernetes"},
		{[]string{"serve", "--kubernetes", "--dcgm-port", "0"}, `--dcgm-port: invalid value "0": want a TCP port, 1..65535`},
		{[]string{"serve", "--kubernetes", "--dcgm-selector", "app in ("}, `--dcgm-selector: invalid value "app in (": want a non-empty Kubernetes label selector`},
		{[]string{"serve", "--kubernetes", "--dcgm-path", "metrics"}, `--dcgm-path: invalid value "metrics": want a URL path starting with /`},
		{[]string{"serve", "--kubernetes", "--dcgm-interval", "10ms"}, `--dcgm-interval: invalid value "10ms": want a duration from 1s to 1h`},
		{[]string{"serve", "--kubernetes", "--dcgm=false", "--dcgm-port", "1"}, "--dcgm-port needs --dcgm (it is off)"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.err) {
			t.Errorf("gpufleet %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.err)
		}
	}
}

// TestJobsKubernetes lists gpufleet's pods of a real test cluster with
// `gpufleet jobs --kubernetes`: a running pod, one waiting with
// gpufleet's reason in its PodScheduled=False condition, one gpufleet
// cannot read (its problem as the reason), one succeeded, in two
// namespaces (one mapped to another team), and another scheduler's pod
// left out; then the namespace, state and team filters and --json.
func TestJobsKubernetes(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, map[string]string{kube.LabelGPUProduct: "NVIDIA-A100-SXM4-80GB"},
		corev1.ResourceList{kube.ResourceGPU: resource.MustParse("8")})
	ctx := context.Background()
	for _, ns := range []string{"research", "speech"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(ns, name string, gpus int, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
			Spec: corev1.PodSpec{SchedulerName: kube.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}}}
	}
	train := pod("research", "train", 4, map[string]string{kube.KeyTier: "core"})
	train.Spec.NodeName = "gpu-0"
	sweep := pod("research", "sweep", 8, map[string]string{kube.KeyTier: "offline"})
	bad := pod("research", "bad", 1, map[string]string{kube.KeyTier: "urgent"})
	asr := pod("speech", "asr", 1, map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": "1s"})
	asr.Spec.NodeName = "gpu-0"
	other := pod("research", "other", 2, nil)
	other.Spec.SchedulerName = "default-scheduler"
	other.Spec.NodeName = "gpu-0"
	var created []time.Time
	for _, p := range []*corev1.Pod{train, sweep, bad, asr, other} {
		got, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, got.CreationTimestamp.Time)
		if p.Name == "sweep" {
			// What gpufleet's scheduler writes of a pod that waits.
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": got.UID}, "status": map[string]any{"conditions": []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now(),
				Message: kube.ReasonText("no room for 1×8000 milli-GPU on [NVIDIA-A100-SXM4-80GB]")}}}})
			if _, err := c.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		a, err1 := c.Client.CoreV1().Pods("speech").Get(ctx, "asr", metav1.GetOptions{})
		tr, err2 := c.Client.CoreV1().Pods("research").Get(ctx, "train", metav1.GetOptions{})
		if err1 == nil && err2 == nil && a.Status.Phase == corev1.PodSucceeded && tr.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("asr not succeeded and train not running within 30 s: %v %v", a.Status.Phase, tr.Status.Phase)
		}
	}
	// AGE from a clock 3 hours after the last creation: every pod was
	// made within the minute, so each reads 3h.
	last := created[0]
	for _, at := range created {
		if at.After(last) {
			last = at
		}
	}
	if last.Sub(created[0]) >= time.Minute {
		t.Fatalf("pods made over %s: the ages would differ", last.Sub(created[0]))
	}
	kubeNow = func() time.Time { return last.Add(3 * time.Hour) }
	t.Cleanup(func() { kubeNow = time.Now })
	t.Setenv("KUBECONFIG", "")
	base := []string{"jobs", "--kubernetes", "--kubeconfig", c.Kubeconfig, "--kube-team", "speech=nlp"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `NAMESPACE  NAME   TEAM      TIER     GPUS  STATE      NODE   AGE  WAITING
research   bad    research  regular  1     waiting    -      3h   gpufleet.io/tier: invalid value "urgent": want core, regular or offline
research   sweep  research  offline  8     waiting    -      3h   no room for 1×8000 milli-GPU on [NVIDIA-A100-SXM4-80GB]
research   train  research  core     4     running    gpu-0  3h   -
speech     asr    nlp       regular  1     succeeded  gpu-0  3h   -
`},
		{[]string{"-n", "speech"}, `NAMESPACE  NAME  TEAM  TIER     GPUS  STATE      NODE   AGE  WAITING
speech     asr   nlp   regular  1     succeeded  gpu-0  3h   -
`},
		{[]string{"--state", "waiting,running", "--tier", "offline"}, `NAMESPACE  NAME   TEAM      TIER     GPUS  STATE    NODE  AGE  WAITING
research   sweep  research  offline  8     waiting  -     3h   no room for 1×8000 milli-GPU on [NVIDIA-A100-SXM4-80GB]
`},
		{[]string{"--team", "nlp", "--state", "running"}, "NAMESPACE  NAME  TEAM  TIER  GPUS  STATE  NODE  AGE  WAITING\n"},
	} {
		code, stdout, stderr := runCLI(t, append(base, tc.args...)...)
		if code != 0 {
			t.Fatalf("jobs %v: exit %d: %s", tc.args, code, stderr)
		}
		if d := cmp.Diff(tc.want, stdout); d != "" {
			t.Errorf("jobs --kubernetes %v (-want +got):\n%s", tc.args, d)
		}
	}
	code, stdout, stderr := runCLI(t, append(base, "--json", "-n", "research", "--state", "running")...)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var page struct{ Pods []kube.PodRow }
	if err := json.Unmarshal([]byte(stdout), &page); err != nil {
		t.Fatalf("--json: %v: %s", err, stdout)
	}
	if len(page.Pods) != 1 || page.Pods[0].Name != "train" || page.Pods[0].Node != "gpu-0" || page.Pods[0].GPUs != 4 || page.Pods[0].Tier != "core" || !page.Pods[0].Created.Equal(created[0]) {
		t.Errorf("--json: %+v; want train, core, 4 GPUs on gpu-0, created %s", page.Pods, created[0])
	}
}
