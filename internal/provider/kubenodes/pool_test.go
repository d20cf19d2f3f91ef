package kubenodes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// These tests run the pool against a real kube-apiserver, etcd and KWOK
// (internal/kubetest): no fake clientset.

var offer = core.Offer{ID: "aws/us-east-1/p4d.24xlarge", Provider: "aws", Region: "us-east-1", InstanceType: "p4d.24xlarge",
	GPUModel: "NVIDIA-A100-SXM4-40GB", GPUs: 8, GPUMemMiB: 40960, VCPUs: 96, MemoryMiB: 1152 << 10,
	Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 32_770_000, Per: core.Hour, Granularity: 3600}}}

func newPool(t *testing.T, c *kubetest.Cluster, cfg Config) *Pool {
	t.Helper()
	cfg.Client = c.Client
	if cfg.Offers == nil {
		cfg.Offers = []core.Offer{offer}
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond)) }()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestConfigErrors(t *testing.T) {
	// New calls nothing: a client of a cluster that is not there will do.
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Pool: "Bad_Pool"}, `pool: invalid value "Bad_Pool"`},
		{Config{Offers: []core.Offer{{ID: "slice", GPUs: 1, SliceMilli: 250}}}, `offer slice gpus: invalid value "1": want whole GPUs`},
		{Config{DrainTimeout: -time.Second}, `drain timeout: invalid value "-1s"`},
	} {
		tc.cfg.Client = client
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v; want %q", tc.cfg.Pool, err, tc.want)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a client: no error")
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"aws/us-east-1/p4d.24xlarge": "aws.us-east-1.p4d.24xlarge",
		"NVIDIA-A100-SXM4-80GB":      "NVIDIA-A100-SXM4-80GB",
		"NVIDIA A10G":                "NVIDIA-A10G",
		"/x/":                        "x",
	} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("a/", 40)
	if got := LabelValue(long); len(got) > 63 || got == LabelValue(long+"b") {
		t.Errorf("LabelValue of a long value = %q (%d chars), or not told apart from another", got, len(got))
	}
}

// TestPoolOnCluster: acquire is idempotent and makes a KWOK node that
// becomes Ready; a second Pool (a restart) lists it; a release waits
// out a PodDisruptionBudget, evicts, deletes; a node not made by the
// pool is refused; a drain past its timeout uncordons.
func TestPoolOnCluster(t *testing.T) {
	t0 := time.Now()
	mark := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	c := kubetest.Start(t)
	ctx := context.Background()
	p := newPool(t, c, Config{Pool: "test", Retry: 200 * time.Millisecond})

	// Errors name the field.
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "nope", Mode: core.OnDemand}); err == nil || !strings.Contains(err.Error(), `offer: invalid value "nope"`) {
		t.Errorf("acquire of an unknown offer: %v", err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: offer.ID, Mode: core.Spot}); err == nil || !strings.Contains(err.Error(), `mode: invalid value "spot"`) {
		t.Errorf("acquire of a mode without a plan: %v", err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L_1", OfferID: offer.ID, Mode: core.OnDemand}); err == nil || !strings.Contains(err.Error(), `client token: invalid value "L_1"`) {
		t.Errorf("acquire with a token that makes no node name: %v", err)
	}

	m1, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: offer.ID, Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: offer.ID, Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	if m1.ProviderID != "test-l1" || m2.ProviderID != m1.ProviderID || !m2.LaunchedAt.Equal(m1.LaunchedAt) {
		t.Fatalf("acquire twice with token L1: %+v then %+v; want node test-l1 both times, one start", m1, m2)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "test-l1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{LabelPool: "test", LabelLease: "L1", LabelOffer: "aws.us-east-1.p4d.24xlarge", LabelMode: "on-demand",
		LabelGPUProduct: "NVIDIA-A100-SXM4-40GB", LabelGPUCount: "8", LabelInstanceType: "p4d.24xlarge", LabelGPUMemory: "40960"} {
		if n.Labels[k] != want {
			t.Errorf("node label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	if n.Annotations[AnnotationOffer] != offer.ID {
		t.Errorf("offer annotation %q", n.Annotations[AnnotationOffer])
	}
	if q := n.Status.Allocatable[ResourceGPU]; q.Value() != 8 {
		t.Errorf("allocatable nvidia.com/gpu %v, want 8", q.String())
	}
	// Another offer under a used token is refused, naming the token.
	other := offer
	other.ID = "other"
	p2 := newPool(t, c, Config{Pool: "test", Offers: []core.Offer{offer, other}})
	if _, err := p2.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "other", Mode: core.OnDemand}); err == nil || !strings.Contains(err.Error(), "client token") {
		t.Errorf("acquire of another offer under token L1: %v", err)
	}

	waitFor(t, 20*time.Second, "KWOK makes the node Ready", func() bool {
		ms, err := p2.List(ctx)
		return err == nil && len(ms) == 1 && ms[0].State == provider.Ready
	})
	// A restarted pool (p2) lists the node: the Node is the record.
	ms, _ := p2.List(ctx)
	if ms[0].ClientToken != "L1" || ms[0].OfferID != offer.ID || ms[0].Mode != core.OnDemand || !ms[0].LaunchedAt.Equal(m1.LaunchedAt) {
		t.Errorf("listed after a restart: %+v; want token L1, offer %s, started %s", ms[0], offer.ID, m1.LaunchedAt)
	}
	evs, err := p2.Poll(ctx, time.Now())
	if err != nil || len(evs) != 1 || evs[0].Machine.State != provider.Ready {
		t.Errorf("first poll: %+v, %v; want test-l1 ready", evs, err)
	}
	if evs, _ := p2.Poll(ctx, time.Now()); len(evs) != 0 {
		t.Errorf("second poll reports again: %+v", evs)
	}

	mark("acquired, listed")
	// A node the pool did not make: never cordoned nor deleted.
	c.AddNodes(t, "byo", 1, map[string]string{LabelGPUProduct: "NVIDIA-A100-SXM4-40GB"}, corev1.ResourceList{ResourceGPU: resource.MustParse("8")})
	if err := p.Release(ctx, "byo-0"); !errors.Is(err, ErrNotOurs) {
		t.Errorf("release of byo-0: %v; want ErrNotOurs", err)
	}
	if _, err := p.Cordon(ctx, "byo-0"); !errors.Is(err, ErrNotOurs) {
		t.Errorf("cordon of byo-0: %v; want ErrNotOurs", err)
	}
	if byo, err := c.Client.CoreV1().Nodes().Get(ctx, "byo-0", metav1.GetOptions{}); err != nil || byo.Spec.Unschedulable {
		t.Errorf("byo-0 after the refused release: %v, unschedulable %v", err, byo != nil && byo.Spec.Unschedulable)
	}

	mark("byo refused")
	// A committed node renews on another term: the node records it.
	termed := offer
	termed.Plans = append(slices.Clone(offer.Plans),
		core.PricePlan{Mode: core.Daily, Price: 700_000_000, Per: core.Day, Granularity: 86400, Term: 86400},
		core.PricePlan{Mode: core.Weekly, Price: 4_500_000_000, Per: core.Week, Granularity: 7 * 86400, Term: 7 * 86400})
	pt := newPool(t, c, Config{Pool: "test", Offers: []core.Offer{termed}})
	renewedAt := m1.LaunchedAt.Add(24 * time.Hour)
	from := []core.Term{{Mode: core.OnDemand, Start: m1.LaunchedAt}}
	if err := pt.Renew(ctx, "test-l1", core.Spot, renewedAt, from); err == nil || !strings.Contains(err.Error(), `mode: invalid value "spot"`) {
		t.Errorf("renew on a mode that is no committed plan: %v", err)
	}
	if err := pt.Renew(ctx, "byo-0", core.Weekly, renewedAt, from); !errors.Is(err, ErrNotOurs) {
		t.Errorf("renew byo-0: %v; want ErrNotOurs", err)
	}
	if err := pt.Renew(ctx, "test-l1", core.Weekly, renewedAt, []core.Term{{Mode: core.Daily, Start: m1.LaunchedAt}}); err == nil {
		t.Error("a renewal from a term the node is not on was recorded")
	}
	for i := range 2 { // the second changes nothing
		if err := pt.Renew(ctx, "test-l1", core.Weekly, renewedAt, from); err != nil {
			t.Fatalf("renew %d: %v", i, err)
		}
	}
	rn, err := c.Client.CoreV1().Nodes().Get(ctx, "test-l1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := EarlierTerms(rn)
	if at, _ := StartedAt(rn); err != nil || rn.Labels[LabelMode] != "weekly" || !at.Equal(renewedAt) || len(ts) != 1 || ts[0].Mode != core.OnDemand || !ts[0].Start.Equal(m1.LaunchedAt) {
		t.Errorf("renewed node: mode %q from %v, earlier %v (%v); want weekly from %v after on-demand from %v", rn.Labels[LabelMode], at, ts, err, renewedAt, m1.LaunchedAt)
	}
	mark("renewed")
	// A pod on the node that a PodDisruptionBudget protects: the drain
	// waits (429) until the budget goes.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "keeper", Labels: map[string]string{"app": "keeper"}},
		Spec: corev1.PodSpec{NodeName: "test-l1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "keeper"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keeper"}}}}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "keeper runs", func() bool {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "keeper", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Release(rctx, "test-l1") }()
	waitFor(t, 10*time.Second, "test-l1 cordoned", func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "test-l1", metav1.GetOptions{})
		_, draining := Draining(n)
		return err == nil && draining
	})
	time.Sleep(time.Second) // several passes, each refused
	select {
	case err := <-done:
		t.Fatalf("release ended while a budget forbids the eviction: %v", err)
	default:
	}
	if d, err := p.Drain(ctx, "test-l1"); err != nil || d.Deleted || !strings.Contains(d.Blocked["default/keeper"], "PodDisruptionBudget") {
		t.Fatalf("drain under the budget: %+v, %v; want keeper blocked by its PodDisruptionBudget", d, err)
	}
	if err := c.Client.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "keeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("release: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("release did not end within 20 s of the budget's removal")
	}
	cancel()
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, "test-l1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("test-l1 after release: %v; want not found", err)
	}
	if _, err := c.Client.CoreV1().Pods("default").Get(ctx, "keeper", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("keeper after release: %v; want evicted (gone)", err)
	}
	if err := p.Release(ctx, "test-l1"); err != nil {
		t.Errorf("releasing a released node: %v", err)
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, "byo-0", metav1.GetOptions{}); err != nil {
		t.Errorf("byo-0 after everything: %v", err)
	}

	mark("released")
	// Past its timeout a drain gives up: uncordoned, kept.
	clk := clock.NewManual(time.Now())
	p3 := newPool(t, c, Config{Pool: "test", Clock: clk, DrainTimeout: time.Minute})
	if _, err := p3.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: offer.ID, Mode: core.OnDemand}); err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName, pod.ResourceVersion = "test-l2", ""
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb.ResourceVersion = ""
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p3.Cordon(ctx, "test-l2"); err != nil {
		t.Fatal(err)
	}
	mark("l2 cordoned")
	if d, err := p3.Drain(ctx, "test-l2"); err != nil || d.TimedOut || d.Left != 1 {
		t.Fatalf("first drain pass: %+v, %v; want keeper left, no timeout", d, err)
	}
	clk.Advance(time.Minute)
	d, err := p3.Drain(ctx, "test-l2")
	if err != nil || !d.TimedOut || d.Deleted {
		t.Fatalf("drain pass past the timeout: %+v, %v; want timed out, node kept", d, err)
	}
	n, err = c.Client.CoreV1().Nodes().Get(ctx, "test-l2", metav1.GetOptions{})
	if _, draining := Draining(n); err != nil || n.Spec.Unschedulable || draining || n.Annotations[AnnotationDraining] != "" {
		t.Errorf("test-l2 after the timeout: %v, unschedulable %v, annotations %v; want uncordoned", err, n.Spec.Unschedulable, n.Annotations)
	}
	mark("timeout")

	// With Force, past the timeout the pods left are deleted, budget or
	// not, and the node goes.
	p4 := newPool(t, c, Config{Pool: "test", Clock: clk, DrainTimeout: time.Minute, Force: true})
	if _, err := p4.Cordon(ctx, "test-l2"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	// The pass deletes keeper, or finds it going already (on a loaded
	// machine a pass may come after KWOK began to end it).
	if d, err := p4.Drain(ctx, "test-l2"); err != nil || !d.TimedOut || len(d.Evicted) != 1 && d.Left != 1 || len(d.Blocked) != 0 {
		t.Fatalf("forced drain pass: %+v, %v; want keeper deleted", d, err)
	}
	waitFor(t, 10*time.Second, "forced drain deletes test-l2", func() bool {
		d, err := p4.Drain(ctx, "test-l2")
		return errors.Is(err, ErrUnknown) || err == nil && d.Deleted
	})

	// A node deleted by someone else: Failed at the next Poll, listed
	// until released. To p2, test-l1 (which p released) is such a node.
	evs, err = p2.Poll(ctx, time.Now())
	if err != nil || len(evs) != 1 || evs[0].Machine.ProviderID != "test-l1" || evs[0].Machine.State != provider.Failed {
		t.Fatalf("p2's poll after p released test-l1: %+v, %v; want test-l1 failed", evs, err)
	}
	if err := p2.Release(ctx, "test-l1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Acquire(ctx, provider.AcquireRequest{ClientToken: "L3", OfferID: offer.ID, Mode: core.OnDemand}); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Poll(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Nodes().Delete(ctx, "test-l3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	evs, err = p2.Poll(ctx, time.Now())
	if err != nil || len(evs) != 1 || evs[0].Machine.ProviderID != "test-l3" || evs[0].Machine.State != provider.Failed {
		t.Fatalf("poll after test-l3 was deleted by hand: %+v, %v; want it failed", evs, err)
	}
	if ms, _ := p2.List(ctx); len(ms) != 1 || ms[0].ProviderID != "test-l3" {
		t.Errorf("list before the release acknowledges test-l3: %+v", ms)
	}
	if err := p2.Release(ctx, "test-l3"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := p2.List(ctx); len(ms) != 0 {
		t.Errorf("list after the release: %+v; want none", ms)
	}

	// A machine that does not start: no node stays behind.
	p5 := newPool(t, c, Config{Pool: "test", Machines: failing{}})
	if _, err := p5.Acquire(ctx, provider.AcquireRequest{ClientToken: "L4", OfferID: offer.ID, Mode: core.OnDemand}); err == nil || !strings.Contains(err.Error(), "no quota") {
		t.Fatalf("acquire with a failing start: %v", err)
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, "test-l4", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("test-l4 after its machine failed to start: %v; want not found", err)
	}
	mark("force, failed, failing start")
}

type failing struct{ KWOK }

func (failing) Start(context.Context, *corev1.Node, *core.Offer) error { return errors.New("no quota") }

// TestExecMachines: the commands run with the node's description and
// their stderr names a failure.
func TestExecMachines(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	e, err := NewExec([]string{"sh", "-c", `echo "start $GPUFLEET_NODE_NAME $GPUFLEET_OFFER $GPUFLEET_GPUS $GPUFLEET_NODE_LABELS" >> ` + out},
		[]string{"sh", "-c", `echo "stop $GPUFLEET_NODE_NAME" >> ` + out})
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-l3", Labels: map[string]string{LabelPool: "gpufleet", LabelLease: "L3"}}}
	if err := e.Start(context.Background(), n, &offer); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(context.Background(), "gpufleet-l3"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	want := "start gpufleet-l3 aws/us-east-1/p4d.24xlarge 8 gpufleet.io/lease=L3,gpufleet.io/pool=gpufleet\nstop gpufleet-l3\n"
	if string(b) != want {
		t.Errorf("commands wrote %q, want %q", b, want)
	}
	bad, _ := NewExec([]string{"sh", "-c", "echo no quota >&2; exit 3"}, []string{"true"})
	if err := bad.Start(context.Background(), n, &offer); err == nil || !strings.Contains(err.Error(), "no quota") {
		t.Errorf("failing start: %v; want its stderr", err)
	}
	if _, err := NewExec(nil, []string{"true"}); err == nil || !strings.Contains(err.Error(), "machines start command") {
		t.Errorf("NewExec without a start command: %v", err)
	}
}
