package kubetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func pod(name, node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:  "train",
				Image: "example.invalid/train:1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gpu: resource.MustParse("2")},
					Limits:   corev1.ResourceList{gpu: resource.MustParse("2")},
				},
			}},
		},
	}
}

// waitPod polls the pod until ok says yes or 30 seconds pass.
func waitPod(t *testing.T, c kubernetes.Interface, name string, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *corev1.Pod
	for time.Now().Before(deadline) {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod %s never %s; last status %+v", name, what, last.Status)
	return nil
}

func TestClusterRunsAndCompletesPodsOnKWOKNodes(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()

	c.AddNodes(t, "gpu", 3, map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		corev1.ResourceList{gpu: resource.MustParse("8")})
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "nvidia.com/gpu.product"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("got %d GPU nodes, want 3", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if q := n.Status.Allocatable[gpu]; q.Value() != 8 {
			t.Errorf("node %s: allocatable %s = %s, want 8", n.Name, gpu, q.String())
		}
	}

	// A node KWOK does not manage (no annotation), and a pod bound to it.
	plain := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain-0"}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{
		pod("untouched", "plain-0", nil),
		pod("runs", "gpu-0", nil),
		pod("finishes", "gpu-1", map[string]string{kubetest.PodCompleteDelay: "1s"}),
		pod("fails", "gpu-2", map[string]string{kubetest.PodFailDelay: "1s"}),
	} {
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}

	running := waitPod(t, c.Client, "runs", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if running.Status.PodIP == "" || running.Status.StartTime == nil {
		t.Errorf("running pod: podIP %q, startTime %v; want both set", running.Status.PodIP, running.Status.StartTime)
	}
	done := waitPod(t, c.Client, "finishes", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if cs := done.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("succeeded pod's container statuses %+v, want one terminated with exit code 0", cs)
	} else if ran := cs[0].State.Terminated.FinishedAt.Sub(cs[0].State.Terminated.StartedAt.Time); ran < time.Second-10*time.Millisecond {
		// RFC 3339 times have whole seconds: a 1s delay shows as 1s or 2s.
		t.Errorf("succeeded pod ran %s, want at least its 1s delay", ran)
	}
	failed := waitPod(t, c.Client, "fails", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if cs := failed.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 1 {
		t.Errorf("failed pod's container statuses %+v, want one terminated with exit code 1", cs)
	}
	// Still running well past the others' delays: no annotation, no end.
	if p, err := c.Client.CoreV1().Pods("default").Get(ctx, "runs", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod without a completion annotation: phase %v (err %v), want Running", p.Status.Phase, err)
	}

	// KWOK has long acted on its nodes' pods by now; the plain node's
	// pod and the plain node itself must be as created.
	u, err := c.Client.CoreV1().Pods("default").Get(ctx, "untouched", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Status.Phase != corev1.PodPending || u.Status.PodIP != "" || len(u.Status.ContainerStatuses) != 0 {
		t.Errorf("pod on a node KWOK does not manage: phase %s, podIP %q, %d container statuses; want Pending and untouched",
			u.Status.Phase, u.Status.PodIP, len(u.Status.ContainerStatuses))
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "plain-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.Conditions) != 0 {
		t.Errorf("node KWOK does not manage has conditions %+v, want none", n.Status.Conditions)
	}

	// Deleting a running pod on a KWOK node completes: KWOK confirms it
	// as a kubelet would.
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, "runs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, "runs", metav1.GetOptions{})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("deleted pod on a KWOK node is still there after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The kubeconfig file works on its own, and the admin is allowed
// everything under RBAC (system:masters).
func TestKubeconfigAdminUnderRBAC(t *testing.T) {
	c := kubetest.Start(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Get(context.Background(), "cluster-admin", metav1.GetOptions{}); err != nil {
		t.Fatalf("bootstrap RBAC role cluster-admin: %v", err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != kubetest.KubeVersion {
		t.Errorf("server version %s, want %s", v.GitVersion, kubetest.KubeVersion)
	}
}

// The stock kube-scheduler places an unbound pod on a KWOK node with
// room, where it runs, and leaves one that fits nowhere Pending.
func TestKubeSchedulerPlacesOnKWOKNodes(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 2, nil, corev1.ResourceList{gpu: resource.MustParse("8")})
	c.StartKubeScheduler(t)
	ctx := context.Background()
	fits, tooBig := pod("fits", "", nil), pod("too-big", "", nil)
	fits.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("8")
	fits.Spec.Containers[0].Resources.Limits[gpu] = resource.MustParse("8")
	tooBig.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("9")
	tooBig.Spec.Containers[0].Resources.Limits[gpu] = resource.MustParse("9")
	for _, p := range []*corev1.Pod{fits, tooBig} {
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := waitPod(t, c.Client, "fits", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if p.Spec.NodeName != "gpu-0" && p.Spec.NodeName != "gpu-1" {
		t.Errorf("pod placed on %q, want a gpu node", p.Spec.NodeName)
	}
	waitPod(t, c.Client, "too-big", "marked unschedulable", func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return p.Spec.NodeName == ""
			}
		}
		return false
	})

	// Its CPU time is read while it runs; stopped, it places nothing
	// more, and the rest of the cluster runs on.
	if d, err := c.CPUTime("kube-scheduler"); err != nil || d <= 0 {
		t.Errorf("kube-scheduler CPU time %s, %v; want > 0", d, err)
	}
	c.StopProgram("kube-scheduler")
	if _, err := c.CPUTime("kube-scheduler"); err == nil {
		t.Error("CPU time of a stopped kube-scheduler read without error")
	}
	later := pod("later", "", nil)
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if p, err := c.Client.CoreV1().Pods("default").Get(ctx, "later", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("pod made after StopProgram: node %q (err %v); want unbound", p.Spec.NodeName, err)
	}
	if d, err := c.CPUTime("kube-apiserver"); err != nil || d <= 0 {
		t.Errorf("kube-apiserver CPU time %s, %v; want > 0", d, err)
	}
}

// A change reaches the watchers within seconds, not at their next
// relist: KWOK runs a pod bound to its node, and an informer hears of
// each step. The apiserver runs with WatchList off, which etcd 3.4
// cannot serve; with it on, such steps took 5 to 25 s each.
func TestWatchersSeeChangesPromptly(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, nil, corev1.ResourceList{gpu: resource.MustParse("8")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan string, 16)
	f := informers.NewSharedInformerFactory(c.Client, 0)
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			if p := o.(*corev1.Pod); p.Status.Phase == corev1.PodRunning {
				select {
				case running <- p.Name:
				default:
				}
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }() // Shutdown waits for the informers, which end with ctx
	f.WaitForCacheSync(ctx.Done())
	const limit = 3 * time.Second
	var worst time.Duration
	for i := range 5 {
		name := fmt.Sprintf("watched-%d", i)
		start := time.Now()
		p := pod(name, "", nil)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Target: corev1.ObjectReference{Kind: "Node", Name: "gpu-0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	wait:
		for {
			select {
			case got := <-running:
				if got == name {
					break wait
				}
			case <-time.After(limit - time.Since(start)):
				t.Fatalf("pod %s not seen Running within %s of its binding", name, limit)
			}
		}
		worst = max(worst, time.Since(start))
	}
	t.Logf("slowest of 5 pods seen Running %s after its creation", worst.Round(time.Millisecond))
}
