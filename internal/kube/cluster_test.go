package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// These tests run gpufleet against a real kube-apiserver, etcd and KWOK
// (internal/kubetest): no fake clientset. KWOK runs the bound pods and
// ends them after their pod-complete delay.

const (
	a100 = "NVIDIA-A100-SXM4-80GB"
	v100 = "Tesla-V100-SXM2-32GB"
)

func gpus(n int) corev1.ResourceList {
	return corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(n), resource.DecimalSI)}
}

type finished struct {
	mu   sync.Mutex
	code map[string]int
}

func (f *finished) note(p PodRef, code int, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.code[p.String()] = code
}

func (f *finished) get(key string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.code[key]
	return c, ok
}

// run starts a Scheduler on the cluster until the test ends, as client.
func run(t *testing.T, client kubernetes.Interface, teams map[string]string) *finished {
	t.Helper()
	return runWith(t, client, Options{Teams: teams})
}

// runWith is run with the translation's options.
func runWith(t *testing.T, client kubernetes.Interface, o Options) *finished {
	t.Helper()
	f := &finished{code: map[string]int{}}
	s, err := New(Config{Client: client, Options: o,
		// The engine's default policy, less its guard against preempting
		// work that has run under 10 minutes (the test runs in seconds).
		Engine: engine.Config{Sched: sched.Config{MinRuntime: time.Millisecond}},
		Tick:   250 * time.Millisecond, Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnFinish: f.note})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func namespace(t *testing.T, c *kubetest.Cluster, name string) {
	t.Helper()
	_, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, c *kubetest.Cluster, p *corev1.Pod) {
	t.Helper()
	if len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image == "" {
		p.Spec.Containers[0].Image = "busybox"
	}
	p.UID, p.CreationTimestamp = "", metav1.Time{}
	if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 200 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	last := ""
	for time.Now().Before(end) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last: %s", what, d, last)
}

func getPod(t *testing.T, c *kubetest.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func events(t *testing.T, c *kubetest.Cluster, ns, pod string) []corev1.Event {
	t.Helper()
	l, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestClusterPreemption: a core pod that finds the only node full of an
// interruptible offline pod gets it: the victim is evicted through the
// Eviction API, recreated by gpufleet (a bare pod) and waits; the core
// pod is bound once the victim is gone. A failed pod's exit code is
// reported.
func TestClusterPreemption(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100}, gpus(8))
	c.AddNodes(t, "spare", 1, map[string]string{LabelGPUProduct: v100}, gpus(1))
	namespace(t, c, "ml")
	// gpufleet runs as the Deployment's service account, with the
	// ClusterRole the install applies and no more.
	fin := run(t, deployedRole(t, c), nil)

	grace := int64(30)
	batch := gpuPod("ml", "batch", 8).label(KeyTier, "offline").ann(KeyInterruptible, "true")
	batch.Spec.TerminationGracePeriodSeconds = &grace
	create(t, c, batch.Pod)
	eventually(t, 30*time.Second, "batch running", func() (bool, string) {
		p := getPod(t, c, "ml", "batch")
		return p != nil && p.Status.Phase == corev1.PodRunning, fmt.Sprint(p != nil && p.Spec.NodeName != "")
	})
	first := getPod(t, c, "ml", "batch").UID

	create(t, c, gpuPod("ml", "serve", 8).label(KeyTier, "core").Pod)
	eventually(t, 30*time.Second, "serve bound to gpu-0", func() (bool, string) {
		p := getPod(t, c, "ml", "serve")
		return p != nil && p.Spec.NodeName == "gpu-0", condOf(p)
	})
	eventually(t, 30*time.Second, "batch recreated and waiting", func() (bool, string) {
		p := getPod(t, c, "ml", "batch")
		switch {
		case p == nil:
			return false, "no pod named batch (or the API did not answer)"
		case p.UID == first:
			return false, fmt.Sprintf("still the evicted pod (deleting since %v, phase %s)", p.DeletionTimestamp, p.Status.Phase)
		}
		return p.Spec.NodeName == "" && p.Annotations[KeyPreemptions] == "1" && strings.HasPrefix(condOf(p), "gpufleet: "), condOf(p)
	})
	var preempted bool
	for _, e := range events(t, c, "ml", "batch") {
		if e.Reason == "Preempted" && e.InvolvedObject.UID == first {
			preempted = true
			t.Logf("victim's event: %s", e.Message)
		}
	}
	if !preempted {
		t.Error("no Preempted event on the victim")
	}
	if code, ok := fin.get("ml/batch"); ok {
		t.Errorf("the evicted pod was reported finished (exit %d): an eviction is no end of the work", code)
	}

	// A failed pod: its exit code comes from its container status.
	create(t, c, gpuPod("ml", "crash", 1).label(KeyTier, "core").ann(kubetest.PodFailDelay, "1s").Pod)
	eventually(t, 30*time.Second, "crash reported failed", func() (bool, string) {
		code, ok := fin.get("ml/crash")
		p := getPod(t, c, "ml", "crash")
		return ok && code != 0, fmt.Sprintf("reported %v, exit %d; pod phase %s on %q", ok, code, p.Status.Phase, p.Spec.NodeName)
	})
}

// deployedRole applies the namespace, service account, ClusterRole and
// binding of deploy/kubernetes/gpufleet.yaml and returns a client that
// acts as that service account (impersonated by the admin).
func deployedRole(t *testing.T, c *kubetest.Cluster) kubernetes.Interface {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "gpufleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var user string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("deploy/kubernetes/gpufleet.yaml: %v", err)
		}
		var e error
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, e = c.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, e = c.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			if o.Name == "gpufleet" {
				user = "system:serviceaccount:" + o.Namespace + ":" + o.Name
			}
		case *rbacv1.Role:
			_, e = c.Client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, e = c.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, e = c.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, e = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case runtime.Object:
			continue // the ConfigMap and the Deployment
		}
		if e != nil {
			t.Fatal(e)
		}
	}
	if user == "" {
		t.Fatal("deploy/kubernetes/gpufleet.yaml has no ServiceAccount gpufleet")
	}
	client := actAs(t, c, user)
	// The role is enough and no more: it may not touch nodes.
	_, err = client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}}, metav1.CreateOptions{})
	if err == nil {
		t.Fatal("gpufleet's service account may create nodes; its role should only read them")
	}
	return client
}

// actAs is a client that acts as user, a service account (impersonated
// by the admin).
func actAs(t *testing.T, c *kubetest.Cluster, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
