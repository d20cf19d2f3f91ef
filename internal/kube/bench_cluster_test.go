package kube

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

// The sizes of BenchmarkClusterBind. The figure is 5,000 nodes
// and 50,000 pods; a two-core machine runs a tenth of that.
var (
	benchNodes    = flag.Int("kube.nodes", 500, "BenchmarkClusterBind: KWOK nodes of -kube.node-gpus GPUs")
	benchLog      = flag.String("kube.log", "", "BenchmarkClusterBind: write gpufleet's warnings and errors to this file")
	benchNodeGPUs = flag.Int("kube.node-gpus", 8, "BenchmarkClusterBind: nvidia.com/gpu of each node")
	benchPods     = flag.Int("kube.pods", 2000, "BenchmarkClusterBind: pods of each scheduler, each of -kube.gpus whole GPUs")
	benchGPUs     = flag.Int("kube.gpus", 1, "BenchmarkClusterBind: nvidia.com/gpu of each pod")
	benchQPS      = flag.Int("kube.qps", 1000, "BenchmarkClusterBind: client QPS of both schedulers (burst twice that)")
	benchRun      = flag.Duration("kube.run", 0, "BenchmarkClusterBind: each pod succeeds this long after it starts (KWOK), so that more pods than fit can be given; 0: pods run until deleted")
	benchGPUFirst = flag.Bool("kube.gpufleet-first", false, "BenchmarkClusterBind: run gpufleet before kube-scheduler")
	benchShare    = flag.Float64("kube.share", 0, "BenchmarkClusterBind: this share of the pods ask for part of one GPU (0.25 and 0.5 in turn): gpufleet.io/gpu-fraction for gpufleet, a whole nvidia.com/gpu for kube-scheduler")
)

// benchMem is the GPU memory of the benchmark's nodes (MiB).
const benchMem = 81920

// BenchmarkClusterBind runs the stock kube-scheduler and gpufleet one
// after the other on one test cluster — the same apiserver, the same
// KWOK nodes, the same whole-GPU pods — and reports how many pods each
// binds per second: the pods are made first, unscheduled, then the
// scheduler starts, and the clock runs from its start (informer sync
// included) to the last pod seen bound. Both clients have the same QPS
// limit. Beside the wall time: the CPU time of the scheduler (the
// kube-scheduler process; for gpufleet, which runs in this process,
// this process's, which also holds the watch that counts the bound
// pods: that watch's cost alone is this process's CPU time during
// kube-scheduler's run), and the apiserver's, etcd's and KWOK's.
//
// With -kube.share, that share of the pods ask for 0.25 or 0.5 of a GPU:
// gpufleet shares GPUs among them (reservation pods, share.go; a
// substitute for the device plugin reports each reservation's GPU, as its
// container would), kube-scheduler, which has only whole GPUs, gives
// each a whole nvidia.com/gpu. Without -kube.run it also reports each
// one's GPU allocation ratio: the GPUs the pods use (a share pod its
// fraction) over the nvidia.com/gpu held once all are bound.
//
//	go test -run '^$' -bench ClusterBind -benchtime 1x ./internal/kube \
//	    -args -kube.nodes 500 -kube.pods 2000 [-kube.share 0.5]
func BenchmarkClusterBind(b *testing.B) {
	nodes, pods, per := *benchNodes, *benchPods, *benchGPUs
	ng := *benchNodeGPUs
	if ng < 1 || per < 1 || per > ng || *benchRun == 0 && pods*per > nodes*ng {
		b.Fatalf("-kube.pods %d of -kube.gpus %d do not fit -kube.nodes %d of -kube.node-gpus %d (give -kube.run for more)", pods, per, nodes, ng)
	}
	if *benchShare < 0 || *benchShare > 1 || *benchShare > 0 && per != 1 {
		b.Fatalf("-kube.share %v: want a share of the pods from 0 to 1, with -kube.gpus 1", *benchShare)
	}
	c := kubetest.Start(b)
	start := time.Now()
	c.AddNodes(b, "gpu", nodes, map[string]string{LabelGPUProduct: a100, LabelGPUMemory: strconv.Itoa(benchMem)}, gpus(ng))
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReservationNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d nodes Ready in %s", nodes, time.Since(start).Round(time.Millisecond))
	qps := *benchQPS
	order := []string{"kube-scheduler", "gpufleet"}
	if *benchGPUFirst {
		order = []string{"gpufleet", "kube-scheduler"}
	}
	b.ResetTimer()
	for range b.N {
		res := map[string]bindRun{}
		for _, who := range order {
			res[who] = bindPhase(b, c, who, pods, per, qps)
		}
		k, g := res["kube-scheduler"], res["gpufleet"]
		b.ReportMetric(k.rate(), "kube-scheduler-pods/s")
		b.ReportMetric(g.rate(), "gpufleet-pods/s")
		b.ReportMetric(k.sched.Seconds(), "kube-scheduler-cpu-s")
		b.ReportMetric(g.sched.Seconds(), "gpufleet-cpu-s")
		if *benchRun == 0 {
			b.ReportMetric(k.ratio(), "kube-scheduler-alloc-ratio")
			b.ReportMetric(g.ratio(), "gpufleet-alloc-ratio")
		}
	}
}

// sharePod says whether the benchmark's pod i asks for part of a GPU,
// and which: -kube.share of the pods, spread evenly, 0.25 and 0.5 in
// turn.
func sharePodOf(i int) (string, bool) {
	s := *benchShare
	if int(float64(i+1)*s) == int(float64(i)*s) {
		return "", false
	}
	if int(float64(i)*s)%2 == 0 {
		return "0.25", true
	}
	return "0.5", true
}

// bindRun is one scheduler's run.
type bindRun struct {
	pods                  int
	wall, firstBind       time.Duration // from the scheduler's start
	sched, self           time.Duration // CPU: the scheduler's; this process's
	apiserver, etcd, kwok time.Duration // CPU
	// demand is the GPUs the pods ask for (a share as its fraction),
	// allocated the nvidia.com/gpu held for them once all are bound
	// (reservation pods included): without -kube.run.
	demand    float64
	allocated int
}

func (r bindRun) rate() float64 { return float64(r.pods) / r.wall.Seconds() }

// ratio is the GPU allocation ratio: demand over GPUs allocated.
func (r bindRun) ratio() float64 { return r.demand / float64(r.allocated) }

func (r bindRun) String() string {
	return fmt.Sprintf("%d pods bound in %s (first after %s): %.0f pods/s; GPUs: %.2f asked, %d allocated, ratio %.3f; CPU: scheduler %s, this process %s, kube-apiserver %s, etcd %s, kwok %s",
		r.pods, r.wall.Round(time.Millisecond), r.firstBind.Round(time.Millisecond), r.rate(), r.demand, r.allocated, r.ratio(),
		r.sched.Round(10*time.Millisecond), r.self.Round(10*time.Millisecond), r.apiserver.Round(10*time.Millisecond),
		r.etcd.Round(10*time.Millisecond), r.kwok.Round(10*time.Millisecond))
}

// bindPhase makes pods unscheduled pods for who in a namespace of its
// own, starts who, waits until every pod is bound, stops who and deletes
// the pods (so that the next phase has the nodes empty).
func bindPhase(b *testing.B, c *kubetest.Cluster, who string, pods, per, qps int) bindRun {
	b.Helper()
	ctx := context.Background()
	ns := "bench-" + who
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	name := SchedulerName
	if who == "kube-scheduler" {
		name = corev1.DefaultSchedulerName
	}
	// The pods, made by a few at once.
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				p := gpuPod(ns, fmt.Sprintf("p-%d", i), int64(per)).scheduler(name).Pod
				if f, ok := sharePodOf(i); ok {
					p.Annotations[KeyGPUFraction] = f
					if who == "gpufleet" {
						p.Spec.Containers[0].Resources.Limits = nil // the share, not a whole GPU
					}
				}
				if *benchRun > 0 {
					p.Annotations[kubetest.PodCompleteDelay] = benchRun.String()
				}
				p.UID, p.CreationTimestamp = "", metav1.Time{}
				p.Spec.Containers[0].Image = "busybox"
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range pods {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create pod: %v", err)
	}

	// A watch counts the bound pods.
	var mu sync.Mutex
	bound := map[string]bool{}
	var first, last time.Time
	done := make(chan struct{})
	wctx, stopWatch := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	seen := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if bound[p.Name] {
			return
		}
		bound[p.Name] = true
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		last = now
		if len(bound) == pods {
			close(done)
		}
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		b.Fatal(err)
	}
	f.Start(wctx.Done())
	f.WaitForCacheSync(wctx.Done())
	defer func() { stopWatch(); f.Shutdown() }()

	cpu := func(name string) time.Duration {
		d, err := c.CPUTime(name)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	api0, etcd0, kwok0, self0 := cpu("kube-apiserver"), cpu("etcd"), cpu("kwok"), selfCPU(b)
	var sched0 time.Duration
	t0 := time.Now()
	var stop func() time.Duration
	switch who {
	case "kube-scheduler":
		c.StartKubeScheduler(b, fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", 2*qps))
		stop = func() time.Duration {
			d := cpu("kube-scheduler")
			c.StopProgram("kube-scheduler")
			return d
		}
	default:
		cfg := rest.CopyConfig(c.Config)
		cfg.QPS, cfg.Burst = float32(qps), 2*qps
		// The wire format kube-scheduler uses.
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		log := slog.New(slog.DiscardHandler)
		if *benchLog != "" {
			f, err := os.Create(*benchLog)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		s, err := New(Config{Client: client, Log: log})
		if err != nil {
			b.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		ran := make(chan struct{})
		go func() { defer close(ran); _ = s.Run(sctx) }()
		// The reservation pods' containers report their GPUs (here, as
		// the device plugin and the container would on a real node).
		unplug := func() {}
		if *benchShare > 0 {
			unplug = devicePlugin(b, c, c.Client, ReservationNamespace)
		}
		sched0 = self0
		stop = func() time.Duration {
			d := selfCPU(b)
			cancel()
			<-ran
			unplug()
			return d
		}
	}
	limit := time.Minute + time.Duration(pods)*20*time.Millisecond
	select {
	case <-done:
	case <-time.After(limit):
		mu.Lock()
		n := len(bound)
		mu.Unlock()
		b.Fatalf("%s: %d of %d pods bound within %s", who, n, pods, limit)
	}
	r := bindRun{pods: pods}
	mu.Lock()
	r.wall, r.firstBind = last.Sub(t0), first.Sub(t0)
	mu.Unlock()
	r.apiserver, r.etcd, r.kwok, r.self = cpu("kube-apiserver")-api0, cpu("etcd")-etcd0, cpu("kwok")-kwok0, selfCPU(b)-self0
	r.sched = stop() - sched0

	// Every pod bound to a node with room: the nodes' GPUs are not
	// over-allocated by either scheduler, reservation pods included,
	// nor a shared GPU's memory (with -kube.run, pods that ended hold
	// nothing).
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range l.Items {
		if p.Spec.NodeName == "" {
			b.Fatalf("%s: pod %s not bound", who, p.Name)
		}
		if p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		// A share pod uses its fraction of a GPU, whichever it was given.
		if f, ok := p.Annotations[KeyGPUFraction]; ok {
			v, _ := strconv.ParseFloat(f, 64)
			r.demand += v
		} else {
			r.demand += float64(PodGPUs(&p))
		}
	}
	gb, err := book(b, c)
	if err != nil {
		b.Fatal(err)
	}
	if bad := gb.check(*benchNodeGPUs, benchMem); bad != "" {
		b.Fatalf("%s: %s", who, bad)
	}
	for _, g := range gb.held {
		r.allocated += g
	}
	b.Logf("%s: %s", who, r)
	// Deleted one by one, a few at once: one DeleteCollection of 10,000
	// pods outlasts the apiserver's request timeout.
	zero := int64(0)
	del := make(chan string)
	derr := make(chan error, len(l.Items))
	for range 16 {
		wg.Go(func() {
			for name := range del {
				if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
					derr <- err
				}
			}
		})
	}
	for _, p := range l.Items {
		del <- p.Name
	}
	close(del)
	wg.Wait()
	close(derr)
	for err := range derr {
		b.Fatalf("%s: delete pod: %v", who, err)
	}
	// gpufleet is stopped: its reservation pods are deleted here.
	rl, err := c.Client.CoreV1().Pods(ReservationNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range rl.Items {
		if err := c.Client.CoreV1().Pods(ReservationNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
	}
	for end := time.Now().Add(2 * time.Minute); ; {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		rl, rerr := c.Client.CoreV1().Pods(ReservationNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && rerr == nil && len(l.Items) == 0 && len(rl.Items) == 0 {
			break
		}
		if time.Now().After(end) {
			b.Fatalf("%s: pods not deleted within 2 minutes", who)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return r
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
