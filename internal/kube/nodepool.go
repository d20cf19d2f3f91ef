package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/kubenodes"
)

// A node pool (Config.NodePool) makes the engine's fleet decisions act
// on the cluster: an Acquire makes a node through the pool, a Release
// (an idle node at its billing boundary) cordons, drains and deletes
// it. The nodes are the record, as the pods are: a pool node is a lease
// whose id is its name, whose offer and mode are its labels and whose
// billing started at its gpufleet.io/started-at annotation, so a
// restarted loop releases it at the same boundary; a node being made
// (not Ready yet) is a provisioning lease, so waiting pods pack into it
// rather than rent again; a cordoned one with the draining annotation
// is drained on, at every step, until it is gone. A node the pool did
// not make is never cordoned, drained or deleted: the engine's releases
// of other nodes are not acted on.
//
// What the loop keeps in memory beyond the cluster: when each pool
// node last became idle (lost on restart: a restarted loop counts the
// idle time afresh, which only delays a per-second release by MinIdle),
// the nodes it made that its informer does not show yet, and the
// highest lease number it used, so lease ids are not reused while it
// runs.
type nodePool struct {
	p *kubenodes.Pool
	// idle is each pool lease's IdleSince, as Apply left it.
	idle map[string]time.Time
	// made are the nodes acquired that the informer does not show yet.
	made map[string]made
	// next is the highest lease number used (L<next>).
	next int
	// passed is when each draining node was last drained, in real time
	// (a pass a second at most, however often pods and nodes change).
	passed map[string]time.Time
}

type made struct {
	token   string
	offer   *core.Offer
	mode    core.BillingMode
	started time.Time
}

func newNodePool(p *kubenodes.Pool) *nodePool {
	if p == nil {
		return nil
	}
	return &nodePool{p: p, idle: map[string]time.Time{}, made: map[string]made{}, passed: map[string]time.Time{}}
}

// noteID keeps next at least the number of lease id L<n>.
func (np *nodePool) noteID(id string) {
	if n, err := strconv.Atoi(strings.TrimPrefix(id, "L")); err == nil && strings.HasPrefix(id, "L") && n > np.next {
		np.next = n
	}
}

// poolBefore makes the pool's nodes leases of w's state as they are:
// a Ready node (Build's lease) gets its offer, mode, start and idle
// time; a node being made becomes a provisioning lease. The pool's
// offers are what the engine may rent.
func (s *Scheduler) poolBefore(w *World, nodes []*corev1.Node, now time.Time) {
	np := s.pool
	if np == nil {
		return
	}
	st := w.State
	// The engine matches a pod's models (its nodeSelector's label
	// values) against an offer's: the offers it rents from carry the
	// model as the pool's nodes are labelled.
	for _, o := range np.p.Offers() {
		o = cloneOffer(o)
		o.GPUModel = kubenodes.LabelValue(o.GPUModel)
		st.Offers = append(st.Offers, o)
	}
	byID := map[string]*engine.Lease{}
	for _, l := range st.Leases {
		byID[l.ID] = l
	}
	for _, n := range nodes {
		if !np.p.Owns(n) {
			continue
		}
		delete(np.made, n.Name)
		token := n.Labels[kubenodes.LabelLease]
		np.noteID(token)
		started, _ := kubenodes.StartedAt(n)
		mode := core.BillingMode(n.Labels[kubenodes.LabelMode])
		o, known := np.p.Offer(n.Annotations[kubenodes.AnnotationOffer])
		if l := byID[n.Name]; l != nil {
			l.Start, l.ReadyAt, l.ClientToken, l.IdleSince = started, started, token, np.idle[n.Name]
			if ts, err := kubenodes.EarlierTerms(n); err == nil {
				l.Earlier = ts
				if len(ts) > 0 {
					// Ready since its first term began.
					l.ReadyAt = ts[0].Start
				}
			} else {
				s.cfg.Log.Warn("a pool node's earlier terms do not read; billed from its current term", "node", n.Name, "err", err)
			}
			if known {
				poolOffer(l, o, mode)
			}
			continue
		}
		if !known || n.DeletionTimestamp != nil || n.Spec.Unschedulable || kubenodes.Ready(n) {
			continue // draining, going, or Ready with no GPU left to gpufleet
		}
		if l := provisioning(n.Name, token, o, mode, started); l != nil {
			st.Leases = append(st.Leases, l)
		}
	}
	for name, m := range np.made {
		if now.Sub(m.started) > time.Minute {
			delete(np.made, name) // the informer would show it by now: deleted since
			continue
		}
		if l := provisioning(name, m.token, m.offer, m.mode, m.started); l != nil {
			st.Leases = append(st.Leases, l)
		}
	}
	st.NextID = max(st.NextID, np.next)
}

// poolOffer prices a Ready pool node's lease by its offer and mode,
// keeping the GPUs Build counted (allocatable less others' pods).
func poolOffer(l *engine.Lease, o *core.Offer, mode core.BillingMode) {
	off := cloneOffer(*o)
	off.GPUs, off.GPUModel, off.GPUMemMiB = l.Offer.GPUs, l.Offer.GPUModel, l.Offer.GPUMemMiB
	i := slices.IndexFunc(off.Plans, func(p core.PricePlan) bool { return p.Mode == mode })
	if i < 0 {
		return
	}
	l.Offer, l.Plan, l.OfferID, l.Mode = &off, &off.Plans[i], o.ID, mode
	if p := l.Plan; p.Committed() {
		l.CommittedEnd = l.Start.Add(time.Duration(p.Term) * time.Second)
	}
}

// provisioning is the lease of a pool node not Ready yet.
func provisioning(name, token string, o *core.Offer, mode core.BillingMode, started time.Time) *engine.Lease {
	off := cloneOffer(*o)
	off.GPUModel = kubenodes.LabelValue(off.GPUModel) // as the node will be labelled
	i := slices.IndexFunc(off.Plans, func(p core.PricePlan) bool { return p.Mode == mode })
	if i < 0 {
		return nil
	}
	l := &engine.Lease{Lease: core.Lease{ID: name, OfferID: o.ID, Mode: mode, State: core.LeaseProvisioning, ProviderID: name,
		ClientToken: token, Start: started}, Offer: &off, Plan: &off.Plans[i]}
	if off.Plans[i].Committed() {
		l.CommittedEnd = started.Add(time.Duration(off.Plans[i].Term) * time.Second)
	}
	return l
}

// poolAfter acts on the step's fleet decisions: makes the nodes of the
// leases Apply created, cordons the pool nodes released, and drains the
// pool's cordoned nodes one pass further. Evicted pods of gpufleet's
// that no controller owns are made again once gone, as a preemption's
// are, and wait for capacity.
func (s *Scheduler) poolAfter(ctx context.Context, w *World, d engine.Decisions, created []*engine.Lease, nodes []*corev1.Node, pods []*corev1.Pod, now time.Time) {
	np := s.pool
	if np == nil {
		return
	}
	owned := map[string]*corev1.Node{}
	for _, n := range nodes {
		if np.p.Owns(n) {
			owned[n.Name] = n
		}
	}
	idle := map[string]time.Time{}
	for _, l := range w.State.Leases {
		if owned[l.ID] != nil && !l.State.Final() {
			idle[l.ID] = l.IdleSince
		}
	}
	np.idle = idle

	for i, l := range created {
		why := ""
		if i < len(d.Acquire) && len(created) == len(d.Acquire) {
			why = d.Acquire[i].Reason
		}
		m, err := np.p.Acquire(ctx, provider.AcquireRequest{ClientToken: l.ID, OfferID: l.OfferID, Mode: l.Mode})
		if err != nil {
			// Nothing was made: the pods still wait, and the next step
			// decides again under the same lease id.
			s.cfg.Log.Warn("acquiring a node failed; deciding again next step", "lease", l.ID, "offer", l.OfferID, "mode", l.Mode, "err", err)
			continue
		}
		np.noteID(l.ID)
		if owned[m.ProviderID] == nil {
			o, _ := np.p.Offer(l.OfferID)
			np.made[m.ProviderID] = made{token: l.ID, offer: o, mode: l.Mode, started: m.LaunchedAt}
		}
		if n, err := s.cfg.Client.CoreV1().Nodes().Get(ctx, m.ProviderID, metav1.GetOptions{}); err == nil {
			s.nodeEvent(ctx, n, "Acquired", fmt.Sprintf("gpufleet: lease %s, offer %s %s: %s", l.ID, l.OfferID, l.Mode, why))
		}
		s.cfg.Log.Info("node acquired", "node", m.ProviderID, "lease", l.ID, "offer", l.OfferID, "mode", l.Mode, "for", strings.Join(l.For, ","), "reason", why)
	}

	// A committed node renewed on another term: the node records it, so
	// that the next pass reads the lease as Apply left it.
	var leases map[string]*engine.Lease // built only when something renewed
	if len(d.Renew) > 0 {
		leases = make(map[string]*engine.Lease, len(w.State.Leases))
		for _, l := range w.State.Leases {
			leases[l.ID] = l
		}
	}
	for _, r := range d.Renew {
		n, l := owned[r.LeaseID], leases[r.LeaseID]
		if n == nil || l == nil {
			continue
		}
		if err := np.p.Renew(ctx, n.Name, l.Mode, l.Start, l.Earlier); err != nil {
			s.cfg.Log.Warn("recording a renewal on the node failed; it stays on its term", "node", n.Name, "lease", l.ID, "mode", l.Mode, "err", err)
			continue
		}
		s.cfg.Log.Info("node renewed", "node", n.Name, "lease", l.ID, "mode", l.Mode, "reason", r.Reason)
		s.nodeEvent(ctx, n, "Renewed", "gpufleet: "+r.Reason)
	}

	busy := map[string]int{} // gpufleet's pods bound to each node
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Spec.SchedulerName == s.cfg.schedulerName() && p.DeletionTimestamp == nil &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			busy[p.Spec.NodeName]++
		}
	}
	draining := map[string]bool{}
	for _, r := range d.Release {
		n := owned[r.LeaseID]
		if n == nil {
			continue // not the pool's: never cordoned
		}
		if busy[n.Name] > 0 {
			// Re-validated on the step's pods: work is on it (bound since
			// the snapshot the engine decided on, or moved there).
			s.cfg.Log.Warn("release not acted on: pods of gpufleet's are on the node", "node", n.Name, "pods", busy[n.Name])
			continue
		}
		if _, err := np.p.Cordon(ctx, n.Name); err != nil {
			s.cfg.Log.Warn("cordoning a node to release it failed; deciding again next step", "node", n.Name, "err", err)
			continue
		}
		s.cfg.Log.Info("releasing node: cordoned, draining", "node", n.Name, "lease", n.Labels[kubenodes.LabelLease], "reason", r.Why())
		s.nodeEvent(ctx, n, "Releasing", "gpufleet: cordoned and draining: "+r.Why())
		draining[n.Name] = true
		delete(np.passed, n.Name)
	}
	for name, n := range owned {
		if _, ok := kubenodes.Draining(n); ok && n.DeletionTimestamp == nil {
			draining[name] = true
		}
	}
	for name := range draining {
		// Paced in real time, as Run's ticker is: this bounds API calls,
		// it decides nothing.
		if at, ok := np.passed[name]; ok && time.Since(at) < time.Second {
			continue
		}
		np.passed[name] = time.Now()
		// The bare pods of gpufleet's the drain may evict are recorded
		// first (recreate.go); those it did not evict are forgotten.
		kept := map[string]types.UID{}
		for _, p := range pods {
			if p.Spec.NodeName == name && s.drainsOurs(p) {
				s.keep(ctx, p)
				kept[p.Namespace+"/"+p.Name] = p.UID
			}
		}
		dr, err := np.p.Drain(ctx, name)
		for _, p := range dr.Evicted {
			delete(kept, p.Namespace+"/"+p.Name)
			s.drained(ctx, p, name, now)
		}
		for key, uid := range kept {
			s.unkeep(ctx, key, uid)
		}
		if err != nil {
			s.cfg.Log.Warn("draining a node failed; again next step", "node", name, "err", err)
			continue
		}
		switch {
		case dr.Deleted:
			delete(np.passed, name)
			delete(np.idle, name)
		case dr.TimedOut:
			s.cfg.Log.Warn("drain timed out", "node", name, "left", dr.String())
		case len(dr.Blocked) > 0:
			s.cfg.Log.Info("drain waits: evictions refused, retried next pass", "node", name, "left", dr.String())
		}
	}
	for name := range np.passed {
		if owned[name] == nil {
			delete(np.passed, name)
		}
	}
}

// drained notes a pod a drain evicted: one of gpufleet's is being
// deleted (the assume overlay), and a bare one is made again once gone.
func (s *Scheduler) drained(ctx context.Context, p *corev1.Pod, node string, now time.Time) {
	if p.Spec.SchedulerName != s.cfg.schedulerName() {
		return
	}
	s.evicted[types.UID(p.UID)] = now
	what := "its controller recreates it"
	if bare(p) {
		s.keep(ctx, p) // recorded before the drain, unless it was not in the step's pods
		what = "gpufleet recreates it from its spec once it is gone, and it waits for capacity"
	}
	s.cfg.Log.Info("evicted for node release", "pod", refOf(p).String(), "node", node, "recreate", bare(p))
	if s.afterEvict != nil {
		s.afterEvict()
	}
	s.event(ctx, refOf(p), corev1.EventTypeWarning, "Evicted", fmt.Sprintf("gpufleet: evicted (SIGTERM, then its grace period): node %s is released at its billing boundary; %s", node, what))
}

// drainsOurs is whether a drain would evict p and gpufleet make it
// again: a bare pod of gpufleet's, running, not being deleted.
func (s *Scheduler) drainsOurs(p *corev1.Pod) bool {
	return p.Spec.SchedulerName == s.cfg.schedulerName() && bare(p) && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// nodeEvent records an Event about a pool node (in namespace default,
// where the kubelet records a node's), from gpufleet.
func (s *Scheduler) nodeEvent(ctx context.Context, n *corev1.Node, reason, msg string) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	now := metav1.NewTime(s.cfg.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: n.Name + "." + hex.EncodeToString(b[:]), Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: s.cfg.schedulerName()},
		ReportingController: "gpufleet.io/scheduler", ReportingInstance: s.cfg.schedulerName(),
	}
	if _, err := s.cfg.Client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		s.cfg.Log.Warn("recording a node event failed", "node", n.Name, "reason", reason, "err", err)
	}
}
