package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

// startRecreating runs a Scheduler as client until stop (or the test's
// end); afterEvict, when set, runs once each eviction is posted, given
// the loop's cancel.
func startRecreating(t *testing.T, client kubernetes.Interface, afterEvict func(stop func())) (stop func()) {
	t.Helper()
	return runScheduler(t, testConfig(t, client), afterEvict)
}

func records(t *testing.T, c *kubetest.Cluster) []corev1.ConfigMap {
	t.Helper()
	l, err := c.Client.CoreV1().ConfigMaps(ReservationNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: LabelRecreate})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestClusterRecreateAcrossRestart: a bare pod gpufleet preempts is
// recorded in the cluster before the eviction; the scheduler stops
// right after posting the eviction, before recreating it; a new
// Scheduler reads the record, makes the pod again (once, with its spec)
// and deletes the record. A record left by a crash after the create (the
// pod exists with another UID) is only deleted, and a record of a pod
// whose eviction was never posted (the pod runs on) is dropped.
func TestClusterRecreateAcrossRestart(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100}, gpus(8))
	namespace(t, c, "ml")
	client := deployedRole(t, c) // also makes gpufleet-system, where the records are
	ctx := context.Background()

	evicted := make(chan struct{})
	stop1 := startRecreating(t, client, func(stop func()) {
		stop() // cancels: the loop ends after this step, before any recreation
		select {
		case <-evicted:
		default:
			close(evicted)
		}
	})
	batch := gpuPod("ml", "batch", 8).label(KeyTier, "offline").ann(KeyInterruptible, "true").label("app", "train")
	batch.Spec.Containers[0].Command = []string{"train", "--resume"}
	create(t, c, batch.Pod)
	eventually(t, 30*time.Second, "batch running", func() (bool, string) {
		p := getPod(t, c, "ml", "batch")
		return p != nil && p.Status.Phase == corev1.PodRunning, ""
	})
	first := getPod(t, c, "ml", "batch")

	create(t, c, gpuPod("ml", "serve", 8).label(KeyTier, "core").Pod)
	// The first scheduler posts the eviction and stops at once.
	select {
	case <-evicted:
	case <-time.After(30 * time.Second):
		t.Fatal("batch not evicted")
	}
	stop1()
	eventually(t, 30*time.Second, "batch evicted and gone", func() (bool, string) {
		p := getPod(t, c, "ml", "batch")
		return p == nil, "batch still there"
	})
	rs := records(t, c)
	if len(rs) != 1 || rs[0].Data["pod"] != "ml/batch" || rs[0].Data["uid"] != string(first.UID) {
		t.Fatalf("records after the eviction: %+v; want one for ml/batch, uid %s", rs, first.UID)
	}
	saved := rs[0].DeepCopy()
	time.Sleep(time.Second)
	if p := getPod(t, c, "ml", "batch"); p != nil {
		t.Fatalf("batch made again by the stopped scheduler: %s", p.UID)
	}

	// A new process recreates it from the record.
	stop2 := startRecreating(t, client, nil)
	var again *corev1.Pod
	eventually(t, 30*time.Second, "batch recreated by the new scheduler, record deleted", func() (bool, string) {
		again = getPod(t, c, "ml", "batch")
		n := len(records(t, c))
		if again == nil {
			return false, "not made again"
		}
		return n == 0, fmt.Sprintf("%d records", n)
	})
	if again.UID == first.UID || again.Annotations[KeyPreemptions] != "1" || again.Labels["app"] != "train" ||
		len(again.Spec.Containers) != 1 || len(again.Spec.Containers[0].Command) != 2 || again.Spec.Containers[0].Command[1] != "--resume" ||
		!again.Spec.Containers[0].Resources.Limits[ResourceGPU].Equal(first.Spec.Containers[0].Resources.Limits[ResourceGPU]) {
		t.Fatalf("recreated pod: uid %s (first %s), annotations %v, labels %v, containers %+v", again.UID, first.UID, again.Annotations, again.Labels, again.Spec.Containers)
	}
	time.Sleep(2 * time.Second)
	if p := getPod(t, c, "ml", "batch"); p == nil || p.UID != again.UID {
		t.Fatalf("batch made more than once: %v", p)
	}
	stop2()

	// A crash after the create, before the record's delete: the record
	// is there, the pod exists with another UID. And a record written
	// for serve, whose eviction was never posted.
	saved.ResourceVersion, saved.UID = "", ""
	if _, err := c.Client.CoreV1().ConfigMaps(ReservationNamespace).Create(ctx, saved, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	serve := getPod(t, c, "ml", "serve")
	never := saved.DeepCopy()
	never.Name = recordName("ml/serve")
	never.Data = map[string]string{"pod": "ml/serve", "uid": string(serve.UID), "pod.json": `{"metadata":{"namespace":"ml","name":"serve"}}`}
	if _, err := c.Client.CoreV1().ConfigMaps(ReservationNamespace).Create(ctx, never, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startRecreating(t, client, nil)
	eventually(t, 30*time.Second, "stale records deleted", func() (bool, string) {
		n := len(records(t, c))
		return n == 0, ""
	})
	if p := getPod(t, c, "ml", "batch"); p == nil || p.UID != again.UID || p.Annotations[KeyPreemptions] != "1" {
		t.Fatalf("batch after a stale record: %v; want %s untouched", p, again.UID)
	}
	if p := getPod(t, c, "ml", "serve"); p == nil || p.UID != serve.UID || p.DeletionTimestamp != nil {
		t.Fatalf("serve after a record of an eviction never posted: %v; want %s untouched", p, serve.UID)
	}
}

// TestClusterNodeGone: a bare pod of gpufleet's on a node that is
// deleted (a spot reclaim) is deleted and made again, and placed on
// the node that remains.
func TestClusterNodeGone(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "spot", 1, map[string]string{LabelGPUProduct: a100}, gpus(1))
	namespace(t, c, "ml")
	client := deployedRole(t, c)
	startRecreating(t, client, nil)
	create(t, c, gpuPod("ml", "job", 1).Pod)
	eventually(t, 30*time.Second, "job running on spot-0", func() (bool, string) {
		p := getPod(t, c, "ml", "job")
		return p != nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == "spot-0", ""
	})
	first := getPod(t, c, "ml", "job")
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100}, gpus(1))
	if err := c.Client.CoreV1().Nodes().Delete(context.Background(), "spot-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "job made again on gpu-0", func() (bool, string) {
		p := getPod(t, c, "ml", "job")
		if p == nil {
			return false, "gone"
		}
		return p.UID != first.UID && p.Spec.NodeName == "gpu-0" && len(records(t, c)) == 0, p.Spec.NodeName + " " + condOf(p)
	})
	var lost bool
	for _, e := range events(t, c, "ml", "job") {
		lost = lost || (e.Reason == "NodeLost" && e.InvolvedObject.UID == first.UID)
	}
	if !lost {
		t.Error("no NodeLost event on the pod")
	}
}

// TestClusterGangBindFailed: one pod of a gang is deleted between the
// decision and its binding, so that binding fails; the pod bound is
// evicted (a GangUnbound event says why) and made again, so the gang is
// not left holding half its GPUs; once the missing pod is back, the
// gang is placed whole.
func TestClusterGangBindFailed(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100}, gpus(8))
	namespace(t, c, "ml")
	client := deployedRole(t, c)
	s, err := New(Config{Client: client, Tick: 250 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	s.beforeBind = func(b Bind) {
		if b.Pod.Name != "g-1" {
			return
		}
		once.Do(func() {
			zero := int64(0)
			if err := c.Client.CoreV1().Pods("ml").Delete(context.Background(), "g-1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Errorf("deleting g-1 mid-gang: %v", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	g1 := gpuPod("ml", "g-1", 4).gang("g", 2)
	create(t, c, gpuPod("ml", "g-0", 4).gang("g", 2).Pod)
	create(t, c, g1.DeepCopy())
	var first *corev1.Pod
	eventually(t, 30*time.Second, "g-0 bound and evicted", func() (bool, string) {
		for _, e := range events(t, c, "ml", "g-0") {
			if e.Reason == "GangUnbound" {
				t.Logf("g-0's event: %s", e.Message)
				first = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: e.InvolvedObject.UID}}
				return true, ""
			}
		}
		p := getPod(t, c, "ml", "g-0")
		if p == nil {
			return false, "g-0 gone"
		}
		return false, "g-0 on " + p.Spec.NodeName
	})
	eventually(t, 30*time.Second, "g-0 made again, unbound", func() (bool, string) {
		p := getPod(t, c, "ml", "g-0")
		if p == nil {
			return false, "gone"
		}
		return p.UID != first.UID && p.Spec.NodeName == "" && len(records(t, c)) == 0, p.Spec.NodeName
	})
	create(t, c, g1.DeepCopy())
	eventually(t, 30*time.Second, "the gang placed whole", func() (bool, string) {
		a, b := getPod(t, c, "ml", "g-0"), getPod(t, c, "ml", "g-1")
		return a != nil && b != nil && a.Spec.NodeName == "gpu-0" && b.Spec.NodeName == "gpu-0", ""
	})
}
