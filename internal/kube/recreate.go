package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A bare pod gpufleet evicts (a preemption, a node release's drain, or
// a node that vanished under it) has no controller to make it again:
// gpufleet does, once it is gone. So that a restart in between does
// not lose it, the intent is written to the cluster before the pod is
// evicted: a ConfigMap in gpufleet's own namespace (the reservation
// namespace, gpufleet-system) labelled gpufleet.io/recreate, named
// after the pod's namespace and name, holding the pod to create (as
// recreateGone makes it) and the evicted pod's UID. Each step, and the
// first step of a new process, makes the recorded pods that are gone
// and deletes the record once the pod exists: a crash after the create
// and before the delete finds the pod there (another UID, or
// AlreadyExists) and only deletes the record, so the pod is made once.
//
// The records live in gpufleet's namespace, not the pod's, so that the
// RBAC they need is a Role in that one namespace (configmaps: get,
// list, create, update, delete) and nothing cluster-wide. Where that
// namespace is missing or the write is refused, the intent is kept in
// memory only, as before, with a warning.

// LabelRecreate marks the ConfigMaps that record a bare pod gpufleet
// evicted and will make again; its value is the pod's namespace.
const LabelRecreate = "gpufleet.io/recreate"

// recreation is a bare pod to make again once the evicted one is gone.
type recreation struct {
	uid types.UID   // the evicted pod's
	pod *corev1.Pod // the pod to create
	// record is the ConfigMap's name; "" when kept in memory only.
	record string
	// loaded: read from the cluster at start, written by a process
	// that may have stopped before its eviction was posted.
	loaded bool
}

// recordName is the ConfigMap that records pod namespace/name.
func recordName(key string) string {
	h := sha256.Sum256([]byte(key))
	return "recreate-" + hex.EncodeToString(h[:12])
}

// remake is the pod to create again in old's place: the same name,
// labels, annotations and spec, unbound, with the count of its
// preemptions.
func remake(old *corev1.Pod) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name,
		Labels: old.Labels, Annotations: map[string]string{}}, Spec: *old.Spec.DeepCopy()}
	for k, v := range old.Annotations {
		p.Annotations[k] = v
	}
	n := 0
	fmt.Sscan(old.Annotations[KeyPreemptions], &n)
	p.Annotations[KeyPreemptions] = fmt.Sprint(n + 1)
	p.Spec.NodeName = ""
	p.Spec.EphemeralContainers = nil // not allowed at create
	return p
}

// keep records that pod, about to be evicted, is to be made again: in
// the cluster where it can, else in memory.
func (s *Scheduler) keep(ctx context.Context, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	if r, ok := s.recreate[key]; ok && r.uid == pod.UID {
		return // recorded already
	}
	r := &recreation{uid: pod.UID, pod: remake(pod)}
	s.recreate[key] = r
	b, err := json.Marshal(r.pod)
	if err != nil {
		s.cfg.Log.Warn("recording a pod to recreate failed; kept in memory only", "pod", key, "err", err)
		return
	}
	ns, name := s.cfg.reservationNamespace(), recordName(key)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{LabelRecreate: pod.Namespace}},
		Data:       map[string]string{"pod": key, "uid": string(pod.UID), "pod.json": string(b)},
	}
	cms := s.cfg.Client.CoreV1().ConfigMaps(ns)
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{}) // a record of an earlier pod of that name
	}
	if err != nil {
		s.cfg.Log.Warn("recording a pod to recreate failed; kept in memory only (a restart before it is recreated loses it)", "pod", key, "namespace", ns, "err", err)
		return
	}
	r.record = name
}

// forget drops the record of the pod key.
func (s *Scheduler) forget(ctx context.Context, key string) {
	r, ok := s.recreate[key]
	if !ok {
		return
	}
	delete(s.recreate, key)
	if r.record == "" {
		return
	}
	err := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.reservationNamespace()).Delete(ctx, r.record, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		// Found again at the next start: the pod exists by then, so the
		// record is only deleted.
		s.cfg.Log.Warn("deleting a recreation record failed", "pod", key, "record", r.record, "err", err)
	}
}

// unkeep drops the record keep made for the pod key of uid when its
// eviction was not posted after all; a record of another pod of that
// name stays.
func (s *Scheduler) unkeep(ctx context.Context, key string, uid types.UID) {
	if r, ok := s.recreate[key]; ok && r.uid == uid {
		s.forget(ctx, key)
	}
}

// load reads the records a previous process left, once.
func (s *Scheduler) load(ctx context.Context) {
	if s.loaded {
		return
	}
	ns := s.cfg.reservationNamespace()
	l, err := s.cfg.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelRecreate})
	if err != nil {
		s.cfg.Log.Warn("reading the pods to recreate failed; again next step", "namespace", ns, "err", err)
		return
	}
	s.loaded = true
	for _, cm := range l.Items {
		var p corev1.Pod
		if err := json.Unmarshal([]byte(cm.Data["pod.json"]), &p); err != nil || p.Name == "" {
			s.cfg.Log.Warn("a recreation record does not hold a pod; left alone", "record", cm.Name, "err", err)
			continue
		}
		key := p.Namespace + "/" + p.Name
		if _, ok := s.recreate[key]; ok {
			continue
		}
		s.recreate[key] = &recreation{uid: types.UID(cm.Data["uid"]), pod: &p, record: cm.Name, loaded: true}
	}
	if len(l.Items) > 0 {
		s.cfg.Log.Info("pods to recreate read from the cluster", "records", len(l.Items))
	}
}

// recreateGone makes again the bare pods evicted that are gone, and
// deletes their records once they exist.
func (s *Scheduler) recreateGone(ctx context.Context, pods []*corev1.Pod) {
	s.load(ctx)
	if len(s.recreate) == 0 {
		return
	}
	byKey := map[string]*corev1.Pod{}
	for _, p := range pods {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	for key, r := range s.recreate {
		if p := byKey[key]; p != nil {
			switch {
			case p.UID != r.uid:
				s.forget(ctx, key) // made again (by us before a restart, or by someone)
			case r.loaded && p.DeletionTimestamp == nil && s.evicted[p.UID].IsZero():
				// Recorded by a process that stopped before its eviction
				// was posted: the pod runs on.
				s.cfg.Log.Info("recreation record of a pod never evicted; dropped", "pod", key)
				s.forget(ctx, key)
			}
			continue // still going
		}
		_, err := s.cfg.Client.CoreV1().Pods(r.pod.Namespace).Create(ctx, r.pod.DeepCopy(), metav1.CreateOptions{})
		switch {
		case err == nil:
			s.cfg.Log.Info("recreated preempted pod", "pod", key, "preemptions", r.pod.Annotations[KeyPreemptions])
			s.forget(ctx, key)
		case apierrors.IsAlreadyExists(err):
			s.forget(ctx, key) // made again first (by us before a restart, or by someone)
		default:
			s.cfg.Log.Warn("recreating preempted pod failed; retrying", "pod", key, "err", err)
		}
	}
}

// lost evicts (deletes) the pods of gpufleet's still bound to a node
// that is gone (a spot reclaim, a node deleted by hand): no kubelet
// ends them, and a bare one is recorded and made again, to wait for
// capacity. The pod garbage collector would delete them too, later,
// and not make the bare ones again.
func (s *Scheduler) lost(ctx context.Context, nodes []*corev1.Node, pods []*corev1.Pod) {
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || have[p.Spec.NodeName] || p.Spec.SchedulerName != s.cfg.schedulerName() ||
			p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, ok := s.evicted[p.UID]; ok {
			continue
		}
		if _, ok := s.assumed[p.UID]; ok {
			continue // bound by this step's overlay, not the cluster
		}
		key := p.Namespace + "/" + p.Name
		if bare(p) {
			s.keep(ctx, p)
		}
		zero := int64(0)
		uid := p.UID
		err := s.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			s.cfg.Log.Warn("deleting a pod of a node that is gone failed; again next step", "pod", key, "node", p.Spec.NodeName, "err", err)
			if bare(p) {
				s.forget(ctx, key)
			}
			continue
		}
		s.evicted[uid] = s.cfg.Clock.Now()
		what := "its controller recreates it"
		if bare(p) {
			what = "gpufleet recreates it from its spec, and it waits for capacity"
		}
		s.cfg.Log.Warn("pod of a node that is gone deleted", "pod", key, "node", p.Spec.NodeName, "recreate", bare(p))
		s.event(ctx, refOf(p), corev1.EventTypeWarning, "NodeLost", fmt.Sprintf("gpufleet: node %s is gone (a spot reclaim, or deleted); %s", p.Spec.NodeName, what))
	}
}
