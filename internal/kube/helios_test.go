package kube

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// heliosJobsEnv sets how many Helios jobs TestClusterHeliosJobs runs
// (default heliosJobsDefault, the figure).
const (
	heliosJobsEnv     = "GPUFLEET_KUBE_HELIOS_JOBS"
	heliosJobsDefault = 500
)

const l4 = "NVIDIA-L4"

// heliosSize is the cluster of TestClusterHeliosJobs, the quota of team
// nlp (namespaces nlp and speech; no cohort to borrow from, so never
// more) and the time the arrivals are compressed into. For 500 jobs: 10
// A100 nodes of 8 GPUs and 4 V100 nodes of 4, nlp 32 A100 and 8 V100
// GPUs, arrivals over 30 s; other counts in proportion, keeping room
// for a 16-GPU gang of nlp's, so that work contends as much.
type heliosSize struct {
	a100Nodes, v100Nodes int
	quota                map[string]int // GPU model → GPUs
	arrivals             time.Duration
}

func heliosSizeFor(n int) heliosSize {
	f := float64(n) / heliosJobsDefault
	scale := func(v, least int) int { return max(least, int(math.Round(float64(v)*f))) }
	return heliosSize{a100Nodes: scale(10, 3), v100Nodes: scale(4, 1),
		quota:    map[string]int{a100: scale(32, 16), v100: scale(8, 4)},
		arrivals: max(5*time.Second, time.Duration(f*float64(30*time.Second)))}
}

func heliosJobs(t *testing.T) int {
	v := os.Getenv(heliosJobsEnv)
	if v == "" {
		return heliosJobsDefault
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 10_000 {
		t.Fatalf("%s=%q: want a number of jobs 1..10000", heliosJobsEnv, v)
	}
	return n
}

// heliosPod is one pod the test made and what it wants of it.
type heliosPod struct {
	ns, name, tier, gang string
	gpus                 int
	submit               time.Duration // from the run's start
}

// TestClusterHeliosJobs replays the first Helios jobs (500 by default,
// GPUFLEET_KUBE_HELIOS_JOBS sets it) as pods on KWOK GPU nodes, their
// arrivals and run times compressed (18 h of arrivals into 30 s at 500
// jobs, run times into 1..6 s), and holds gpufleet to its promises while
// they run:
// every pod is bound by gpufleet and succeeds; no node ever holds more
// GPUs than it has; a gang's pods are bound together; team nlp never
// holds more than its quota; a preemption evicts only an interruptible
// pod of a lower tier, with its grace period (the checkpoint signal),
// and the bare pod comes back and finishes; waiting pods say why; a pod
// no node can run waits with its reason; another scheduler's pod is not
// touched. The invariants are checked on every change a watch shows.
func TestClusterHeliosJobs(t *testing.T) {
	heliosFile := filepath.Join("..", "..", "..", "shared", "data", "helios-venus-excerpt-dirlab", "helios_data_training.csv")
	if _, err := os.Stat(heliosFile); err != nil {
		t.Fatalf("Helios excerpt not available (the shared data is part of the test setup): %v", err)
	}
	tr, err := trace.LoadHelios(heliosFile)
	if err != nil {
		t.Fatal(err)
	}
	n := heliosJobs(t)
	// The first n jobs that fit, and the first gang among them or after.
	// A pod is at most a node (8 GPUs): larger jobs are gangs of 8-GPU
	// pods, so those of 9..15 GPUs or not a multiple of 8 are left out.
	var jobs []trace.Job
	gang := false
	for _, j := range tr.Jobs {
		if j.GPUs < 1 || j.GPUs > 16 || j.GPUs > 8 && j.GPUs%8 != 0 || len(jobs) >= n && (gang || j.GPUs <= 8) {
			continue
		}
		jobs = append(jobs, j)
		gang = gang || j.GPUs > 8
		if len(jobs) >= n && gang {
			break
		}
	}
	if len(jobs) < n || !gang {
		t.Fatalf("the trace has %d jobs that fit (a gang: %v), want %d and a gang", len(jobs), gang, n)
	}

	sz := heliosSizeFor(n)
	c := kubetest.Start(t)
	c.AddNodes(t, "a100", sz.a100Nodes, map[string]string{LabelGPUProduct: a100, LabelGPUMemory: "81920"}, gpus(8))
	c.AddNodes(t, "v100", sz.v100Nodes, map[string]string{LabelGPUProduct: v100, LabelGPUMemory: "32768"}, gpus(4))
	c.AddNodes(t, "l4", 1, map[string]string{LabelGPUProduct: l4}, gpus(8))
	namespaces := []string{"vision", "nlp", "speech", "robotics"}
	for _, ns := range namespaces {
		namespace(t, c, ns)
	}
	opts := Options{Teams: map[string]string{"speech": "nlp"}, Quotas: []core.Team{{ID: "nlp", Weight: 1, Quotas: []core.Quota{
		{GPUClass: a100, Guaranteed: core.Milli(sz.quota[a100]) * core.WholeGPU}, {GPUClass: v100, Guaranteed: core.Milli(sz.quota[v100]) * core.WholeGPU}}}}}

	// The pods, from the jobs: the namespace from the Helios user, the
	// tier from the job's place in the trace; offline pods may be
	// preempted, with 30 s to checkpoint.
	span := float64(jobs[len(jobs)-1].Submit - jobs[0].Submit)
	var pods []heliosPod
	var objs [][]*corev1.Pod // by arrival: a gang's pods arrive together
	for i, j := range jobs {
		user, _ := strconv.Atoi(j.User)
		ns := namespaces[user%len(namespaces)]
		tier := []string{"core", "regular", "regular", "offline", "offline"}[i%5]
		secs := min(max(j.Duration/300, 1), 6)
		at := time.Duration(0)
		if span > 0 {
			at = time.Duration(float64(j.Submit-jobs[0].Submit) / span * float64(sz.arrivals))
		}
		per, count, gang := j.GPUs, 1, ""
		if j.GPUs > 8 {
			per, count, gang = 8, j.GPUs/8, "helios-"+j.ID
		}
		var group []*corev1.Pod
		for k := range count {
			name := "helios-" + j.ID
			if gang != "" {
				name += "-" + strconv.Itoa(k)
			}
			p := gpuPod(ns, name, int64(per)).models(a100, v100).label(KeyTier, tier).
				ann(KeyDuration, fmt.Sprintf("%ds", j.Duration)).ann(kubetest.PodCompleteDelay, fmt.Sprintf("%ds", secs))
			if tier == "offline" {
				p = p.ann(KeyInterruptible, "true")
				grace := int64(30)
				p.Spec.TerminationGracePeriodSeconds = &grace
			}
			if gang != "" {
				p = p.gang(gang, count)
			}
			group = append(group, p.Pod)
			pods = append(pods, heliosPod{ns: ns, name: name, tier: tier, gang: gang, gpus: per, submit: at})
		}
		objs = append(objs, group)
	}

	rec := newRecorder(opts)
	rec.quota = sz.quota
	rec.nodes = map[string]int{"l4-0": 8}
	for i := range sz.a100Nodes {
		rec.nodes[fmt.Sprintf("a100-%d", i)] = 8
	}
	for i := range sz.v100Nodes {
		rec.nodes[fmt.Sprintf("v100-%d", i)] = 4
	}
	rec.model = func(node string) string {
		switch {
		case strings.HasPrefix(node, "a100"):
			return a100
		case strings.HasPrefix(node, "v100"):
			return v100
		}
		return l4
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactory(c.Client, 0)
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	fin := runWith(t, c.Client, opts)

	// A pod no node can run, and a pod of another scheduler.
	create(t, c, gpuPod("vision", "needs-h100", 1).models("NVIDIA-H100-80GB-HBM3").Pod)
	create(t, c, gpuPod("vision", "default-scheduled", 1).scheduler("default-scheduler").Pod)

	// The Helios pods, each at its compressed arrival time.
	start := time.Now()
	created := make(chan error, 1)
	go func() {
		defer close(created)
		for i, group := range objs {
			if d := time.Until(start.Add(pods[podIndex(objs, i)].submit)); d > 0 {
				time.Sleep(d)
			}
			for _, p := range group {
				p.Spec.Containers[0].Image = "busybox"
				if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					created <- fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err)
					return
				}
			}
		}
	}()

	// A preemption that must happen: an offline, interruptible pod
	// filling the one L4 node, then a core pod that needs it.
	grace := int64(30)
	ckpt := gpuPod("robotics", "checkpointer", 8).models(l4).label(KeyTier, "offline").ann(KeyInterruptible, "true").
		ann(kubetest.PodCompleteDelay, "15s")
	ckpt.Spec.TerminationGracePeriodSeconds = &grace
	create(t, c, ckpt.Pod)
	eventually(t, 30*time.Second, "checkpointer running on l4-0", func() (bool, string) {
		p := getPod(t, c, "robotics", "checkpointer")
		return p != nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == "l4-0", condOf(p)
	})
	create(t, c, gpuPod("robotics", "urgent", 8).models(l4).label(KeyTier, "core").ann(kubetest.PodCompleteDelay, "2s").Pod)
	pods = append(pods, heliosPod{ns: "robotics", name: "checkpointer", tier: "offline", gpus: 8},
		heliosPod{ns: "robotics", name: "urgent", tier: "core", gpus: 8})

	// Every pod succeeds, within a time that grows with the jobs.
	limit := 60*time.Second + time.Duration(n)*240*time.Millisecond
	eventually(t, limit, "every pod succeeded", func() (bool, string) {
		select {
		case err, ok := <-created:
			if ok && err != nil {
				t.Fatal(err)
			}
		default:
		}
		left := rec.unfinished(pods)
		return len(left) == 0, fmt.Sprintf("%d left: %.20v", len(left), left)
	})
	took := time.Since(start)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, v := range rec.violations {
		t.Error(v)
	}

	// Bound by gpufleet, reported finished with exit 0.
	scheduled := map[string]string{}
	for _, ns := range namespaces {
		l, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Items {
			key := ns + "/" + e.InvolvedObject.Name
			switch {
			case e.Reason == "Scheduled" && e.Source.Component == SchedulerName:
				scheduled[key] = e.Message
			case e.Reason == "Preempted":
				rec.checkPreempted(t, key, e.Message)
			}
		}
	}
	waits := map[string][]time.Duration{}
	for _, p := range pods {
		key := p.ns + "/" + p.name
		if code, ok := fin.get(key); !ok || code != 0 {
			t.Errorf("pod %s: finish reported %v (exit %d), want exit 0", key, ok, code)
		}
		if _, ok := scheduled[key]; !ok {
			t.Errorf("pod %s: no Scheduled event from gpufleet", key)
		}
		r := rec.pods[key]
		if r == nil || r.bound.IsZero() {
			t.Errorf("pod %s: never seen bound", key)
			continue
		}
		waits[p.tier] = append(waits[p.tier], r.bound.Sub(r.created))
		// A pod that waited long had its reason written meanwhile.
		if w := r.bound.Sub(r.created); w > 5*time.Second && r.reason == "" {
			t.Errorf("pod %s waited %s with no gpufleet reason on it", key, w.Round(time.Millisecond))
		}
	}

	// A gang's pods are bound together: within a second of each other,
	// with the engine's gang placement as their reason.
	gangs := map[string][]string{}
	for _, p := range pods {
		if p.gang != "" {
			gangs[p.ns+"/"+p.gang] = append(gangs[p.ns+"/"+p.gang], p.ns+"/"+p.name)
		}
	}
	if len(gangs) == 0 {
		t.Error("no Helios job larger than a node among the jobs: no gang was tested")
	}
	for g, keys := range gangs {
		var first, last time.Time
		for _, k := range keys {
			b := rec.pods[k].bound
			if first.IsZero() || b.Before(first) {
				first = b
			}
			if b.After(last) {
				last = b
			}
			if !strings.Contains(scheduled[k], "gang of") {
				t.Errorf("gang %s: pod %s's Scheduled event %q does not name a gang placement", g, k, scheduled[k])
			}
		}
		if last.Sub(first) > time.Second {
			t.Errorf("gang %s: its pods bound over %s, not together", g, last.Sub(first))
		}
	}

	// The preemption on l4-0: the checkpointer evicted with its grace
	// period, made again by gpufleet, and run to its end; the core pod
	// bound there.
	if r := rec.pods["robotics/checkpointer"]; r == nil || r.incarnations < 2 || r.graceSeen != grace {
		t.Errorf("checkpointer: %+v; want evicted with its %d s grace period and recreated", r, grace)
	}
	if p := getPod(t, c, "robotics", "checkpointer"); p == nil || p.Annotations[KeyPreemptions] != "1" {
		t.Errorf("checkpointer not recreated with %s=1", KeyPreemptions)
	}
	if r := rec.pods["robotics/urgent"]; r == nil || r.node != "l4-0" {
		t.Errorf("urgent bound to %+v, want l4-0", r)
	}
	if rec.preemptions == 0 {
		t.Error("no Preempted event was seen")
	}

	// Waiting pods said why; the quota was reached and held.
	if rec.quotaWaits == 0 {
		t.Errorf("no pod of team nlp waited on its quota (max held: A100 %d of %d, V100 %d of %d): the quota was never tested",
			rec.maxNLP[a100], sz.quota[a100], rec.maxNLP[v100], sz.quota[v100])
	}
	p := getPod(t, c, "vision", "needs-h100")
	if cond := condOf(p); p.Spec.NodeName != "" || !strings.HasPrefix(cond, "gpufleet: ") || !strings.Contains(cond, "NVIDIA-H100-80GB-HBM3") {
		t.Errorf("needs-h100 on %q, PodScheduled=False message %q; want unbound, with gpufleet's reason naming the model", p.Spec.NodeName, cond)
	}
	p = getPod(t, c, "vision", "default-scheduled")
	if p.Spec.NodeName != "" || len(p.Status.Conditions) != 0 || len(events(t, c, "vision", "default-scheduled")) != 0 {
		t.Errorf("default-scheduled pod touched: node %q, conditions %v", p.Spec.NodeName, p.Status.Conditions)
	}

	// Core work waits less than offline work (the tiers' order).
	mean := func(ds []time.Duration) time.Duration {
		var s time.Duration
		for _, d := range ds {
			s += d
		}
		return s / time.Duration(max(len(ds), 1))
	}
	if mean(waits["core"]) > mean(waits["offline"]) {
		t.Errorf("mean wait: core %s, offline %s; want core's no longer", mean(waits["core"]), mean(waits["offline"]))
	}
	t.Logf("%d Helios jobs, %d pods (%d gangs), all succeeded %s after the first arrival; %d preemptions; "+
		"team nlp held at most %d/%d A100 and %d/%d V100 GPUs, %d waits on its quota; mean wait core %s, regular %s, offline %s; %d waits with a reason",
		n, len(pods), len(gangs), took.Round(100*time.Millisecond), rec.preemptions,
		rec.maxNLP[a100], sz.quota[a100], rec.maxNLP[v100], sz.quota[v100], rec.quotaWaits,
		mean(waits["core"]).Round(10*time.Millisecond), mean(waits["regular"]).Round(10*time.Millisecond), mean(waits["offline"]).Round(10*time.Millisecond), rec.reasons)
}

// podIndex is the index in pods of group i's first pod.
func podIndex(groups [][]*corev1.Pod, i int) int {
	k := 0
	for _, g := range groups[:i] {
		k += len(g)
	}
	return k
}

// recorder watches the pods and checks, on every change, that no node
// holds more GPUs than it has and team nlp no more than its quota; it
// keeps what each pod went through.
type recorder struct {
	opts  Options
	quota map[string]int // team nlp's, GPU model → GPUs
	nodes map[string]int
	model func(node string) string

	mu          sync.Mutex
	live        map[string]*corev1.Pod // by UID
	pods        map[string]*podLife    // by namespace/name
	violations  []string
	maxNLP      map[string]int
	quotaWaits  int
	reasons     int
	preemptions int
}

// podLife is what one pod name went through, over its incarnations.
type podLife struct {
	created, bound time.Time // the first incarnation's
	node           string
	reason         string // the first gpufleet reason it waited with
	quota          bool   // it waited on its team's quota
	incarnations   int
	graceSeen      int64 // deletionGracePeriodSeconds when deleted unfinished
	tier           string
	interruptible  bool
	succeeded      bool
}

func newRecorder(o Options) *recorder {
	return &recorder{opts: o, live: map[string]*corev1.Pod{}, pods: map[string]*podLife{}, maxNLP: map[string]int{}}
}

func (r *recorder) OnAdd(o any, _ bool) { r.seen(o.(*corev1.Pod), false) }
func (r *recorder) OnUpdate(_, o any)   { r.seen(o.(*corev1.Pod), false) }
func (r *recorder) OnDelete(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if p, ok := o.(*corev1.Pod); ok {
		r.seen(p, true)
	}
}
func (r *recorder) seen(p *corev1.Pod, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	key := p.Namespace + "/" + p.Name
	l := r.pods[key]
	if l == nil {
		l = &podLife{created: now}
		r.pods[key] = l
	}
	if _, ok := r.live[string(p.UID)]; !ok && !deleted {
		l.incarnations++
	}
	l.tier, l.interruptible = p.Labels[KeyTier], p.Annotations[KeyInterruptible] == "true"
	if deleted {
		delete(r.live, string(p.UID))
	} else {
		r.live[string(p.UID)] = p
	}
	// The grace period the deletion gave (KWOK, playing the kubelet,
	// then ends the pod at once with none).
	if g := p.DeletionGracePeriodSeconds; p.DeletionTimestamp != nil && g != nil && *g > 0 {
		l.graceSeen = *g
	}
	if p.Spec.NodeName != "" && l.bound.IsZero() {
		l.bound, l.node = now, p.Spec.NodeName
	}
	if m := condOf(p); strings.HasPrefix(m, "gpufleet: ") {
		if l.reason == "" {
			l.reason = m
			r.reasons++
		}
		if !l.quota && strings.Contains(m, "quota") && r.opts.Team(p.Namespace) == "nlp" {
			l.quota = true
			r.quotaWaits++
		}
	}
	if p.Status.Phase == corev1.PodSucceeded && !deleted {
		l.succeeded = true
	}
	if p.Spec.SchedulerName != SchedulerName {
		return
	}
	// The invariants, on the pods that hold GPUs now.
	onNode := map[string]int{}
	nlp := map[string]int{}
	for _, q := range r.live {
		if q.Spec.NodeName == "" || q.Status.Phase == corev1.PodSucceeded || q.Status.Phase == corev1.PodFailed {
			continue
		}
		g := PodGPUs(q)
		onNode[q.Spec.NodeName] += g
		if r.opts.Team(q.Namespace) == "nlp" {
			nlp[r.model(q.Spec.NodeName)] += g
		}
	}
	for node, g := range onNode {
		if g > r.nodes[node] {
			r.violations = append(r.violations, fmt.Sprintf("%s: node %s holds %d GPUs of %d (after %s changed)", now.Format(time.StampMilli), node, g, r.nodes[node], key))
		}
	}
	for m, g := range nlp {
		r.maxNLP[m] = max(r.maxNLP[m], g)
		q := r.quota[m]
		if g > q {
			r.violations = append(r.violations, fmt.Sprintf("%s: team nlp holds %d %s GPUs, over its quota %d (after %s changed)", now.Format(time.StampMilli), g, m, q, key))
		}
	}
}

// unfinished are the pods not yet seen Succeeded, with where they are.
func (r *recorder) unfinished(pods []heliosPod) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var left []string
	for _, p := range pods {
		key := p.ns + "/" + p.name
		if l := r.pods[key]; l == nil || !l.succeeded {
			where := "not created"
			if l != nil {
				where = "waiting: " + l.reason
				if l.node != "" {
					where = "on " + l.node
				}
			}
			left = append(left, key+" "+where)
		}
	}
	slices.Sort(left)
	return left
}

var preemptedFor = regexp.MustCompile(`preempted for (\S+) \((\w+) tier below (\w+)\)`)

// checkPreempted holds a Preempted event to the tiers' rule: the victim
// interruptible, of a lower tier than the pod it made room for. Called
// with r.mu held.
func (r *recorder) checkPreempted(t *testing.T, key, msg string) {
	t.Helper()
	r.preemptions++
	l := r.pods[key]
	m := preemptedFor.FindStringSubmatch(msg)
	if m == nil || l == nil {
		t.Errorf("pod %s: Preempted event %q does not name a lower tier", key, msg)
		return
	}
	rank := map[string]int{"core": 0, "regular": 1, "offline": 2}
	if !l.interruptible || m[2] != l.tier || rank[m[2]] <= rank[m[3]] {
		t.Errorf("pod %s (tier %s, interruptible %v) preempted: %q", key, l.tier, l.interruptible, msg)
	}
	if !strings.Contains(msg, "SIGTERM") {
		t.Errorf("pod %s: Preempted event %q does not name the checkpoint signal", key, msg)
	}
	if l.graceSeen != 30 {
		t.Errorf("pod %s preempted with a grace period of %d s, want its terminationGracePeriodSeconds 30", key, l.graceSeen)
	}
}
