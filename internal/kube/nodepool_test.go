package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/provider/kubenodes"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// joinLater is the Machines of a machine that boots and joins later: the
// node is made without KWOK's annotation, so it is not Ready (a
// provisioning lease) until the test adds it, as a kubelet joining would
// make it Ready.
type joinLater struct{}

func (joinLater) Shape(n *corev1.Node, o *core.Offer) {
	n.Status.Allocatable = kubenodes.Allocatable(o)
	n.Status.Capacity = kubenodes.Allocatable(o)
}
func (joinLater) Start(context.Context, *corev1.Node, *core.Offer) error { return nil }
func (joinLater) Stop(context.Context, string) error                     { return nil }

// poolOffer is an hourly A100 machine of two GPUs.
var poolTestOffer = core.Offer{ID: "test/a100x2", Provider: "test", InstanceType: "a100x2", GPUModel: a100, GPUs: 2, GPUMemMiB: 81920,
	Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 8_000_000, Per: core.Hour, Granularity: 3600}}}

// runPool starts a Scheduler with a node pool on clk until stop is
// called (or the test ends).
func runPool(t *testing.T, c *kubetest.Cluster, clk clock.Clock, name string) (stop func()) {
	t.Helper()
	return runPoolWith(t, c, clk, name, nil)
}

// runPoolWith is runPool with a hook run after each eviction, given the
// loop's cancel.
func runPoolWith(t *testing.T, c *kubetest.Cluster, clk clock.Clock, name string, afterEvict func(cancel func())) (stop func()) {
	t.Helper()
	return runPoolOffers(t, c, clk, name, []core.Offer{poolTestOffer}, afterEvict)
}

// runPoolOffers is runPoolWith on a pool of these offers.
func runPoolOffers(t *testing.T, c *kubetest.Cluster, clk clock.Clock, name string, offers []core.Offer, afterEvict func(cancel func())) (stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("scheduler", name)
	pool, err := kubenodes.New(kubenodes.Config{Client: c.Client, Pool: "gf", Offers: offers,
		Machines: joinLater{}, Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return runScheduler(t, Config{Client: c.Client, NodePool: pool, Clock: clk, Log: log, Tick: 250 * time.Millisecond,
		Engine: engine.Config{Sched: sched.Config{MinRuntime: time.Millisecond},
			// Rent at once for waiting work; the release rule is the
			// default: an idle hourly node is kept until 2 min before its
			// boundary.
			Fleet: fleet.Config{WaitTarget: map[core.Tier]time.Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}}}}, afterEvict)
}

func poolNodes(t *testing.T, c *kubetest.Cluster) []corev1.Node {
	t.Helper()
	l, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: kubenodes.LabelPool + "=gf"})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func nodeNames(ns []corev1.Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ",")
}

// TestClusterNodePool: pods that wait with no capacity make gpufleet
// create a node; a restart while it boots creates no second one; the
// pods run on it; idle, it is kept until its billing boundary, then
// cordoned and drained (a PodDisruptionBudget holds the drain across
// another restart; a pod of gpufleet's found on it is evicted, recreated
// and waits for a new node) and deleted. A GPU node gpufleet did not
// create is never touched.
func TestClusterNodePool(t *testing.T) {
	t0 := time.Now()
	mark := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	c := kubetest.Start(t)
	ctx := context.Background()
	c.AddNodes(t, "byo", 1, map[string]string{LabelGPUProduct: v100}, gpus(1))
	namespace(t, c, ReservationNamespace) // where the recreation records go
	// The pods' creation times are real (whole seconds) and the loop's
	// clock is not: it starts a minute ahead, so that pods made on a
	// loaded machine seconds from now have not waited "negative" time,
	// for which nothing would be rented until the clock caught up.
	start := time.Now().UTC().Truncate(time.Second).Add(time.Minute)
	clk := clock.NewManual(start)
	stopA := runPool(t, c, clk, "A")

	pod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName, NodeSelector: map[string]string{LabelGPUProduct: a100},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: gpus(1)}}}}}
	}
	for _, n := range []string{"p1", "p2"} {
		create(t, c, pod(n, map[string]string{kubetest.PodCompleteDelay: "2s"}))
	}
	eventually(t, 15*time.Second, "a pool node made for the waiting pods", func() (bool, string) {
		ns := poolNodes(t, c)
		return len(ns) == 1, nodeNames(ns)
	})
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pool node: %v (have %s)", err, nodeNames(poolNodes(t, c)))
	}
	for k, want := range map[string]string{kubenodes.LabelLease: "L1", kubenodes.LabelOffer: "test.a100x2", kubenodes.LabelMode: "on-demand",
		LabelGPUProduct: a100, kubenodes.LabelGPUCount: "2", LabelInstanceType: "a100x2"} {
		if n.Labels[k] != want {
			t.Errorf("gf-l1 label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	if got, _ := kubenodes.StartedAt(n); !got.Equal(start) {
		t.Errorf("gf-l1 started-at %v, want the clock's %v", got, start)
	}
	mark("node made")

	// Restart while the machine boots: the node is a provisioning lease,
	// the pods pack into it, nothing more is rented.
	stopA()
	stopB := runPool(t, c, clk, "B")
	time.Sleep(1500 * time.Millisecond) // six ticks
	if ns := poolNodes(t, c); len(ns) != 1 {
		t.Fatalf("after a restart during provisioning: pool nodes %s; want gf-l1 alone", nodeNames(ns))
	}
	for _, name := range []string{"p1", "p2"} {
		if p := getPod(t, c, "default", name); p == nil || p.Spec.NodeName != "" {
			t.Fatalf("%s bound before its node is Ready: %+v", name, p)
		}
	}
	mark("restart: no duplicate")

	// The machine joins: KWOK makes the node Ready.
	patch := []byte(`{"metadata":{"annotations":{"` + kubetest.KWOKNodeAnnotation + `":"` + kubetest.KWOKNodeValue + `"}}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, "gf-l1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "p1 and p2 bound to gf-l1 and succeeded", func() (bool, string) {
		var s []string
		ok := true
		for _, name := range []string{"p1", "p2"} {
			p := getPod(t, c, "default", name)
			if p == nil {
				return false, name + " gone"
			}
			s = append(s, name+"@"+p.Spec.NodeName+":"+string(p.Status.Phase))
			ok = ok && p.Spec.NodeName == "gf-l1" && p.Status.Phase == corev1.PodSucceeded
		}
		return ok, strings.Join(s, " ")
	})
	mark("pods ran")

	// A pod of another kind on the node, under a disruption budget that
	// no controller ever lets go (the test cluster has none): the drain
	// waits for it.
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{NodeName: "gf-l1", Containers: []corev1.Container{{Name: "c"}}}}
	create(t, c, agent)
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pending pod is evicted past any budget (the apiserver's rule):
	// wait until KWOK runs it.
	eventually(t, 10*time.Second, "agent runs", func() (bool, string) {
		p := getPod(t, c, "default", "agent")
		return p != nil && p.Status.Phase == corev1.PodRunning, "not running"
	})

	// Idle and paid for the hour: kept at 57:30 …
	clk.Set(start.Add(57*time.Minute + 30*time.Second))
	time.Sleep(time.Second)
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Fatalf("gf-l1 57:30 after its start, idle but paid for the hour: %v, cordoned %v; want kept", err, n != nil && n.Spec.Unschedulable)
	}
	// … released from 58:00 (ReleaseMargin 2 min before the boundary).
	clk.Set(start.Add(58*time.Minute + 10*time.Second))
	eventually(t, 10*time.Second, "gf-l1 cordoned for release", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, draining := kubenodes.Draining(n)
		return draining, n.Annotations[kubenodes.AnnotationDraining]
	})
	mark("cordoned at the boundary")
	// The Releasing event is written just after the cordon it
	// describes: wait for it rather than read once.
	eventually(t, 10*time.Second, "gf-l1's Acquired and Releasing events with the engine's reasons", func() (bool, string) {
		var said []string
		for _, e := range events(t, c, "default", "gf-l1") {
			said = append(said, e.Reason+": "+e.Message)
		}
		got := strings.Join(said, "\n")
		return strings.Contains(got, "Acquired: gpufleet: lease L1, offer test/a100x2 on-demand") &&
			strings.Contains(got, "Releasing: gpufleet: cordoned and draining: released at its hour boundary"), got
	})
	time.Sleep(time.Second)
	if p := getPod(t, c, "default", "agent"); p == nil || p.DeletionTimestamp != nil {
		t.Fatalf("agent evicted past its PodDisruptionBudget: %+v", p)
	}

	// Restart mid-drain: the annotation carries it on.
	stopB()
	evicted := make(chan struct{})
	var once sync.Once
	stopC := runPoolWith(t, c, clk, "C", func(cancel func()) { cancel(); once.Do(func() { close(evicted) }) })
	// A pod of gpufleet's lands on the draining node (bound by hand, or a
	// binding in flight): it is evicted, made again unbound, and waits
	// for a new node — made again by the next process, as C stops the
	// moment the drain's eviction is posted.
	late := pod("late", map[string]string{kubetest.PodCompleteDelay: "1h"})
	late.Spec.NodeName = "gf-l1"
	create(t, c, late)
	var lateUID types.UID
	if p := getPod(t, c, "default", "late"); p != nil {
		lateUID = p.UID
	}
	select {
	case <-evicted:
	case <-time.After(20 * time.Second):
		t.Fatal("late not evicted by the drain")
	}
	stopC()
	eventually(t, 20*time.Second, "late gone", func() (bool, string) {
		return getPod(t, c, "default", "late") == nil, "still there"
	})
	if rs := records(t, c); len(rs) != 1 || rs[0].Data["pod"] != "default/late" || rs[0].Data["uid"] != string(lateUID) {
		t.Fatalf("records after the drain's eviction: %+v; want one for default/late", rs)
	}
	runPool(t, c, clk, "D")
	eventually(t, 20*time.Second, "late evicted and recreated unbound", func() (bool, string) {
		p := getPod(t, c, "default", "late")
		if p == nil {
			return false, "gone"
		}
		return p.UID != lateUID && p.Spec.NodeName == "" && p.Annotations[KeyPreemptions] == "1",
			string(p.UID) + " on " + p.Spec.NodeName + " preemptions " + p.Annotations[KeyPreemptions]
	})
	eventually(t, 15*time.Second, "a new node gf-l2 for late", func() (bool, string) {
		ns := poolNodes(t, c)
		return len(ns) == 2, nodeNames(ns)
	})
	mark("late requeued, gf-l2 made")
	if rs := records(t, c); len(rs) != 0 {
		t.Errorf("records once late is made again: %d; want none", len(rs))
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Fatalf("gf-l1 while agent's budget holds: %v; want still there, cordoned", err)
	}

	if err := c.Client.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "gf-l1 drained and deleted", func() (bool, string) {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "gf-l1 still there"
	})
	mark("gf-l1 deleted")
	if p := getPod(t, c, "default", "agent"); p != nil {
		t.Errorf("agent after the drain: on %s, phase %s; want evicted", p.Spec.NodeName, p.Status.Phase)
	}
	if ns := poolNodes(t, c); len(ns) != 1 || ns[0].Name != "gf-l2" || ns[0].Labels[kubenodes.LabelLease] != "L2" {
		t.Errorf("pool nodes at the end: %s; want gf-l2 (lease L2) alone", nodeNames(ns))
	}
	byo, err := c.Client.CoreV1().Nodes().Get(ctx, "byo-0", metav1.GetOptions{})
	if err != nil || byo.Spec.Unschedulable || byo.Annotations[kubenodes.AnnotationDraining] != "" {
		t.Errorf("byo-0, a node gpufleet did not make: %v, cordoned %v; want untouched", err, byo != nil && byo.Spec.Unschedulable)
	}
}

// TestClusterNodePoolRenewal: a pool node on a daily term whose core pod
// runs on for nine more days renews at its boundary on a week (the
// engine's renewal, fleet.RenewalTerm), and the node records it — mode
// label, started-at, earlier terms, a Renewed event — so that the next
// pass, and a restarted scheduler, read the lease on its week.
func TestClusterNodePoolRenewal(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second).Add(time.Minute)
	clk := clock.NewManual(start)
	termed := core.Offer{ID: "test/a100x2-idc", Provider: "test", InstanceType: "a100x2", GPUModel: a100, GPUs: 2, GPUMemMiB: 81920,
		Plans: []core.PricePlan{
			{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: 86400, Term: 86400},
			{Mode: core.Weekly, Price: 500_000_000, Per: core.Week, Granularity: 7 * 86400, Term: 7 * 86400},
		}}
	stopA := runPoolOffers(t, c, clk, "A", []core.Offer{termed}, nil)
	long := gpuPod("default", "long", 2).label(KeyTier, "core").ann(KeyDuration, "240h")
	long.Spec.NodeSelector = map[string]string{LabelGPUProduct: a100}
	create(t, c, long.Pod)
	eventually(t, 15*time.Second, "a daily pool node made for the pod", func() (bool, string) {
		ns := poolNodes(t, c)
		return len(ns) == 1 && ns[0].Labels[kubenodes.LabelMode] == "daily", nodeNames(ns)
	})
	patch := []byte(`{"metadata":{"annotations":{"` + kubetest.KWOKNodeAnnotation + `":"` + kubetest.KWOKNodeValue + `"}}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, "gf-l1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "long bound to gf-l1 and running", func() (bool, string) {
		p := getPod(t, c, "default", "long")
		return p != nil && p.Spec.NodeName == "gf-l1" && p.Status.Phase == corev1.PodRunning, condOf(p)
	})
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := kubenodes.StartedAt(n)

	// Past its first day: renewed on a week from the boundary.
	clk.Set(first.Add(24*time.Hour + time.Minute))
	renewedAt := first.Add(24 * time.Hour)
	eventually(t, 15*time.Second, "gf-l1 renewed on a week", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		at, _ := kubenodes.StartedAt(n)
		ts, err := kubenodes.EarlierTerms(n)
		ok := n.Labels[kubenodes.LabelMode] == "weekly" && at.Equal(renewedAt) && err == nil &&
			len(ts) == 1 && ts[0].Mode == core.Daily && ts[0].Start.Equal(first)
		return ok, fmt.Sprintf("mode %s from %s, earlier %v (%v)", n.Labels[kubenodes.LabelMode], at, ts, err)
	})
	eventually(t, 10*time.Second, "gf-l1's Renewed event", func() (bool, string) {
		var said []string
		for _, e := range events(t, c, "default", "gf-l1") {
			said = append(said, e.Reason+": "+e.Message)
		}
		got := strings.Join(said, "\n")
		return strings.Contains(got, "Renewed: gpufleet: renewed at") && strings.Contains(got, "on weekly"), got
	})

	// A restarted scheduler reads the week from the node and renews
	// nothing more; the pod runs on.
	stopA()
	runPoolOffers(t, c, clk, "B", []core.Offer{termed}, nil)
	clk.Set(first.Add(24*time.Hour + 10*time.Minute))
	time.Sleep(1500 * time.Millisecond) // six ticks
	n, err = c.Client.CoreV1().Nodes().Get(ctx, "gf-l1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ts, _ := kubenodes.EarlierTerms(n); n.Labels[kubenodes.LabelMode] != "weekly" || len(ts) != 1 || n.Spec.Unschedulable {
		t.Errorf("after a restart: mode %s, earlier %v, cordoned %v; want the week, one earlier term, not released", n.Labels[kubenodes.LabelMode], ts, n.Spec.Unschedulable)
	}
	if p := getPod(t, c, "default", "long"); p == nil || p.Spec.NodeName != "gf-l1" || p.Status.Phase != corev1.PodRunning {
		t.Errorf("long after the restart: %s", condOf(p))
	}
}
