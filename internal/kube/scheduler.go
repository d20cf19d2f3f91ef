package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider/kubenodes"
)

// Config is a Scheduler's settings.
type Config struct {
	Client kubernetes.Interface
	Options
	// Engine is the policy the engine decides by. The cluster's nodes are
	// the fleet: nothing is rented or released (NoAcquire and NoRelease
	// are set), and consolidation moves are not acted on.
	Engine engine.Config
	// NodePool, when set, rents and releases nodes for the engine
	// (nodepool.go): NoAcquire and NoRelease are then unset.
	NodePool *kubenodes.Pool
	// Tick is the longest time between steps (default 2 s); a change of
	// a pod or a node brings the next step forward.
	Tick  time.Duration
	Clock clock.Clock
	Log   *slog.Logger
	// OnFinish, when set, hears of every pod of gpufleet's that ended:
	// its exit code (0 for Succeeded) and why.
	OnFinish func(pod PodRef, code int, reason string)
	// DCGM, when set, scrapes the cluster's dcgm-exporter pods for the
	// idle ladder (dcgm.go, telemetry.go).
	DCGM *DCGM
}

// Scheduler is the loop: each tick it takes the informers' nodes and
// pods, builds the engine's state (Build), steps the engine and acts on
// the cluster (Actions). It keeps no state of its own beyond what it
// has asked of the cluster and not yet seen in the informers (the
// bindings and evictions in flight, as kube-scheduler's assume cache
// does); the bare pods it evicted and must recreate are recorded in the
// cluster too (recreate.go).
type Scheduler struct {
	cfg     Config
	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	nodes   corelisters.NodeLister
	kick    chan struct{}

	mu sync.Mutex
	// assumed are the pods bound (uid → node) and evicted (uid) that the
	// informer does not show yet.
	assumed map[types.UID]string
	evicted map[types.UID]time.Time
	// refused are the evictions last refused (a PodDisruptionBudget's
	// 429), by pod, when the refusal was last logged: each step asks
	// again, the log says so once a minute.
	refused map[types.UID]time.Time
	// recreate holds the bare pods evicted, by namespace/name, until they
	// are gone and made again (recreate.go); loaded is whether the
	// records in the cluster were read.
	recreate map[string]*recreation
	loaded   bool
	// history carries the fair-share history from step to step.
	history engine.State
	steps   int
	pool    *nodePool  // nil without Config.NodePool
	tele    *telemetry // nil without Config.DCGM
	// wmu guards made and shared, written by the bindings of a step,
	// which run at once.
	wmu sync.Mutex
	// made are the reservation pods created (namespace/name) that the
	// informer does not show yet, and shared the annotations written on
	// pods that share a GPU (by UID) that it does not show yet.
	made   map[string]*corev1.Pod
	shared map[types.UID]map[string]string
	// reserving are this step's reservation pods being made (closed when
	// done), unmade those whose creation failed: the pods placed on them
	// wait for the next step.
	reserving map[string]chan struct{}
	unmade    map[string]bool
	// calls holds a slot for each API request a step's bindings have in
	// flight (maxCalls).
	calls chan struct{}
	// afterEvict, for tests, runs once an eviction is posted;
	// beforeBind before a binding is posted.
	afterEvict func()
	beforeBind func(Bind)
}

// New makes a Scheduler; Run starts it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: no client")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Engine.NoAcquire, cfg.Engine.NoRelease = cfg.NodePool == nil, cfg.NodePool == nil
	cfg.Engine.Fleet.NoConsolidation = cfg.Engine.Fleet.NoConsolidation || cfg.NodePool != nil // moves are not acted on
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	s := &Scheduler{cfg: cfg, factory: f, kick: make(chan struct{}, 1),
		assumed: map[types.UID]string{}, evicted: map[types.UID]time.Time{}, refused: map[types.UID]time.Time{}, recreate: map[string]*recreation{}, pool: newNodePool(cfg.NodePool),
		made: map[string]*corev1.Pod{}, shared: map[types.UID]map[string]string{}, calls: make(chan struct{}, maxCalls)}
	s.tele = newTelemetry(cfg.DCGM)
	pi := f.Core().V1().Pods()
	ni := f.Core().V1().Nodes()
	s.pods, s.nodes = pi.Lister(), ni.Lister()
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(old, cur any) { s.observe(old, cur); s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	if _, err := pi.Informer().AddEventHandler(kick); err != nil {
		return nil, fmt.Errorf("kube: pod informer: %w", err)
	}
	if _, err := ni.Informer().AddEventHandler(kick); err != nil {
		return nil, fmt.Errorf("kube: node informer: %w", err)
	}
	return s, nil
}

func (s *Scheduler) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// observe reports the pods of gpufleet's that just finished.
func (s *Scheduler) observe(old, cur any) {
	o, ok1 := old.(*corev1.Pod)
	p, ok2 := cur.(*corev1.Pod)
	if !ok1 || !ok2 || p.Spec.SchedulerName != s.cfg.schedulerName() {
		return
	}
	if _, _, was := Exit(o); was {
		return
	}
	code, why, ok := Exit(p)
	if !ok {
		return
	}
	s.cfg.Log.Info("pod finished", "pod", refOf(p).String(), "exit_code", code, "reason", why)
	if s.cfg.OnFinish != nil {
		s.cfg.OnFinish(refOf(p), code, why)
	}
}

// Run starts the informers, waits for their caches and steps until ctx
// ends.
func (s *Scheduler) Run(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kube: informer cache of %v did not sync", typ)
		}
	}
	s.cfg.Log.Info("kubernetes scheduler running", "scheduler_name", s.cfg.schedulerName(), "tick", s.cfg.Tick)
	if s.tele != nil {
		go s.scrapeLoop(ctx)
	}
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		if err := s.Step(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("kubernetes step failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.kick:
			// Let a burst of changes (a gang's pods arriving) settle.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// Step runs one step: snapshot, engine.Step, act. A panic in the
// engine (a state it refuses to decide on) is a failed step, retried at
// the next, as the server's loop treats it.
func (s *Scheduler) Step(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Log.Error("kubernetes step panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("kube: step: panic: %v", p)
		}
	}()
	now := s.cfg.Clock.Now()
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("kube: list nodes: %w", err)
	}
	cached, err := s.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("kube: list pods: %w", err)
	}
	pods := s.assume(cached, now)
	s.recreateGone(ctx, cached)
	s.lost(ctx, nodes, cached)

	w := Build(nodes, pods, s.cfg.Options)
	s.poolBefore(w, nodes, now)
	w.State.History, w.State.HistoryAt = s.history.History, s.history.HistoryAt
	s.telemetryBefore(w, now)
	d := engine.Step(w.State, now, s.cfg.Engine)
	s.telemetryDecided(ctx, &d)
	a := w.Actions(d)
	created := engine.Apply(w.State, d)
	s.history.History, s.history.HistoryAt = w.State.History, w.State.HistoryAt
	s.steps++

	for _, ev := range a.Evict {
		s.evict(ctx, ev, pods)
	}
	s.reserve(ctx, a.Binds, now)
	bound := make([][]Bind, len(a.Binds))
	var wg sync.WaitGroup
	units := make(chan struct{}, maxCalls)
	for i, binds := range a.Binds {
		units <- struct{}{}
		wg.Go(func() {
			defer func() { <-units }()
			bound[i] = s.bindAll(ctx, binds)
		})
	}
	wg.Wait()
	for i, bs := range bound {
		for _, b := range bs {
			s.assumed[types.UID(b.Pod.UID)] = b.Node
		}
		if len(bs) > 0 && len(bs) < len(a.Binds[i]) {
			s.unbind(ctx, a.Binds[i], bs, pods)
		}
	}
	for _, wt := range a.Wait {
		s.wait(ctx, wt)
	}
	s.release(ctx, a.Release, now)
	s.poolAfter(ctx, w, d, created, nodes, pods, now)
	return nil
}

// maxCalls bounds the API requests a step's bindings, their events and
// reservations have in flight at once (and the units bound at once).
// Posted all at once, tens of thousands of them ran the process out of
// file descriptors: client-go's HTTP/2 transport opens another
// connection whenever one is at its stream limit (BenchmarkClusterBind,
// 5,000 nodes and 50,000 pods). The client's QPS limit paces them
// anyway; the slots bound what waits on it.
const maxCalls = 64

// call runs f, an API request, in one of the step's slots.
func (s *Scheduler) call(f func()) {
	s.calls <- struct{}{}
	defer func() { <-s.calls }()
	f()
}

// assume overlays what the loop asked of the cluster and the informer
// does not show yet: a pod bound is on its node, a pod evicted is being
// deleted. Assumptions the informer caught up with are dropped.
func (s *Scheduler) assume(pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	seen := map[types.UID]bool{}
	names := map[string]bool{}
	out := make([]*corev1.Pod, 0, len(pods)+len(s.made))
	for _, p := range pods {
		seen[p.UID] = true
		names[p.Namespace+"/"+p.Name] = true
		if ann, ok := s.shared[p.UID]; ok {
			if p.Annotations[KeyGPUGroup] == ann[KeyGPUGroup] && p.Annotations[KeyGPUID] == ann[KeyGPUID] {
				delete(s.shared, p.UID)
			} else {
				c := p.DeepCopy()
				if c.Annotations == nil {
					c.Annotations = map[string]string{}
				}
				for k, v := range ann {
					if v == "" {
						delete(c.Annotations, k)
					} else {
						c.Annotations[k] = v
					}
				}
				p = c
			}
		}
		if node, ok := s.assumed[p.UID]; ok {
			if p.Spec.NodeName != "" {
				delete(s.assumed, p.UID)
			} else {
				c := p.DeepCopy()
				c.Spec.NodeName = node
				p = c
			}
		}
		if _, ok := s.evicted[p.UID]; ok {
			if p.DeletionTimestamp != nil {
				delete(s.evicted, p.UID)
			} else {
				c := p.DeepCopy()
				t := metav1.NewTime(now)
				c.DeletionTimestamp = &t
				p = c
			}
		}
		out = append(out, p)
	}
	for uid := range s.assumed {
		if !seen[uid] {
			delete(s.assumed, uid)
		}
	}
	for uid := range s.shared {
		if !seen[uid] {
			delete(s.shared, uid)
		}
	}
	for key, p := range s.made {
		switch {
		case names[key] || now.Sub(p.CreationTimestamp.Time) > time.Minute:
			delete(s.made, key) // the informer shows it, or would by now: deleted since
		default:
			out = append(out, p)
		}
	}
	for uid, at := range s.evicted {
		if !seen[uid] || now.Sub(at) > 10*time.Minute {
			delete(s.evicted, uid)
		}
	}
	return out
}

// bindAll binds a unit's pods, all of them or (as far as the API lets
// it) none: a gang's pods are bound together after the engine placed the
// gang whole; if a binding fails the others stand and the next steps
// show the gang partly bound (Build's reason).
func (s *Scheduler) bindAll(ctx context.Context, binds []Bind) []Bind {
	if len(binds) == 1 && binds[0].Share != nil {
		if !s.share(ctx, binds[0]) {
			return nil
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(binds))
	for i, b := range binds {
		wg.Go(func() {
			if s.beforeBind != nil {
				s.beforeBind(b)
			}
			s.call(func() {
				errs[i] = s.cfg.Client.CoreV1().Pods(b.Pod.Namespace).Bind(ctx, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Namespace: b.Pod.Namespace, Name: b.Pod.Name, UID: types.UID(b.Pod.UID)},
					Target:     corev1.ObjectReference{Kind: "Node", Name: b.Node},
				}, metav1.CreateOptions{})
			})
		})
	}
	wg.Wait()
	var ok []Bind
	for i, b := range binds {
		if errs[i] != nil {
			node := s.boundTo(ctx, b.Pod)
			if node == "" {
				s.cfg.Log.Warn("binding failed", "pod", b.Pod.String(), "node", b.Node, "err", errs[i])
				continue
			}
			// The error came after the binding took (a reply lost, a
			// retry answered 409), or another binder was first: either
			// way the pod holds a GPU of node, which the next step must
			// not give to another pod before the informer shows it.
			s.cfg.Log.Warn("binding answered an error but the pod is bound", "pod", b.Pod.String(), "node", node, "asked", b.Node, "err", errs[i])
			b.Node = node
		}
		ok = append(ok, b)
		s.cfg.Log.Info("bound", "pod", b.Pod.String(), "node", b.Node, "reason", b.Reason)
		s.event(ctx, b.Pod, corev1.EventTypeNormal, "Scheduled", fmt.Sprintf("Successfully assigned %s to %s (gpufleet: %s)", b.Pod, b.Node, b.Reason))
	}
	return ok
}

// boundTo reads the pod and returns the node it is bound to: "" when it
// is not bound or cannot be read (it is placed again).
func (s *Scheduler) boundTo(ctx context.Context, pod PodRef) string {
	var node string
	s.call(func() {
		p, err := s.cfg.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && string(p.UID) == pod.UID {
			node = p.Spec.NodeName
		}
	})
	return node
}

// unbind evicts the pods of a gang bound when the bindings of others
// failed (a pod deleted, a node gone, between the decision and the
// binding): a gang partly bound would hold its GPUs and never run
// whole. The bound part is evicted (a bare pod recorded and made again
// once gone), so the gang waits and is placed whole again.
func (s *Scheduler) unbind(ctx context.Context, binds, bound []Bind, pods []*corev1.Pod) {
	ok := map[string]bool{}
	for _, b := range bound {
		ok[b.Pod.String()] = true
	}
	var failed []string
	for _, b := range binds {
		if !ok[b.Pod.String()] {
			failed = append(failed, b.Pod.String())
		}
	}
	byUID := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		byUID[p.UID] = p
	}
	why := fmt.Sprintf("the binding of %d of its gang's %d pods failed (%s): the gang is placed whole or not at all", len(failed), len(binds), strings.Join(failed, ", "))
	for _, b := range bound {
		uid := types.UID(b.Pod.UID)
		key := b.Pod.String()
		pod := byUID[uid]
		recreate := pod != nil && bare(pod)
		if recreate {
			p := pod.DeepCopy()
			p.Spec.NodeName = b.Node
			s.keep(ctx, p)
		}
		err := kubenodes.EvictOnce(ctx, s.cfg.Client, b.Pod.Namespace, b.Pod.Name, &metav1.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			s.unkeep(ctx, key, uid)
			s.cfg.Log.Warn("evicting the bound part of a gang failed; it stays bound", "pod", key, "err", err)
			continue
		}
		s.evicted[uid] = s.cfg.Clock.Now()
		what := "its controller recreates it"
		if recreate {
			what = "gpufleet recreates it from its spec once it is gone"
		}
		s.cfg.Log.Warn("gang partly bound: bound pod evicted", "pod", key, "node", b.Node, "reason", why)
		s.event(ctx, b.Pod, corev1.EventTypeWarning, "GangUnbound", fmt.Sprintf("gpufleet: evicted from %s: %s; %s", b.Node, why, what))
	}
}

// evict evicts a victim through the Eviction API: the kubelet sends its
// containers SIGTERM (the checkpoint signal) and waits its
// terminationGracePeriodSeconds before SIGKILL. A bare pod is kept to
// be made again once gone.
func (s *Scheduler) evict(ctx context.Context, ev Evict, pods []*corev1.Pod) {
	uid := types.UID(ev.Pod.UID)
	if _, ok := s.evicted[uid]; ok {
		return
	}
	var pod *corev1.Pod
	for _, p := range pods {
		if p.UID == uid {
			pod = p
			break
		}
	}
	pre := &metav1.Preconditions{UID: &uid}
	if pod != nil && pod.ResourceVersion != "" {
		// The pod as the step saw it: one that has since finished (its
		// success not yet in the informer) is not evicted and made again.
		pre.ResourceVersion = &pod.ResourceVersion
	}
	key := ev.Pod.String()
	if ev.Recreate && pod != nil {
		s.keep(ctx, pod) // durable before the eviction is posted
	}
	// Once: a PodDisruptionBudget's 429 must not hold the step (and its
	// lock) while client-go waits out Retry-After ten times.
	err := kubenodes.EvictOnce(ctx, s.cfg.Client, ev.Pod.Namespace, ev.Pod.Name, pre)
	if err != nil && !apierrors.IsNotFound(err) {
		s.unkeep(ctx, key, uid)
		// 429: a PodDisruptionBudget forbids it now; the engine decides
		// again at the next step, and the log says so once a minute.
		if now := s.cfg.Clock.Now(); now.Sub(s.refused[uid]) >= time.Minute {
			if len(s.refused) > 10_000 {
				clear(s.refused) // pods long gone: forget them
			}
			s.refused[uid] = now
			s.cfg.Log.Warn("eviction failed; asked again each step", "pod", ev.Pod.String(), "err", err)
		}
		return
	}
	delete(s.refused, uid)
	s.evicted[uid] = s.cfg.Clock.Now()
	if s.afterEvict != nil {
		s.afterEvict()
	}
	what := "its controller recreates it"
	if ev.Recreate {
		what = "gpufleet recreates it from its spec once it is gone"
	}
	s.cfg.Log.Info("preempted", "pod", ev.Pod.String(), "recreate", ev.Recreate, "reason", ev.Reason)
	s.event(ctx, ev.Pod, corev1.EventTypeWarning, "Preempted", fmt.Sprintf("gpufleet: evicted (SIGTERM, then its grace period) to make room: %s; %s", ev.Reason, what))
}

// wait writes why a pod waits where kubectl describe shows it: its
// PodScheduled=False condition (reason Unschedulable, the engine's text
// as message) and a FailedScheduling event, each time the text changes.
func (s *Scheduler) wait(ctx context.Context, wt Wait) {
	msg := ReasonText(wt.Reason)
	if wt.Cond == msg || s.cfg.Clock.Now().Before(wt.NotBefore) {
		return
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": wt.Pod.UID},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: msg, LastTransitionTime: metav1.NewTime(s.cfg.Clock.Now()),
		}}},
	})
	_, err := s.cfg.Client.CoreV1().Pods(wt.Pod.Namespace).Patch(ctx, wt.Pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.cfg.Log.Warn("writing a pod's reason failed", "pod", wt.Pod.String(), "err", err)
		}
		return
	}
	s.cfg.Log.Debug("waiting", "pod", wt.Pod.String(), "reason", wt.Reason)
	s.event(ctx, wt.Pod, corev1.EventTypeWarning, "FailedScheduling", msg)
}

// event records an Event about a pod, from gpufleet.
func (s *Scheduler) event(ctx context.Context, pod PodRef, typ, reason, msg string) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	now := metav1.NewTime(s.cfg.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + "." + hex.EncodeToString(b[:]), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID)},
		Reason:         reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: s.cfg.schedulerName()},
		ReportingController: "gpufleet.io/scheduler", ReportingInstance: s.cfg.schedulerName(),
	}
	var err error
	s.call(func() { _, err = s.cfg.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}) })
	if err != nil {
		s.cfg.Log.Warn("recording an event failed", "pod", pod.String(), "reason", reason, "err", err)
	}
}

// Steps is how many steps have run.
func (s *Scheduler) Steps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps
}
