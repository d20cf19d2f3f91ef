package kube

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Options is what translation needs besides the cluster's objects.
type Options struct {
	// SchedulerName selects the pods that are gpufleet's (default
	// SchedulerName).
	SchedulerName string
	// Teams maps a namespace to its team; a namespace not named is its
	// own team.
	Teams map[string]string
	// Catalog is the offers a node's gpufleet.io/offer or instance-type
	// label is looked up in, for its price plans.
	Catalog []core.Offer
	// Quotas are the teams (by the IDs Teams maps namespaces to) with
	// their quotas per GPU model, cohorts and fair-share weights: the
	// engine's State.Teams. None: no team is quota-managed.
	Quotas []core.Team
	// ReservationNamespace is where the reservation pods of shared GPUs
	// are made (default ReservationNamespace); ReservationImage and
	// ReservationServiceAccount are their container's image (default
	// DefaultReservationImage, which runs `gpufleet kube-reservation`)
	// and service account (default "gpufleet-reservation").
	ReservationNamespace      string
	ReservationImage          string
	ReservationServiceAccount string
}

func (o Options) reservationNamespace() string {
	if o.ReservationNamespace == "" {
		return ReservationNamespace
	}
	return o.ReservationNamespace
}

func (o Options) schedulerName() string {
	if o.SchedulerName == "" {
		return SchedulerName
	}
	return o.SchedulerName
}

// Team is the team of a namespace.
func (o Options) Team(namespace string) string {
	if t, ok := o.Teams[namespace]; ok && t != "" {
		return t
	}
	return namespace
}

// Machine is a GPU node as capacity: the offer it is (its GPUs the
// node's allocatable nvidia.com/gpu) and the plan it is priced by.
type Machine struct {
	Node  string
	Offer core.Offer
	Plan  int // index in Offer.Plans
}

// NodeMachine reads a node as capacity. A node that is not (no
// nvidia.com/gpu allocatable, cordoned, not Ready, being deleted) gives
// false and why.
func NodeMachine(n *corev1.Node, catalog []core.Offer) (Machine, string, bool) {
	q, ok := n.Status.Allocatable[ResourceGPU]
	if !ok || q.Value() < 1 {
		return Machine{}, "no nvidia.com/gpu allocatable", false
	}
	switch {
	case n.DeletionTimestamp != nil:
		return Machine{}, "being deleted", false
	case n.Spec.Unschedulable:
		return Machine{}, "cordoned (spec.unschedulable)", false
	case !nodeReady(n):
		return Machine{}, "not Ready", false
	}
	m := Machine{Node: n.Name, Offer: nodeOffer(n, catalog)}
	m.Offer.GPUs = int(q.Value())
	m.Offer.SliceMilli = 0 // a device-plugin GPU is a whole GPU
	if p := n.Labels[LabelGPUProduct]; p != "" {
		m.Offer.GPUModel = p
	}
	if m.Offer.GPUModel == "" {
		m.Offer.GPUModel = "unknown"
	}
	if s := n.Labels[LabelGPUMemory]; s != "" {
		if mib, err := strconv.ParseInt(s, 10, 64); err == nil && mib > 0 {
			m.Offer.GPUMemMiB = mib
		}
	}
	m.Plan = 0
	for i, p := range m.Offer.Plans {
		if p.Mode == core.OnDemand {
			m.Plan = i
			break
		}
	}
	return m, "", true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeOffer is the catalog offer the node's labels name (a copy), or one
// made for it at no price: the engine then ranks its nodes by fit alone.
func nodeOffer(n *corev1.Node, catalog []core.Offer) core.Offer {
	if id := n.Labels[LabelOffer]; id != "" {
		for _, o := range catalog {
			if o.ID == id {
				return cloneOffer(o)
			}
		}
	}
	if it := n.Labels[LabelInstanceType]; it != "" {
		region := n.Labels[corev1.LabelTopologyRegion]
		var found *core.Offer
		for i := range catalog {
			o := &catalog[i]
			if o.InstanceType != it {
				continue
			}
			if found == nil || (region != "" && o.Region == region && found.Region != region) {
				found = o
			}
		}
		if found != nil {
			return cloneOffer(*found)
		}
	}
	id := "kube/node/" + n.Name
	if it := n.Labels[LabelInstanceType]; it != "" {
		id = "kube/" + it
	}
	if id := n.Labels[LabelOffer]; id != "" {
		id = "kube/" + id
	}
	return core.Offer{ID: id, Provider: "kubernetes", InstanceType: n.Labels[LabelInstanceType],
		Plans: []core.PricePlan{{Mode: core.OnDemand, Per: core.Hour, Granularity: 1}}}
}

func cloneOffer(o core.Offer) core.Offer {
	o.Plans = slices.Clone(o.Plans)
	return o
}

// Spec is what a pod asks of gpufleet, read from its spec, labels and
// annotations.
type Spec struct {
	Team          string
	Tier          core.Tier
	GPUs          int // this pod's
	Models        []string
	Duration      time.Duration
	Deadline      time.Time
	Deferrable    bool
	Interruptible bool
	Gang          string
	GangSize      int
	// Milli is the share of one GPU a pod that shares a GPU asks for
	// (gpufleet.io/gpu-fraction), MemMiB the GPU memory
	// (gpufleet.io/gpu-memory); both 0 for a pod of whole GPUs.
	Milli  core.Milli
	MemMiB int64
}

// Shares reports whether the pod asks for a share of one GPU.
func (s Spec) Shares() bool { return s.Milli > 0 || s.MemMiB > 0 }

// maxGPUMemory is the most GPU memory a share may ask for.
var maxGPUMemory = resource.MustParse("1Ei")

// PodSpec reads what pod asks. An error names the key, the value and
// what is allowed; the pod then waits with it as its reason.
func PodSpec(p *corev1.Pod, o Options) (Spec, error) {
	s := Spec{Team: o.Team(p.Namespace), Tier: core.TierRegular, GPUs: PodGPUs(p)}
	if err := shareSpec(p, &s); err != nil {
		return s, err
	}
	if s.GPUs < 1 {
		return s, &core.FieldError{Field: "resources nvidia.com/gpu", Value: "0", Allowed: "gpufleet schedules GPU pods: request at least 1 nvidia.com/gpu"}
	}
	a, l := p.Annotations, p.Labels
	if v, ok := get(a, l, KeyTier); ok {
		t, err := core.ParseTier(v)
		if err != nil {
			return s, &core.FieldError{Field: KeyTier, Value: v, Allowed: "core, regular or offline"}
		}
		s.Tier = t
	} else if pc := strings.TrimPrefix(p.Spec.PriorityClassName, "gpufleet-"); pc != "" {
		if t, err := core.ParseTier(pc); err == nil {
			s.Tier = t
		}
	}
	if v, ok := get(a, l, KeyDuration); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, &core.FieldError{Field: KeyDuration, Value: v, Allowed: "a Go duration >= 0 (90m, 3h)"}
		}
		s.Duration = d
	}
	if v, ok := get(a, l, KeyDeadline); ok {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return s, &core.FieldError{Field: KeyDeadline, Value: v, Allowed: "an RFC 3339 time (2026-12-24T18:00:00Z)"}
		}
		s.Deadline = t
	}
	var err error
	if s.Deferrable, err = boolKey(a, l, KeyDeferrable); err != nil {
		return s, err
	}
	if s.Interruptible, err = boolKey(a, l, KeyInterruptible); err != nil {
		return s, err
	}
	if g, ok := get(a, l, KeyGang); ok && g != "" {
		if s.Shares() {
			return s, &core.FieldError{Field: KeyGang, Value: g, Allowed: "no gang for a pod that shares a GPU (" + KeyGPUFraction + ", " + KeyGPUMemory + "): a gang's pods take whole GPUs"}
		}
		s.Gang = g
		v, _ := get(a, l, KeyGangSize)
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return s, &core.FieldError{Field: KeyGangSize, Value: v, Allowed: "the gang's pod count, 1..1024, with " + KeyGang}
		}
		s.GangSize = n
	}
	s.Models = podModels(p)
	return s, nil
}

// shareSpec reads a pod's share of one GPU (gpufleet.io/gpu-fraction,
// gpufleet.io/gpu-memory) into s; a pod that shares a GPU is one GPU's
// worth of work that requests no nvidia.com/gpu.
func shareSpec(p *corev1.Pod, s *Spec) error {
	frac, hasF := get(p.Annotations, p.Labels, KeyGPUFraction)
	mem, hasM := get(p.Annotations, p.Labels, KeyGPUMemory)
	if !hasF && !hasM {
		return nil
	}
	if s.GPUs > 0 {
		key, val := KeyGPUFraction, frac
		if !hasF {
			key, val = KeyGPUMemory, mem
		}
		return &core.FieldError{Field: key, Value: val, Allowed: fmt.Sprintf("a pod that shares a GPU requests no nvidia.com/gpu (this one requests %d): the reservation pod gpufleet makes holds the whole GPU", s.GPUs)}
	}
	if hasF {
		f, err := strconv.ParseFloat(strings.TrimSpace(frac), 64)
		m := math.Round(f * float64(core.WholeGPU))
		if err != nil || !(f > 0 && f < 1) || m < 1 || m >= float64(core.WholeGPU) {
			return &core.FieldError{Field: KeyGPUFraction, Value: frac, Allowed: "a share of one GPU above 0 and below 1, to a thousandth (0.25, 0.5); a whole GPU is nvidia.com/gpu: 1"}
		}
		s.Milli = core.Milli(m)
	}
	if hasM {
		// At most 1Ei: past int64's bytes a quantity's Value saturates,
		// and rounding it up to MiB would wrap below zero.
		q, err := resource.ParseQuantity(strings.TrimSpace(mem))
		if err != nil || q.Value() < 1<<20 || q.Cmp(maxGPUMemory) > 0 {
			return &core.FieldError{Field: KeyGPUMemory, Value: mem, Allowed: "GPU memory as a quantity from 1Mi to 1Ei (20Gi, 2000Mi)"}
		}
		s.MemMiB = (q.Value() + 1<<20 - 1) >> 20
	}
	s.GPUs = 1
	return nil
}

func boolKey(a, l map[string]string, key string) (bool, error) {
	v, ok := get(a, l, key)
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &core.FieldError{Field: key, Value: v, Allowed: "true or false"}
	}
	return b, nil
}

// PodGPUs is the nvidia.com/gpu the pod holds on its node: the sum over
// its containers, or its largest init container's if more (the
// kube-scheduler's rule for a pod's effective request).
func PodGPUs(p *corev1.Pod) int {
	one := func(c *corev1.Container) int64 {
		if q, ok := c.Resources.Limits[ResourceGPU]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Requests[ResourceGPU]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for i := range p.Spec.Containers {
		sum += one(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += one(c) // a sidecar runs alongside
			continue
		}
		initMax = max(initMax, one(c))
	}
	return int(max(sum, initMax))
}

// podModels is the GPU models the pod's nodeSelector and required node
// affinity allow (nil: any). Affinity terms are ORed, so the models are
// their union, unless one term does not constrain the model.
func podModels(p *corev1.Pod) []string {
	var models []string
	if v, ok := p.Spec.NodeSelector[LabelGPUProduct]; ok {
		models = []string{v}
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return models
	}
	var union []string
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var in []string
		constrained := false
		for _, e := range t.MatchExpressions {
			if e.Key != LabelGPUProduct || e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if constrained {
				in = slices.DeleteFunc(in, func(m string) bool { return !slices.Contains(e.Values, m) })
			} else {
				in, constrained = slices.Clone(e.Values), true
			}
		}
		if !constrained {
			return models // this term allows any model
		}
		union = append(union, in...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	if models != nil {
		return slices.DeleteFunc(union, func(m string) bool { return m != models[0] })
	}
	return union
}

// Exit reads how a finished pod ended: its phase and the exit code of
// the first container that failed (else 0). ok is false while it runs.
func Exit(p *corev1.Pod) (code int, reason string, ok bool) {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return 0, "pod succeeded: every container exited 0", true
	case corev1.PodFailed:
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return int(t.ExitCode), fmt.Sprintf("pod failed: container %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason), true
			}
		}
		why := p.Status.Reason
		if why == "" {
			why = "no container reported a non-zero exit"
		}
		return 1, "pod failed: " + why, true
	}
	return 0, "", false
}

// PodRef names a pod (and its UID, a precondition of every write).
type PodRef struct {
	Namespace, Name, UID string
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

func refOf(p *corev1.Pod) PodRef {
	return PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// group is the pods behind one unit.
type group struct {
	pods   []*corev1.Pod // by name
	perPod int
	// share is set for a pod that shares a GPU (one pod, one GPU).
	share *Spec
}

// World is the engine's state made from a snapshot of the cluster, with
// what it takes to turn the engine's decisions back into actions.
type World struct {
	State *engine.State
	// Waits are the pods that are no unit (a bad annotation, an
	// incomplete gang) and why: they wait with that reason.
	Waits []Wait
	// Binds are pods already placed on a shared GPU (gpufleet.io/gpu-group)
	// whose reservation pod has reported its device since: they are bound
	// now, each a list of its own.
	Binds [][]Bind
	// Release are the reservation pods no pod shares any more: deleted,
	// their GPU freed.
	Release []PodRef
	groups  map[string]*group
	shared  *sharing
}

// Build makes the engine's state from the cluster's nodes and pods: a
// ready lease per GPU node (its GPUs less those held by other schedulers'
// pods and by reservation pods no pod shares), a running unit per bound
// pod (or gang) of gpufleet's and per pod placed on a shared GPU, a
// pending unit per unbound one. A bound pod of gpufleet's that is no unit
// of its own (being deleted, left of a gang, or with a spec that cannot
// be read) is a running unit nothing preempts, so its GPUs count in its
// team's quota. Lease ids are node names; unit keys are namespace/pod or
// namespace/gang/name. A reservation pod that pods share is one GPU
// index of its node, and the units of its pods take their shares of that
// index (share.go).
func Build(nodes []*corev1.Node, pods []*corev1.Pod, o Options) *World {
	w := &World{State: &engine.State{Spent: map[string]core.Micros{}, Teams: slices.Clone(o.Quotas)}, groups: map[string]*group{}}
	machines := map[string]*Machine{}
	var names []string
	for _, n := range nodes {
		if m, _, ok := NodeMachine(n, o.Catalog); ok {
			machines[n.Name] = &m
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	name := o.schedulerName()
	held := map[string]int{} // GPUs on each node held by no unit
	var ours, reservations []*corev1.Pod
	// ending are gpufleet's bound pods being deleted (a victim in its
	// grace period): their GPUs stay their team's until they are gone,
	// or a team whose pod was preempted could be given its quota twice.
	var ending []endingPod
	// unreadable are gpufleet's bound pods whose spec cannot be read (an
	// annotation edited after binding): they hold their GPUs, and their
	// namespace's team's quota, as whole GPUs of the regular tier.
	var unreadable []*corev1.Pod
	for _, p := range pods {
		if isReservation(p, o) {
			reservations = append(reservations, p) // ended ones too: their names are taken
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		mine := p.Spec.SchedulerName == name
		switch {
		case p.Spec.NodeName != "" && mine && p.DeletionTimestamp != nil:
			if s, err := PodSpec(p, o); err == nil {
				ending = append(ending, endingPod{p, s})
			} else {
				unreadable = append(unreadable, p)
			}
		case p.Spec.NodeName != "" && !mine:
			held[p.Spec.NodeName] += PodGPUs(p)
		case mine && p.DeletionTimestamp == nil:
			ours = append(ours, p)
		}
	}
	sort.Slice(ours, func(i, j int) bool {
		a, b := ours[i], ours[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	sh := newSharing(reservations, machines, o.reservationNamespace())
	w.shared = sh

	// Pods into groups: one per pod, one per gang, in pod order.
	type entry struct {
		key string
		g   *group
		s   Spec
	}
	var entries []*entry
	gangs := map[string]*entry{}
	problem := func(p *corev1.Pod, why string) {
		if p.Spec.NodeName != "" {
			unreadable = append(unreadable, p) // bound all the same: its GPUs are taken
			return
		}
		w.Waits = append(w.Waits, Wait{Pod: refOf(p), Reason: why, Cond: condOf(p)})
	}
	specs := map[*corev1.Pod]Spec{}
	for _, p := range ours {
		s, err := PodSpec(p, o)
		if err == nil && s.Shares() {
			err = sh.resolve(&s)
		}
		if err != nil {
			problem(p, err.Error())
			continue
		}
		specs[p] = s
		if s.Shares() {
			sh.use(p, s)
			entries = append(entries, &entry{key: p.Namespace + "/" + p.Name, g: &group{pods: []*corev1.Pod{p}, perPod: 1, share: &s}, s: s})
			continue
		}
		if s.Gang == "" {
			entries = append(entries, &entry{key: p.Namespace + "/" + p.Name, g: &group{pods: []*corev1.Pod{p}, perPod: s.GPUs}, s: s})
			continue
		}
		key := p.Namespace + "/gang/" + s.Gang
		e := gangs[key]
		if e == nil {
			e = &entry{key: key, g: &group{perPod: s.GPUs}, s: s}
			gangs[key] = e
			entries = append(entries, e)
		}
		e.g.pods = append(e.g.pods, p)
	}
	for i := range ending {
		e := &ending[i]
		if e.spec.Shares() {
			if err := sh.resolve(&e.spec); err == nil {
				sh.use(e.pod, e.spec)
			}
		}
	}
	// stranded are the bound pods of a gang that is no unit now (its
	// other pods finished first, or are gone or being deleted): their
	// GPUs stay their team's, as an ending pod's do, or the engine gives
	// the team its quota again while they run.
	var stranded []endingPod
	good := entries[:0]
	for _, e := range entries {
		if why := gangProblem(e.g.pods, specs); why != "" {
			for _, p := range e.g.pods {
				if p.Spec.NodeName != "" {
					stranded = append(stranded, endingPod{p, specs[p]})
					continue
				}
				problem(p, why)
			}
			continue
		}
		good = append(good, e)
	}
	// A reservation no pod shares, or one being deleted, holds its GPU
	// and is no index: nothing may be placed on it.
	for _, r := range sh.idle() {
		held[r.pod.Spec.NodeName]++
		if r.pod.DeletionTimestamp == nil {
			w.Release = append(w.Release, refOf(r.pod))
		}
	}
	for _, p := range sh.ended {
		w.Release = append(w.Release, refOf(p)) // the kubelet refused it (no GPU left), or it failed
	}

	free := map[string][]int{} // each node's GPU indexes not yet given to a unit
	for _, n := range names {
		m := machines[n]
		m.Offer.GPUs -= held[n]
		if m.Offer.GPUs < 1 {
			continue
		}
		o := m.Offer
		le := &engine.Lease{Lease: core.Lease{ID: n, OfferID: o.ID, Mode: o.Plans[m.Plan].Mode, State: core.LeaseReady, ProviderID: n},
			Offer: &o, Plan: &o.Plans[m.Plan], ReadyAt: time.Unix(0, 0).UTC()}
		w.State.Leases = append(w.State.Leases, le)
		idx := make([]int, o.GPUs)
		for g := range idx {
			idx[g] = g
		}
		free[n] = idx
	}
	sh.index(free)

	for _, e := range ending {
		w.ending(e.pod, e.spec, free)
	}
	for _, e := range stranded {
		w.stranded(e.pod, e.spec, "stranded", free)
	}
	for _, e := range good {
		g, s := e.g, e.s
		submit := g.pods[0].CreationTimestamp.Time
		for _, p := range g.pods {
			if p.CreationTimestamp.Time.Before(submit) {
				submit = p.CreationTimestamp.Time
			}
		}
		j := &core.Job{ID: e.key, Team: s.Team, Tier: s.Tier,
			Request:     core.Request{GPUs: g.perPod * len(g.pods), MilliPerGPU: core.WholeGPU, Models: s.Models},
			EstDuration: s.Duration, Deadline: s.Deadline, Interruptible: s.Interruptible, Deferrable: s.Deferrable,
			Submit: submit, State: core.JobPending}
		if g.share != nil {
			j.Request.MilliPerGPU, j.Request.MemPerGPUMiB = s.Milli, s.MemMiB
		}
		if err := j.Validate(); err != nil {
			for _, p := range g.pods {
				problem(p, err.Error())
			}
			continue
		}
		u := &engine.Unit{Unit: sched.Unit{Job: j}, State: core.JobPending, Since: submit}
		if g.share != nil {
			if !w.sharedUnit(u, g.pods[0], s) {
				continue
			}
			w.groups[e.key] = g
			w.State.Units = append(w.State.Units, u)
			continue
		}
		var bound int
		for _, p := range g.pods {
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			gs := takeGPUs(free, p.Spec.NodeName, g.perPod)
			if gs == nil {
				continue // on a node gpufleet does not count (cordoned, not Ready, no GPUs)
			}
			u.Parts = addPart(u.Parts, p.Spec.NodeName, gs)
			start := p.CreationTimestamp.Time
			if p.Status.StartTime != nil {
				start = p.Status.StartTime.Time
			}
			if u.Start.IsZero() || start.Before(u.Start) {
				u.Start = start
			}
		}
		if bound > 0 {
			if len(u.Parts) == 0 {
				continue // runs wholly outside the capacity gpufleet counts
			}
			u.State, j.State = core.JobRunning, core.JobRunning
			if bound < len(g.pods) {
				for _, p := range g.pods {
					if p.Spec.NodeName == "" {
						w.Waits = append(w.Waits, Wait{Pod: refOf(p), Cond: condOf(p),
							Reason: fmt.Sprintf("gang %s is partly bound (%d of %d pods): a binding failed; delete the gang's pods to place it again", s.Gang, bound, len(g.pods))})
					}
				}
			}
		}
		w.groups[e.key] = g
		w.State.Units = append(w.State.Units, u)
	}
	for _, p := range unreadable {
		if n := PodGPUs(p); n > 0 {
			w.stranded(p, Spec{Team: o.Team(p.Namespace), Tier: core.TierRegular, GPUs: n}, "unreadable", free)
		}
	}
	return w
}

type endingPod struct {
	pod  *corev1.Pod
	spec Spec
}

// ending adds a pod being deleted as a running unit of its team that
// nothing may preempt or place (its key names it as ending): it holds its
// GPUs (or its share of one) on its node and in its team's quota until
// it is gone. A pod on a node that is not capacity holds nothing
// gpufleet counts.
func (w *World) ending(p *corev1.Pod, s Spec, free map[string][]int) {
	req := core.Request{GPUs: s.GPUs, MilliPerGPU: core.WholeGPU, Models: s.Models}
	var gs []int
	if s.Shares() {
		req.MilliPerGPU, req.MemPerGPUMiB = s.Milli, s.MemMiB
		r := w.shared.holding(p)
		if r == nil || !r.take(s) {
			return
		}
		gs = []int{r.idx}
	} else {
		gs = takeGPUs(free, p.Spec.NodeName, s.GPUs)
	}
	if gs == nil {
		return
	}
	if !w.holding(p, s, "ending", req, gs) && !s.Shares() {
		free[p.Spec.NodeName] = append(free[p.Spec.NodeName], gs...)
	}
}

// holding adds p, bound and holding gs on its node, as a running unit of
// its team under a key of kind ("ending", "stranded") that no pod's
// matches, so that nothing places or binds it; false, and nothing added,
// when its job is not valid.
func (w *World) holding(p *corev1.Pod, s Spec, kind string, req core.Request, gs []int) bool {
	start := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		start = p.Status.StartTime.Time
	}
	j := &core.Job{ID: p.Namespace + "/" + kind + "/" + p.Name + "/" + string(p.UID), Team: s.Team, Tier: s.Tier,
		Request: req, Submit: start, State: core.JobRunning}
	if j.Validate() != nil {
		return false
	}
	w.State.Units = append(w.State.Units, &engine.Unit{Unit: sched.Unit{Job: j}, State: core.JobRunning, Since: start, Start: start,
		Parts: []engine.Assigned{{LeaseID: p.Spec.NodeName, GPUs: gs}}})
	return true
}

// stranded adds a bound pod that is no unit (kind "stranded": of a gang
// that is no unit now, its other pods finished or gone; "unreadable": its
// spec cannot be read) as a running unit of its team that nothing may
// preempt or place, as ending does for a pod being deleted: it holds its
// GPUs on its node and in its team's quota until it ends. Its GPUs stay
// taken on its node even where its job is not valid.
func (w *World) stranded(p *corev1.Pod, s Spec, kind string, free map[string][]int) {
	gs := takeGPUs(free, p.Spec.NodeName, s.GPUs)
	if gs == nil {
		return // on a node gpufleet does not count, or one it counts full
	}
	w.holding(p, s, kind, core.Request{GPUs: s.GPUs, MilliPerGPU: core.WholeGPU, Models: s.Models}, gs)
}

// gangProblem says why the pods of a gang cannot be one unit yet, or "".
func gangProblem(pods []*corev1.Pod, specs map[*corev1.Pod]Spec) string {
	first := specs[pods[0]]
	if first.Gang == "" {
		return ""
	}
	for _, p := range pods[1:] {
		s := specs[p]
		if s.GPUs != first.GPUs {
			return fmt.Sprintf("gang %s: its pods request different nvidia.com/gpu counts (%s %d, %s %d); a gang's pods must be alike", first.Gang, pods[0].Name, first.GPUs, p.Name, s.GPUs)
		}
		if s.GangSize != first.GangSize {
			return fmt.Sprintf("gang %s: its pods disagree on %s (%d, %d)", first.Gang, KeyGangSize, first.GangSize, s.GangSize)
		}
	}
	if len(pods) < first.GangSize {
		return fmt.Sprintf("gang %s has %d of its %d pods: nothing of it is bound before all exist", first.Gang, len(pods), first.GangSize)
	}
	if len(pods) > first.GangSize {
		return fmt.Sprintf("gang %s has %d pods, more than its %s %d", first.Gang, len(pods), KeyGangSize, first.GangSize)
	}
	return ""
}

// takeGPUs takes n of node's free GPU indexes, or nil when the node is
// not capacity or has fewer free.
func takeGPUs(free map[string][]int, node string, n int) []int {
	f := free[node]
	if len(f) < n {
		return nil
	}
	gs := slices.Clone(f[:n])
	free[node] = f[n:]
	return gs
}

func addPart(parts []engine.Assigned, node string, gs []int) []engine.Assigned {
	for i := range parts {
		if parts[i].LeaseID == node {
			parts[i].GPUs = append(parts[i].GPUs, gs...)
			return parts
		}
	}
	return append(parts, engine.Assigned{LeaseID: node, GPUs: gs})
}

// condOf is the pod's PodScheduled condition as it stands (for not
// writing the same reason twice).
func condOf(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// Bind is one pod to bind to a node.
type Bind struct {
	Pod    PodRef
	Node   string
	Reason string
	// Share is set for a pod that shares a GPU: what to write on it
	// before it is bound (share.go).
	Share *Share
}

// Evict is one pod to evict, and whether gpufleet recreates it (a bare
// pod: no controller owns it).
type Evict struct {
	Pod      PodRef
	Recreate bool
	Reason   string
}

// Wait is a pod that waits and why. Cond is the message its
// PodScheduled=False condition has now ("" none): the act writes the
// reason only when it changed.
type Wait struct {
	Pod    PodRef
	Reason string
	Cond   string
	// NotBefore, when set, holds the reason back until then: a pod placed
	// on a shared GPU whose reservation has just been made waits a moment
	// for its device ID, not worth two writes.
	NotBefore time.Time
}

// Actions is what one step's decisions come to on the cluster.
type Actions struct {
	// Binds holds one list per unit: a gang's pods are bound all or none.
	Binds [][]Bind
	Evict []Evict
	Wait  []Wait
	// Release are reservation pods to delete: no pod shares their GPU.
	Release []PodRef
}

// Actions turns the engine's decisions into what to do on the cluster.
// A placement is bound only when its pods fit its parts whole (each
// part's GPUs a multiple of the pods' request; a pod never spans nodes),
// and not in a step that preempts for it or on a node where it preempts:
// the victims hold their GPUs until they exit, so the placement is made
// again once they have.
func (w *World) Actions(d engine.Decisions) Actions {
	var a Actions
	preempting := map[string]bool{}
	evicting := map[string]bool{}
	// The engine frees a victim's quota in the step that preempts it, but
	// the victim holds its GPUs, and its team's quota, through its grace
	// period: with quotas, a step that preempts binds nothing, and the
	// next, which sees the victims ending, decides again.
	holdBack := len(d.Preempt) > 0 && w.quotas()
	for _, p := range d.Preempt {
		preempting[p.LeaseID] = true
		evicting[p.For] = true
		g := w.groups[p.Unit]
		if g == nil {
			continue
		}
		for _, pod := range g.pods {
			a.Evict = append(a.Evict, Evict{Pod: refOf(pod), Recreate: bare(pod), Reason: p.Reason})
		}
	}
	for _, pl := range d.Place {
		g := w.groups[pl.Unit]
		if g == nil {
			continue
		}
		why := ""
		for _, part := range pl.Parts {
			if preempting[part.LeaseID] || evicting[pl.Unit] {
				why = fmt.Sprintf("placed on %s once the pods preempted for it have exited (their grace period): %s", part.LeaseID, pl.Reason)
			}
		}
		if why == "" && holdBack {
			continue
		}
		var binds []Bind
		if why == "" {
			binds, why = podsOnParts(g, pl)
		}
		if why == "" && g.share != nil {
			binds[0].Share = w.shared.place(pl.Parts[0], *g.share)
		}
		if why != "" {
			for _, p := range g.pods {
				a.Wait = append(a.Wait, Wait{Pod: refOf(p), Reason: why, Cond: condOf(p)})
			}
			continue
		}
		a.Binds = append(a.Binds, binds)
	}
	wait := func(key, why string) {
		if g := w.groups[key]; g != nil {
			for _, p := range g.pods {
				if p.Spec.NodeName == "" {
					a.Wait = append(a.Wait, Wait{Pod: refOf(p), Reason: why, Cond: condOf(p)})
				}
			}
		}
	}
	for _, wt := range d.Waiting {
		wait(wt.Unit.Key(), wt.Reason)
	}
	for _, df := range d.Defer {
		wait(df.Unit.Key(), df.Reason)
	}
	a.Wait = append(a.Wait, w.Waits...)
	a.Binds = append(a.Binds, w.Binds...)
	a.Release = w.Release
	return a
}

// quotas reports whether any team has a quota.
func (w *World) quotas() bool {
	for _, t := range w.State.Teams {
		if len(t.Quotas) > 0 {
			return true
		}
	}
	return false
}

// podsOnParts gives each part of a placement its pods, in name order.
func podsOnParts(g *group, pl engine.Place) ([]Bind, string) {
	var binds []Bind
	next := 0
	for _, part := range pl.Parts {
		if len(part.GPUs)%g.perPod != 0 {
			return nil, fmt.Sprintf("the engine's placement gives %s %d GPUs, not a whole number of pods of %d nvidia.com/gpu: a pod cannot span nodes", part.LeaseID, len(part.GPUs), g.perPod)
		}
		for range len(part.GPUs) / g.perPod {
			if next >= len(g.pods) {
				return nil, "the engine's placement holds more GPUs than the pods request"
			}
			p := g.pods[next]
			next++
			binds = append(binds, Bind{Pod: refOf(p), Node: part.LeaseID, Reason: pl.Reason})
		}
	}
	if next != len(g.pods) {
		return nil, "the engine's placement holds fewer GPUs than the pods request"
	}
	return binds, ""
}

// bare reports whether no controller owns the pod: gpufleet recreates
// such a pod when it preempts it; a controller's pod is its
// controller's to recreate.
func bare(p *corev1.Pod) bool {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return false
		}
	}
	return true
}

// ReasonText is what a waiting pod's PodScheduled condition and Event
// say: gpufleet's reason, named as gpufleet's.
func ReasonText(reason string) string { return "gpufleet: " + reason }
