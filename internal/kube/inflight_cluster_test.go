package kube

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

// inflight counts the requests of a client that are in flight at once.
type inflight struct {
	next     http.RoundTripper
	now, max atomic.Int64
	posts    atomic.Int64
}

func (c *inflight) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		c.posts.Add(1)
		n := c.now.Add(1)
		defer c.now.Add(-1)
		for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
		}
	}
	return c.next.RoundTrip(r)
}

// A step that binds many pods at once keeps at most maxCalls requests in
// flight, whatever the client's QPS: 50,000 bindings posted at once ran
// the benchmark's scheduler out of file descriptors.
func TestClusterBindsInFlightBounded(t *testing.T) {
	c := kubetest.Start(t)
	const nodes, pods = 40, 320
	c.AddNodes(t, "gpu", nodes, map[string]string{LabelGPUProduct: a100}, gpus(8))
	namespace(t, c, "ml")
	for i := range pods {
		create(t, c, gpuPod("ml", fmt.Sprintf("p-%d", i), 1).Pod)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 100_000, 200_000 // no client-side pacing: the slots alone bound it
	counter := &inflight{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runScheduler(t, testConfig(t, client), nil)
	eventually(t, 60*time.Second, "every pod bound", func() (bool, string) {
		l, err := c.Client.CoreV1().Pods("ml").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var unbound []string
		for _, p := range l.Items {
			if p.Spec.NodeName == "" {
				unbound = append(unbound, p.Name)
			}
		}
		return len(unbound) == 0, fmt.Sprintf("%d unbound: %s", len(unbound), strings.Join(unbound[:min(len(unbound), 5)], ", "))
	})
	if m := counter.max.Load(); m > maxCalls {
		t.Errorf("%d requests in flight at once, want at most %d", m, maxCalls)
	} else {
		t.Logf("%d POSTs, at most %d in flight at once (bound %d)", counter.posts.Load(), m, maxCalls)
	}
}

// A binding answered with an error although the pod is bound (here
// another binder was first: a 409) counts as the pod on the node it is
// bound to, so that the next step does not give that node's GPU away
// before the informer shows it.
func TestClusterBindErrorButBound(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 2, map[string]string{LabelGPUProduct: a100}, gpus(1))
	namespace(t, c, "ml")
	create(t, c, gpuPod("ml", "p", 1).Pod)
	p := getPod(t, c, "ml", "p")
	s, err := New(testConfig(t, c.Client))
	if err != nil {
		t.Fatal(err)
	}
	other := "gpu-1"
	s.beforeBind = func(b Bind) {
		if err := c.Client.CoreV1().Pods("ml").Bind(context.Background(), &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p", UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: other},
		}, metav1.CreateOptions{}); err != nil {
			t.Errorf("the other binder: %v", err)
		}
	}
	got := s.bindAll(context.Background(), []Bind{{Pod: refOf(p), Node: "gpu-0"}})
	if len(got) != 1 || got[0].Node != other {
		t.Fatalf("bindAll after a 409: %+v, want the pod on %s, where it is bound", got, other)
	}
}
