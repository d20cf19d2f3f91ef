package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/gpufleet/internal/capacity"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
)

// Sharing a GPU on the standard NVIDIA device plugin, the way
// KAI-Scheduler does it (docs/kubernetes.md): a pod asks for a share
// (gpufleet.io/gpu-fraction, gpufleet.io/gpu-memory) and requests no
// nvidia.com/gpu. The engine places it as a unit of that many
// milli-GPUs and that much memory on one GPU index of a node. The first
// share on a GPU makes a reservation pod, in the reservation namespace,
// bound to the node and requesting nvidia.com/gpu: 1: the kubelet's
// device plugin gives it a GPU and counts it taken, so kube-scheduler
// and the kubelet never give that GPU to a whole-GPU pod. Its container
// writes the device ID it was given on its own pod (gpufleet.io/gpu-id);
// gpufleet then writes that ID, the reservation's name and the memory
// limit on each pod sharing the GPU and binds it there. The pod's
// containers read them through the downward API (NVIDIA_VISIBLE_DEVICES
// from the gpufleet.io/gpu-id annotation). Everything is on the pods, so
// a restarted gpufleet reads the sharing back; a reservation no pod
// shares any more is deleted.

// DefaultReservationImage runs a reservation pod's container: `gpufleet
// kube-reservation` reports the GPU the device plugin gave it and waits.
const DefaultReservationImage = "ghcr.io/gpufleet/gpufleet:latest"

// Share is what gpufleet writes on a pod that shares a GPU before it
// binds it.
type Share struct {
	// Reservation is the reservation pod's name, in Namespace.
	Reservation, Namespace string
	// Create: the reservation is new, made on Node before the pod is
	// annotated.
	Create bool
	Node   string
	// DeviceID is the GPU's ID as its reservation reported it; "" while
	// it has not: the pod is annotated (placed) and waits unbound.
	DeviceID string
	// MemMiB is the GPU memory the pod may use (0: the node's GPU memory
	// is unknown).
	MemMiB int64
}

// isReservation reports whether p is one of gpufleet's reservation pods.
func isReservation(p *corev1.Pod, o Options) bool {
	return p.Namespace == o.reservationNamespace() && p.Labels[LabelReservation] != ""
}

// reservation is a reservation pod as Build sees it.
type reservation struct {
	pod   *corev1.Pod
	node  string
	users int
	idx   int // its GPU index on its node's lease; -1: none
	// gpu is the reserved GPU as the engine sees it, a node of one GPU:
	// the capacity module's Take says what fits on it, as the engine's.
	gpu core.Node
}

func (r *reservation) id() string { return r.pod.Annotations[KeyGPUID] }

// shareRequest is the engine's request of a pod that shares a GPU.
func shareRequest(s Spec) core.Request {
	return core.Request{GPUs: 1, MilliPerGPU: s.Milli, MemPerGPUMiB: s.MemMiB}
}

// need is the GPU memory (MiB) a share takes on a GPU of mem MiB, by the
// capacity module's one rule: what it asked for, else its fraction of
// the GPU's.
func need(s Spec, mem int64) int64 {
	r := shareRequest(s)
	return capacity.GPUMem(&core.Node{GPUMemMiB: mem}, &r)
}

// take takes a share from the reservation's GPU, if it fits there (the
// engine would refuse a running unit that does not).
func (r *reservation) take(s Spec) bool {
	if r.idx < 0 {
		return false
	}
	req := shareRequest(s)
	return capacity.Take(&r.gpu, &req, []int{0}) == nil
}

// sharing is a step's reservations and the shares on them.
type sharing struct {
	ns      string
	byName  map[string]*reservation // not being deleted
	all     []*reservation          // by name, being deleted too
	at      map[string]map[int]*reservation
	names   map[string]bool
	ended   []*corev1.Pod             // reservation pods that ended: deleted
	made    map[string]map[int]string // this step's new reservations: node, index
	nodeMem map[string]int64
	maxMem  int64
}

func newSharing(pods []*corev1.Pod, machines map[string]*Machine, ns string) *sharing {
	sh := &sharing{ns: ns, byName: map[string]*reservation{}, at: map[string]map[int]*reservation{}, names: map[string]bool{},
		made: map[string]map[int]string{}, nodeMem: map[string]int64{}}
	for n, m := range machines {
		sh.nodeMem[n] = m.Offer.GPUMemMiB
		sh.maxMem = max(sh.maxMem, m.Offer.GPUMemMiB)
	}
	for _, p := range pods {
		sh.names[p.Name] = true
		if p.Spec.NodeName == "" {
			continue // made bound: not one of gpufleet's
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if p.DeletionTimestamp == nil {
				sh.ended = append(sh.ended, p)
			}
			continue
		}
		r := &reservation{pod: p, node: p.Spec.NodeName, idx: -1}
		sh.all = append(sh.all, r)
		if p.DeletionTimestamp == nil {
			sh.byName[p.Name] = r
		}
	}
	sort.Slice(sh.all, func(i, j int) bool { return sh.all[i].pod.Name < sh.all[j].pod.Name })
	return sh
}

// resolve gives a pod that asks for GPU memory alone its share: that
// memory over the largest GPU memory of the nodes (so that fair share
// and quotas count it), at least 1 milli-GPU and less than a whole GPU.
func (sh *sharing) resolve(s *Spec) error {
	if s.Milli > 0 {
		return nil
	}
	if sh.maxMem == 0 {
		return &core.FieldError{Field: KeyGPUMemory, Value: fmt.Sprintf("%dMi", s.MemMiB),
			Allowed: "GPU memory on nodes that say theirs (the " + LabelGPUMemory + " label of GPU feature discovery): no GPU node does; give " + KeyGPUFraction + " instead"}
	}
	m := (s.MemMiB*int64(core.WholeGPU) + sh.maxMem - 1) / sh.maxMem
	s.Milli = core.Milli(min(max(m, 1), int64(core.WholeGPU)-1))
	return nil
}

// holding is the reservation whose GPU p shares (its gpufleet.io/gpu-group,
// on p's node when p is bound), or nil.
func (sh *sharing) holding(p *corev1.Pod) *reservation {
	r := sh.byName[p.Annotations[KeyGPUGroup]]
	if r == nil || (p.Spec.NodeName != "" && p.Spec.NodeName != r.node) {
		return nil
	}
	return r
}

// use counts p as a user of its reservation.
func (sh *sharing) use(p *corev1.Pod, _ Spec) {
	if r := sh.holding(p); r != nil {
		r.users++
	}
}

// idle is the reservations no pod shares and those being deleted: they
// hold their GPUs and are no index.
func (sh *sharing) idle() []*reservation {
	var out []*reservation
	for _, r := range sh.all {
		if r.users == 0 || r.pod.DeletionTimestamp != nil {
			out = append(out, r)
		}
	}
	return out
}

// index gives each reservation that pods share a GPU index of its node.
func (sh *sharing) index(free map[string][]int) {
	for _, r := range sh.all {
		if r.users == 0 || r.pod.DeletionTimestamp != nil {
			continue
		}
		gs := takeGPUs(free, r.node, 1)
		if gs == nil {
			continue // its node is not capacity, or has no GPU left for it
		}
		mem := sh.nodeMem[r.node]
		r.idx = gs[0]
		r.gpu = core.Node{LeaseID: r.node, GPUMemMiB: mem, GPUs: []core.GPU{{FreeMilli: core.WholeGPU, FreeMemMiB: mem}}}
		if sh.at[r.node] == nil {
			sh.at[r.node] = map[int]*reservation{}
		}
		sh.at[r.node][r.idx] = r
	}
}

// sharedUnit makes u, a pod that shares a GPU, running on its
// reservation's index when it is bound there or placed there (annotated,
// not yet bound), else leaves it pending. A placed pod whose reservation
// has reported its GPU is bound now; one whose has not waits. It returns
// false for a pod bound where gpufleet counts no share (its reservation
// gone): no unit.
func (w *World) sharedUnit(u *engine.Unit, p *corev1.Pod, s Spec) bool {
	r := w.shared.holding(p)
	if r == nil || !r.take(s) {
		return p.Spec.NodeName == ""
	}
	u.State, u.Job.State = core.JobRunning, core.JobRunning
	u.Parts = []engine.Assigned{{LeaseID: r.node, GPUs: []int{r.idx}}}
	u.Start = p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		u.Start = p.Status.StartTime.Time
	}
	if p.Spec.NodeName != "" {
		return true
	}
	if id := r.id(); id != "" {
		w.Binds = append(w.Binds, []Bind{{Pod: refOf(p), Node: r.node,
			Reason: fmt.Sprintf("shares the GPU reservation pod %s/%s holds (%s)", w.shared.ns, r.pod.Name, id),
			Share:  &Share{Reservation: r.pod.Name, Namespace: w.shared.ns, Node: r.node, DeviceID: id, MemMiB: need(s, r.gpu.GPUMemMiB)}}})
		return true
	}
	w.Waits = append(w.Waits, Wait{Pod: refOf(p), Cond: condOf(p), Reason: waitingForDevice(r.node, w.shared.ns, r.pod.Name),
		NotBefore: r.pod.CreationTimestamp.Add(deviceWait)})
	return true
}

// deviceWait is how long a pod placed on a shared GPU waits for its
// reservation's device ID before its condition says so.
const deviceWait = 10 * time.Second

func waitingForDevice(node, ns, name string) string {
	return fmt.Sprintf("placed on %s, sharing the GPU reservation pod %s/%s holds: bound once its container reports the GPU's device ID (%s)", node, ns, name, KeyGPUID)
}

// place is the Share of a pod the engine placed on part: the reservation
// already at that GPU index, or a new one.
func (sh *sharing) place(part engine.Assigned, s Spec) *Share {
	g := part.GPUs[0]
	sr := &Share{Namespace: sh.ns, Node: part.LeaseID, MemMiB: need(s, sh.nodeMem[part.LeaseID])}
	if r := sh.at[part.LeaseID][g]; r != nil {
		sr.Reservation, sr.DeviceID = r.pod.Name, r.id()
		return sr
	}
	if name := sh.made[part.LeaseID][g]; name != "" {
		sr.Reservation, sr.Create = name, true
		return sr
	}
	sr.Reservation, sr.Create = sh.newName(part.LeaseID), true
	if sh.made[part.LeaseID] == nil {
		sh.made[part.LeaseID] = map[int]string{}
	}
	sh.made[part.LeaseID][g] = sr.Reservation
	return sr
}

// newName is a reservation pod name on node that no reservation has:
// gpu-<node>-<n>, the lowest n free (a hash of the node's name for a
// name too long).
func (sh *sharing) newName(node string) string {
	base := "gpu-" + node
	if len(base) > 200 {
		h := sha256.Sum256([]byte(node))
		base = "gpu-" + node[:100] + "-" + hex.EncodeToString(h[:8])
	}
	for n := 0; ; n++ {
		name := base + "-" + strconv.Itoa(n)
		if !sh.names[name] {
			sh.names[name] = true
			return name
		}
	}
}

// ReservationPod is the reservation pod that holds a shared GPU on node:
// bound there (no scheduler places it), requesting nvidia.com/gpu: 1, and
// tolerating every taint (it only holds the GPU). Its container gets its
// pod's name and namespace from the downward API, to write the device ID
// on it.
func ReservationPod(o Options, name, node string) *corev1.Pod {
	image, sa := o.ReservationImage, o.ReservationServiceAccount
	if image == "" {
		image = DefaultReservationImage
	}
	if sa == "" {
		sa = "gpufleet-reservation"
	}
	grace := int64(1)
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.reservationNamespace(),
			Labels: map[string]string{LabelReservation: "gpu", "app.kubernetes.io/managed-by": "gpufleet"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			ServiceAccountName:            sa,
			TerminationGracePeriodSeconds: &grace,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "reserve", Image: image, Args: []string{"kube-reservation"},
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: field("metadata.name")}, {Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{ResourceGPU: resource.MustParse("1")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				},
			}},
		},
	}
}

// sharePatch is the merge patch that places a pod on a shared GPU: its
// reservation, its memory limit and (once reported) the GPU's device ID;
// the pod's UID is the precondition.
func sharePatch(uid string, sr *Share) []byte {
	ann := map[string]any{KeyGPUGroup: sr.Reservation, KeyGPUID: nil, KeyGPUMemoryLimit: nil}
	if sr.DeviceID != "" {
		ann[KeyGPUID] = sr.DeviceID
	}
	if sr.MemMiB > 0 {
		ann[KeyGPUMemoryLimit] = strconv.FormatInt(sr.MemMiB, 10)
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": ann}})
	return b
}

// ReportReservation is what a reservation pod's container does once: it
// writes the device ID the device plugin gave it (its
// NVIDIA_VISIBLE_DEVICES: one GPU's UUID, or its index) on its own pod,
// as gpufleet.io/gpu-id. An ID that is not one device is refused.
func ReportReservation(ctx context.Context, client kubernetes.Interface, namespace, name, deviceID string) error {
	id := strings.TrimSpace(deviceID)
	switch {
	case id == "", id == "all", id == "none", id == "void", strings.Contains(id, ","):
		return fmt.Errorf("kube: reservation %s/%s: NVIDIA_VISIBLE_DEVICES %q: want the one GPU the device plugin gave the pod (a UUID or an index); is the device plugin's device-list-strategy envvar?", namespace, name, deviceID)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{KeyGPUID: id}}})
	_, err := client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("kube: reservation %s/%s: %w", namespace, name, err)
	}
	return nil
}

// reserve starts making the step's new reservation pods (each once,
// however many pods were placed on its GPU); the pods placed on one are
// annotated once it is made (share), while the step's other bindings go
// on.
func (s *Scheduler) reserve(ctx context.Context, binds [][]Bind, now time.Time) {
	s.reserving = map[string]chan struct{}{}
	s.unmade = map[string]bool{}
	for _, bs := range binds {
		for _, b := range bs {
			sr := b.Share
			if sr == nil || !sr.Create || s.reserving[sr.Reservation] != nil {
				continue
			}
			done := make(chan struct{})
			s.reserving[sr.Reservation] = done
			key := sr.Namespace + "/" + sr.Reservation
			go func() {
				defer close(done)
				var p *corev1.Pod
				var err error
				s.call(func() {
					p, err = s.cfg.Client.CoreV1().Pods(sr.Namespace).Create(ctx, ReservationPod(s.cfg.Options, sr.Reservation, sr.Node), metav1.CreateOptions{})
				})
				s.wmu.Lock()
				defer s.wmu.Unlock()
				switch {
				case err == nil:
					if p.CreationTimestamp.IsZero() {
						p.CreationTimestamp = metav1.NewTime(now)
					}
					s.made[key] = p
					s.cfg.Log.Info("reserved a GPU to share", "reservation", key, "node", sr.Node)
				case apierrors.IsAlreadyExists(err):
					// Made by an earlier step the informer does not show yet.
				default:
					s.unmade[sr.Reservation] = true
					s.cfg.Log.Warn("making a reservation pod failed; its pods are placed again", "reservation", key, "node", sr.Node, "err", err)
				}
			}()
		}
	}
}

// share writes a pod's share (its reservation, memory limit and, once
// reported, the GPU's device ID) on it, and says whether to bind it now:
// not while the reservation has not reported its GPU (the pod waits, with
// that reason) nor when a write failed (the next step decides again).
func (s *Scheduler) share(ctx context.Context, b Bind) bool {
	sr := b.Share
	if done := s.reserving[sr.Reservation]; done != nil {
		<-done
	}
	s.wmu.Lock()
	unmade := s.unmade[sr.Reservation]
	s.wmu.Unlock()
	if unmade {
		return false
	}
	var err error
	s.call(func() {
		_, err = s.cfg.Client.CoreV1().Pods(b.Pod.Namespace).Patch(ctx, b.Pod.Name, types.MergePatchType, sharePatch(b.Pod.UID, sr), metav1.PatchOptions{})
	})
	if err != nil {
		s.cfg.Log.Warn("writing a pod's GPU share failed", "pod", b.Pod.String(), "reservation", sr.Reservation, "err", err)
		return false
	}
	ann := map[string]string{KeyGPUGroup: sr.Reservation, KeyGPUID: sr.DeviceID, KeyGPUMemoryLimit: ""}
	if sr.MemMiB > 0 {
		ann[KeyGPUMemoryLimit] = strconv.FormatInt(sr.MemMiB, 10)
	}
	s.wmu.Lock()
	s.shared[types.UID(b.Pod.UID)] = ann
	s.wmu.Unlock()
	if sr.DeviceID == "" {
		return false // waits for the device ID; Build says so after deviceWait
	}
	return true
}

// release deletes the reservation pods no pod shares any more: their
// GPUs go back to whoever needs a whole one.
func (s *Scheduler) release(ctx context.Context, refs []PodRef, now time.Time) {
	for _, r := range refs {
		uid := types.UID(r.UID)
		if _, ok := s.evicted[uid]; ok {
			continue
		}
		err := s.cfg.Client.CoreV1().Pods(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			s.cfg.Log.Warn("releasing a reservation pod failed; retrying", "reservation", r.String(), "err", err)
			continue
		}
		s.evicted[uid] = now
		delete(s.made, r.String())
		s.cfg.Log.Info("released a shared GPU: no pod shares it", "reservation", r.String())
	}
}
