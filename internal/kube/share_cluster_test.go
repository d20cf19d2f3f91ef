package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// devicePlugin plays, for the tests' KWOK nodes, what the NVIDIA device
// plugin and a reservation pod's container do on a real node: each
// running reservation pod is given a GPU of its node no other
// reservation there has (GPU-<node>-<n>), and the container's
// `gpufleet kube-reservation` writes it on the pod (ReportReservation),
// here as client (the reservation pods' service account), at once for
// each pod as the containers of many nodes would. It watches the
// reservation pods (as the kubelets do their own) until stop is called
// or the test ends.
func devicePlugin(t testing.TB, c *kubetest.Cluster, client kubernetes.Interface, ns string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	given := map[string]string{} // pod UID → device ID
	used := map[string]bool{}    // device IDs given
	var wg sync.WaitGroup
	seen := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Labels[LabelReservation] == "" || p.Annotations[KeyGPUID] != "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if given[string(p.UID)] != "" {
			return
		}
		id := ""
		for n := 0; id == "" || used[id]; n++ {
			id = fmt.Sprintf("GPU-%s-%d", p.Spec.NodeName, n)
		}
		given[string(p.UID)], used[id] = id, true
		wg.Go(func() {
			if err := ReportReservation(ctx, client, p.Namespace, p.Name, id); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
				t.Errorf("device plugin: %v", err)
			}
		})
	}
	gone := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		delete(used, given[string(p.UID)])
		delete(given, string(p.UID))
	}
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }, DeleteFunc: gone}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			f.Shutdown()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// startScheduler runs a Scheduler as client until stop is called (or the
// test ends).
func startScheduler(t *testing.T, client kubernetes.Interface) (stop func()) {
	t.Helper()
	return runScheduler(t, testConfig(t, client), nil)
}

// testConfig is the tests' Scheduler on client: a 250 ms tick, any
// running unit preemptible, the log at info level into the test's.
func testConfig(t *testing.T, client kubernetes.Interface) Config {
	return Config{Client: client,
		Engine: engine.Config{Sched: sched.Config{MinRuntime: time.Millisecond}},
		Tick:   250 * time.Millisecond, Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
}

// runScheduler runs a Scheduler of cfg until stop is called (or the test
// ends); afterEvict, when set, runs once each eviction is posted, given
// the loop's cancel.
func runScheduler(t *testing.T, cfg Config, afterEvict func(cancel func())) (stop func()) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if afterEvict != nil {
		s.afterEvict = func() { afterEvict(cancel) }
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// gpuBook is what the cluster shows of a node's GPUs: nvidia.com/gpu
// held by the pods bound there (reservations included), and per
// reservation the shares of the pods bound on it.
type gpuBook struct {
	held   map[string]int   // node → nvidia.com/gpu of its pods
	shares map[string][]int // reservation → the milli-GPUs of its pods
	mem    map[string]int64 // reservation → the sum of its pods' memory limits (MiB)
	res    map[string]*corev1.Pod
	pods   map[string]*corev1.Pod // all pods, namespace/name
}

func book(t testing.TB, c *kubetest.Cluster) (gpuBook, error) {
	t.Helper()
	l, err := c.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return gpuBook{}, err
	}
	b := gpuBook{held: map[string]int{}, shares: map[string][]int{}, mem: map[string]int64{}, res: map[string]*corev1.Pod{}, pods: map[string]*corev1.Pod{}}
	for i := range l.Items {
		p := &l.Items[i]
		b.pods[p.Namespace+"/"+p.Name] = p
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		b.held[p.Spec.NodeName] += PodGPUs(p)
		if p.Namespace == ReservationNamespace && p.Labels[LabelReservation] != "" {
			b.res[p.Name] = p
		}
	}
	return b, nil
}

// check says what of the book breaks the sharing's rules: a node holding
// more GPUs than it has, a GPU shared past its whole or its memory, a
// pod bound on a shared GPU without its reservation or device ID.
func (b gpuBook) check(gpusPerNode int, memMiB int64) string {
	var bad []string
	for n, g := range b.held {
		if g > gpusPerNode {
			bad = append(bad, fmt.Sprintf("node %s holds %d nvidia.com/gpu of %d", n, g, gpusPerNode))
		}
	}
	milli := map[string]int{}
	for _, p := range b.pods {
		f, ok := p.Annotations[KeyGPUFraction]
		if !ok || PodGPUs(p) > 0 || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // not a share (kube-scheduler's pods of the benchmark hold whole GPUs)
		}
		r := b.res[p.Annotations[KeyGPUGroup]]
		switch {
		case r == nil:
			bad = append(bad, fmt.Sprintf("%s/%s bound with no reservation (%s %q)", p.Namespace, p.Name, KeyGPUGroup, p.Annotations[KeyGPUGroup]))
			continue
		case r.Spec.NodeName != p.Spec.NodeName:
			bad = append(bad, fmt.Sprintf("%s/%s on %s, its reservation %s on %s", p.Namespace, p.Name, p.Spec.NodeName, r.Name, r.Spec.NodeName))
		case p.Annotations[KeyGPUID] == "" || p.Annotations[KeyGPUID] != r.Annotations[KeyGPUID]:
			bad = append(bad, fmt.Sprintf("%s/%s has device %q, its reservation %q", p.Namespace, p.Name, p.Annotations[KeyGPUID], r.Annotations[KeyGPUID]))
		}
		v, _ := strconv.ParseFloat(f, 64)
		milli[r.Name] += int(v*1000 + 0.5)
		m, err := strconv.ParseInt(p.Annotations[KeyGPUMemoryLimit], 10, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s/%s has %s %q", p.Namespace, p.Name, KeyGPUMemoryLimit, p.Annotations[KeyGPUMemoryLimit]))
		}
		b.mem[r.Name] += m
	}
	for r, m := range milli {
		if m > 1000 || b.mem[r] > memMiB {
			bad = append(bad, fmt.Sprintf("reservation %s shared by %d milli-GPUs and %d MiB, over one GPU of %d MiB", r, m, b.mem[r], memMiB))
		}
	}
	sort.Strings(bad)
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
	}
	return strings.Join(bad, "; ")
}

// TestClusterShare: pods that ask for shares of a GPU are packed onto one
// GPU that a reservation pod holds (one reservation, its device ID and a
// memory limit on each pod), as the deployed service account; the GPU's
// memory is never oversubscribed (a share whose memory does not fit
// waits with gpufleet's reason, though its fraction would); neither
// gpufleet nor kube-scheduler puts a whole-GPU pod on the shared GPU; a
// restarted gpufleet reads the sharing back from the pods and packs a
// new share beside the others; the reservation is released when its last
// pod ends, and its GPU goes to a whole-GPU pod. A bad annotation is the
// pod's reason.
func TestClusterShare(t *testing.T) {
	c := kubetest.Start(t)
	const mem = 81920
	c.AddNodes(t, "gpu", 1, map[string]string{LabelGPUProduct: a100, LabelGPUMemory: strconv.Itoa(mem)}, gpus(2))
	client := deployedRole(t, c) // also makes gpufleet-system and the reservation pods' role
	namespace(t, c, "ml")
	devicePlugin(t, c, actAs(t, c, "system:serviceaccount:"+ReservationNamespace+":gpufleet-reservation"), ReservationNamespace)
	c.StartKubeScheduler(t)

	// The rules hold at every look, from a watch of the whole test.
	var mu sync.Mutex
	var broken []string
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			if b, err := book(t, c); err == nil {
				if bad := b.check(2, mem); bad != "" {
					mu.Lock()
					broken = append(broken, bad)
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-watched
		mu.Lock()
		defer mu.Unlock()
		if len(broken) > 0 {
			t.Errorf("the sharing's rules broke %d times; first: %s", len(broken), broken[0])
		}
	})

	stop := startScheduler(t, client)
	create(t, c, gpuPod("ml", "whole-1", 1).Pod)
	eventually(t, 30*time.Second, "whole-1 bound", func() (bool, string) {
		p := getPod(t, c, "ml", "whole-1")
		return p != nil && p.Spec.NodeName != "", condOf(p)
	})
	// 1.0 GPU of fractions but 90 GiB of memory: two fit, one waits.
	create(t, c, sharePod("ml", "f-half", "0.5").Pod)
	create(t, c, sharePod("ml", "f-mem", "0.25").ann(KeyGPUMemory, "30Gi").Pod)
	create(t, c, sharePod("ml", "f-quarter", "0.25").Pod)
	create(t, c, sharePod("ml", "f-bad", "half").Pod)
	var waiting string
	eventually(t, 30*time.Second, "two shares bound on one reserved GPU, the third waiting", func() (bool, string) {
		b, err := book(t, c)
		if err != nil {
			return false, err.Error()
		}
		var bound, wait []string
		for _, n := range []string{"f-half", "f-mem", "f-quarter"} {
			p := b.pods["ml/"+n]
			switch {
			case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning:
				bound = append(bound, n)
			case strings.HasPrefix(condOf(p), "gpufleet: no room"):
				wait = append(wait, n)
			}
		}
		if len(bound) != 2 || len(wait) != 1 || len(b.res) != 1 {
			return false, fmt.Sprintf("bound %v, waiting %v, %d reservations", bound, wait, len(b.res))
		}
		waiting = wait[0]
		return true, ""
	})
	t.Logf("%s waits: %s", waiting, condOf(getPod(t, c, "ml", waiting)))
	eventually(t, 10*time.Second, "f-bad's reason", func() (bool, string) {
		got := condOf(getPod(t, c, "ml", "f-bad"))
		return got == `gpufleet: gpufleet.io/gpu-fraction: invalid value "half": want a share of one GPU above 0 and below 1, to a thousandth (0.25, 0.5); a whole GPU is nvidia.com/gpu: 1`, got
	})
	// No whole GPU is left: the reserved one is not given to whole-GPU
	// pods, by gpufleet or by kube-scheduler.
	create(t, c, gpuPod("ml", "whole-2", 1).Pod)
	create(t, c, gpuPod("ml", "whole-k", 1).scheduler(corev1.DefaultSchedulerName).Pod)
	eventually(t, 30*time.Second, "whole-2 waiting with gpufleet's reason", func() (bool, string) {
		got := condOf(getPod(t, c, "ml", "whole-2"))
		return strings.HasPrefix(got, "gpufleet: no room"), got
	})
	eventually(t, 30*time.Second, "whole-k unschedulable for kube-scheduler", func() (bool, string) {
		p := getPod(t, c, "ml", "whole-k")
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionFalse && strings.Contains(cd.Message, "nvidia.com/gpu") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("node %q, conditions %v", p.Spec.NodeName, p.Status.Conditions)
	})
	b, _ := book(t, c)
	var res *corev1.Pod
	for _, r := range b.res {
		res = r
	}

	// A restart: the sharing is read back from the pods. A new share of
	// 0.1 (8 GiB) fits beside the two, on the same GPU; the one waiting
	// still waits.
	stop()
	startScheduler(t, client)
	create(t, c, sharePod("ml", "f-tenth", "0.1").ann(kubetest.PodCompleteDelay, "15s").Pod)
	eventually(t, 30*time.Second, "f-tenth bound beside the others", func() (bool, string) {
		p := getPod(t, c, "ml", "f-tenth")
		return p != nil && p.Spec.NodeName != "" && p.Annotations[KeyGPUGroup] == res.Name && p.Annotations[KeyGPUID] == res.Annotations[KeyGPUID] && p.Annotations[KeyGPUMemoryLimit] == "8192",
			fmt.Sprintf("%v %s", p.Annotations, condOf(p))
	})
	time.Sleep(time.Second) // steps of the restarted scheduler
	b, _ = book(t, c)
	if len(b.res) != 1 || b.res[res.Name] == nil || b.res[res.Name].UID != res.UID {
		t.Fatalf("after the restart, reservations %v; want %s alone", b.res, res.Name)
	}
	if p := b.pods["ml/"+waiting]; p.Spec.NodeName != "" {
		t.Fatalf("after the restart %s was bound: its memory does not fit", waiting)
	}

	// The pods sharing the GPU end: the share that waited is bound in
	// their room, on the same GPU; the reservation stays while one share
	// runs and is released when the last (f-tenth, Succeeded after its
	// 15 s) ends; the GPU goes to the whole-GPU pod of gpufleet's that
	// waits (kube-scheduler's is deleted first: two schedulers binding at
	// once to one free GPU is a race of theirs that the kubelet settles,
	// not the sharing's).
	del := func(names ...string) {
		t.Helper()
		zero := int64(0)
		for _, n := range names {
			if err := c.Client.CoreV1().Pods("ml").Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 10*time.Second, fmt.Sprint(names, " deleted"), func() (bool, string) {
			b, err := book(t, c)
			if err != nil {
				return false, err.Error()
			}
			var left []string
			for _, n := range names {
				if b.pods["ml/"+n] != nil {
					left = append(left, n)
				}
			}
			return len(left) == 0, fmt.Sprint(left, " left")
		})
	}
	gone := []string{"whole-k"}
	for _, n := range []string{"f-half", "f-mem", "f-quarter"} {
		if n != waiting {
			gone = append(gone, n)
		}
	}
	del(gone...)
	eventually(t, 10*time.Second, waiting+" bound in the room they left", func() (bool, string) {
		p := getPod(t, c, "ml", waiting)
		return p.Spec.NodeName != "" && p.Annotations[KeyGPUGroup] == res.Name && p.Annotations[KeyGPUID] == res.Annotations[KeyGPUID], condOf(p)
	})
	del(waiting)
	time.Sleep(time.Second)
	if p := getPod(t, c, "ml", "f-tenth"); p.Status.Phase != corev1.PodRunning {
		t.Fatalf("f-tenth is %s before its 15 s: the test cannot see the reservation kept", p.Status.Phase)
	}
	if r := getPod(t, c, ReservationNamespace, res.Name); r == nil || r.UID != res.UID {
		t.Fatal("the reservation was released while f-tenth shares its GPU")
	}
	eventually(t, 30*time.Second, "f-tenth succeeded and the reservation released", func() (bool, string) {
		p := getPod(t, c, "ml", "f-tenth")
		r := getPod(t, c, ReservationNamespace, res.Name)
		return p.Status.Phase == corev1.PodSucceeded && r == nil, fmt.Sprintf("f-tenth %s, reservation there %t", p.Status.Phase, r != nil)
	})
	eventually(t, 30*time.Second, "the GPU given to whole-2", func() (bool, string) {
		p := getPod(t, c, "ml", "whole-2")
		return p.Spec.NodeName != "", condOf(p)
	})
}
