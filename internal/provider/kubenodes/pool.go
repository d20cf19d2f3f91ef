package kubenodes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// The labels and annotations of a pool node. The nvidia.com labels are
// GPU feature discovery's, so that pods select a pool node as they
// select any GPU node; the gpufleet.io ones are the lease's record.
const (
	// LabelPool names the pool (Config.Pool) a node belongs to: List
	// and every act select on it.
	LabelPool = "gpufleet.io/pool"
	// LabelLease is the lease id (the client token) the node is.
	LabelLease = "gpufleet.io/lease"
	// LabelOffer is the catalog offer, made a label value (a '/' and
	// other characters a label value cannot hold become '.');
	// AnnotationOffer holds it exactly.
	LabelOffer = "gpufleet.io/offer"
	// LabelMode is the billing mode (on-demand, spot, daily…).
	LabelMode         = "gpufleet.io/mode"
	LabelGPUProduct   = "nvidia.com/gpu.product"
	LabelGPUCount     = "nvidia.com/gpu.count"
	LabelGPUMemory    = "nvidia.com/gpu.memory"
	LabelInstanceType = corev1.LabelInstanceTypeStable

	// AnnotationOffer is the catalog offer id, exactly.
	AnnotationOffer = "gpufleet.io/offer"
	// AnnotationStartedAt is when the lease's billing started (RFC 3339,
	// nanoseconds): its billing boundaries are counted from it, across
	// restarts.
	AnnotationStartedAt = "gpufleet.io/started-at"
	// AnnotationEarlierTerms holds the terms a committed node's lease was
	// billed on before its mode from started-at (JSON, oldest first:
	// core.Lease.Earlier), written when it renews on another term.
	AnnotationEarlierTerms = "gpufleet.io/earlier-terms"
	// AnnotationDraining is when the release began (RFC 3339): a node
	// that has it and is cordoned is being drained, and a restarted
	// server goes on with the drain.
	AnnotationDraining = "gpufleet.io/draining-since"

	// ResourceGPU is the device plugin's extended resource.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// Errors of the pool.
var (
	// ErrNotOurs refuses an act on a node the pool did not make: it is
	// never cordoned, drained or deleted.
	ErrNotOurs = errors.New("kubenodes: node is not one this pool made")
	// ErrDrainTimeout is a release whose pods were not all gone by
	// Config.DrainTimeout: the node was uncordoned and kept.
	ErrDrainTimeout = errors.New("kubenodes: drain timed out")
)

// Defaults of a Config's zero fields.
const (
	DefaultPool         = "gpufleet"
	DefaultDrainTimeout = 10 * time.Minute
	DefaultRetry        = 5 * time.Second
)

// Config is a Pool's settings.
type Config struct {
	Client kubernetes.Interface
	// Pool names the pool: its nodes are named Pool-<lease id, lower
	// case> and labelled gpufleet.io/pool=Pool (default gpufleet). Two
	// servers on one cluster need two pools.
	Pool string
	// Offers are the catalog offers the pool may rent; an Acquire of
	// another is refused.
	Offers []core.Offer
	// Machines starts and stops the machine behind a node (default
	// KWOK: the node is all there is).
	Machines Machines
	// DrainTimeout bounds a release's drain (default 10 min). Past it,
	// the pods a PodDisruptionBudget still protects are deleted if Force
	// is set; else the node is uncordoned and kept, and the release
	// fails with ErrDrainTimeout (the engine decides again at the next
	// boundary).
	DrainTimeout time.Duration
	Force        bool
	// Retry is how often a blocking Release tries the evictions again
	// (default 5 s).
	Retry time.Duration
	Clock clock.Clock
	Log   *slog.Logger
}

// Machines starts and stops the machine behind a pool node. Both are
// idempotent by node name: called again after a crash they must not
// start a second machine, nor fail for one already gone.
type Machines interface {
	// Start starts the machine that is node n (made already, with the
	// pool's labels): its kubelet registers as n.Name and adopts it.
	Start(ctx context.Context, n *corev1.Node, o *core.Offer) error
	// Stop ends the machine of the node named name.
	Stop(ctx context.Context, name string) error
}

// Shaper is a Machines that adds to a node before it is made (KWOK's
// annotation and status).
type Shaper interface {
	Shape(n *corev1.Node, o *core.Offer)
}

// Pool rents nodes. It is a provider.Provider, and offers the steps of
// a release one at a time (Cordon, Drain) to a loop that must not
// block on it.
type Pool struct {
	cfg    Config
	offers map[string]*core.Offer

	mu   sync.Mutex
	seen map[string]provider.State // Poll's last report per node
	gone map[string]provider.Machine
}

var _ provider.Provider = (*Pool)(nil)

var poolName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

// New makes a Pool. An error names the field, its value and what is
// allowed.
func New(cfg Config) (*Pool, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubenodes: no client")
	}
	if cfg.Pool == "" {
		cfg.Pool = DefaultPool
	}
	if !poolName.MatchString(cfg.Pool) {
		return nil, &core.FieldError{Field: "pool", Value: cfg.Pool, Allowed: "1-32 lower-case letters, digits and '-', starting and ending with a letter or digit"}
	}
	if cfg.Machines == nil {
		cfg.Machines = KWOK{}
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.DrainTimeout < 0 {
		return nil, &core.FieldError{Field: "drain timeout", Value: cfg.DrainTimeout.String(), Allowed: "a duration > 0"}
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{cfg: cfg, offers: map[string]*core.Offer{}, seen: map[string]provider.State{}, gone: map[string]provider.Machine{}}
	for i := range cfg.Offers {
		o := &cfg.Offers[i]
		if o.GPUs < 1 || o.SliceMilli > 0 {
			return nil, &core.FieldError{Field: "offer " + o.ID + " gpus", Value: fmt.Sprint(o.GPUs), Allowed: "whole GPUs, at least 1: a node's nvidia.com/gpu"}
		}
		p.offers[o.ID] = o
	}
	return p, nil
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.cfg.Pool }

// Offers are the offers the pool may rent.
func (p *Pool) Offers() []core.Offer { return p.cfg.Offers }

// Offer is the pool's offer with id.
func (p *Pool) Offer(id string) (*core.Offer, bool) {
	o, ok := p.offers[id]
	return o, ok
}

// NodeName is the node a lease id (client token) makes: pool-token in
// lower case. An error names a token that cannot be a node name.
func (p *Pool) NodeName(token string) (string, error) {
	name := p.cfg.Pool + "-" + strings.ToLower(token)
	if token == "" || len(name) > 63 || !nodeName.MatchString(name) {
		return "", &core.FieldError{Field: "client token", Value: token, Allowed: "letters, digits and '-' (the lease id), making a node name of at most 63 characters"}
	}
	return name, nil
}

var nodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Owns reports whether n is a node of this pool: its pool and lease
// labels and its started-at annotation. Every act checks it on a fresh
// read of the node.
func (p *Pool) Owns(n *corev1.Node) bool {
	return n != nil && n.Labels[LabelPool] == p.cfg.Pool && n.Labels[LabelLease] != "" && n.Annotations[AnnotationStartedAt] != ""
}

// StartedAt is when the node's lease started billing (its annotation).
func StartedAt(n *corev1.Node) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, n.Annotations[AnnotationStartedAt])
	return t, err == nil
}

// EarlierTerms are the terms the node's lease was billed on before its
// mode from started-at (its annotation; none when absent).
func EarlierTerms(n *corev1.Node) ([]core.Term, error) {
	v := n.Annotations[AnnotationEarlierTerms]
	if v == "" {
		return nil, nil
	}
	var ts []core.Term
	if err := json.Unmarshal([]byte(v), &ts); err != nil {
		return nil, fmt.Errorf("kubenodes: node %s: annotation %s: %w", n.Name, AnnotationEarlierTerms, err)
	}
	return ts, nil
}

// Renew records on the node that its lease renewed at start on mode, a
// committed plan of its offer, the term it held appended to earlier (the
// engine's lease after fleet.RenewalTerm's renewal): its mode label and
// its started-at and earlier-terms annotations, from which the next pass
// reads the lease again. Calling it again changes nothing; a node on
// neither the term renewed from nor the new one is a conflict.
func (p *Pool) Renew(ctx context.Context, name string, mode core.BillingMode, start time.Time, earlier []core.Term) error {
	if len(earlier) == 0 {
		return &core.FieldError{Field: "earlier", Value: "", Allowed: "the terms before the renewal, the one renewed from last"}
	}
	from := earlier[len(earlier)-1]
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	terms := make([]core.Term, len(earlier))
	for i, t := range earlier {
		terms[i] = core.Term{Mode: t.Mode, Start: t.Start.UTC()}
	}
	js, _ := json.Marshal(terms)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := p.get(ctx, name)
		if err != nil {
			return err
		}
		o, ok := p.Offer(n.Annotations[AnnotationOffer])
		if !ok {
			return &core.FieldError{Field: "offer", Value: n.Annotations[AnnotationOffer], Allowed: "an offer of the pool (node " + name + ")"}
		}
		if q, ok := o.Plan(mode); !ok || !q.Committed() {
			return &core.FieldError{Field: "mode", Value: string(mode), Allowed: fmt.Sprintf("a committed plan of offer %s (%v)", o.ID, o.Modes())}
		}
		cur := core.BillingMode(n.Labels[LabelMode])
		switch at := n.Annotations[AnnotationStartedAt]; {
		case cur == mode && at == stamp(start):
			return nil // renewed already
		case cur != from.Mode || at != stamp(from.Start):
			return fmt.Errorf("kubenodes: renew %s: it is on %s from %s, not on the term renewed from (%s from %s)", name, cur, at, from.Mode, stamp(from.Start))
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": n.ResourceVersion,
			"labels":          map[string]string{LabelMode: string(mode)},
			"annotations":     map[string]string{AnnotationStartedAt: stamp(start), AnnotationEarlierTerms: string(js)},
		}})
		_, err = p.cfg.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubenodes: renew %s: %w", name, err)
	}
	return nil
}

// Draining reports whether the node is being released (cordoned, with
// the draining annotation) and since when.
func Draining(n *corev1.Node) (time.Time, bool) {
	if !n.Spec.Unschedulable {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, n.Annotations[AnnotationDraining])
	return t, err == nil
}

// Ready reports the node's Ready condition.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// LabelValue makes s a label value: a space becomes '-' (as GPU feature
// discovery writes "NVIDIA A100-SXM4-80GB"), other characters a value
// cannot hold become '.', and one longer than 63 characters is cut with
// a hash of the whole.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		switch {
		case c == ' ':
			b[i] = '-'
		case !ok:
			b[i] = '.'
		}
	}
	v := strings.Trim(string(b), "-_.")
	if len(v) > 63 {
		h := sha256.Sum256([]byte(s))
		v = strings.Trim(v[:50], "-_.") + "-" + hex.EncodeToString(h[:])[:12]
	}
	return v
}

// Node is the Node an Acquire makes: the pool's labels and annotations,
// nvidia.com/gpu allocatable, shaped by the Machines if it is a Shaper.
func (p *Pool) Node(name, token string, o *core.Offer, mode core.BillingMode, at time.Time) *corev1.Node {
	l := map[string]string{
		LabelPool:              p.cfg.Pool,
		LabelLease:             LabelValue(token),
		LabelOffer:             LabelValue(o.ID),
		LabelMode:              string(mode),
		LabelGPUCount:          strconv.Itoa(o.GPUs),
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	if o.GPUModel != "" {
		l[LabelGPUProduct] = LabelValue(o.GPUModel)
	}
	if o.GPUMemMiB > 0 {
		l[LabelGPUMemory] = strconv.FormatInt(o.GPUMemMiB, 10)
	}
	if o.InstanceType != "" {
		l[LabelInstanceType] = LabelValue(o.InstanceType)
	}
	if o.Region != "" {
		l[corev1.LabelTopologyRegion] = LabelValue(o.Region)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{
			AnnotationOffer:     o.ID,
			AnnotationStartedAt: at.UTC().Format(time.RFC3339Nano),
		}},
	}
	if s, ok := p.cfg.Machines.(Shaper); ok {
		s.Shape(n, o)
	}
	return n
}

// Acquire makes the node of the lease req.ClientToken and starts its
// machine; asked again with the same token it returns that node. The
// node is provisioning until Ready.
func (p *Pool) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	o, ok := p.offers[req.OfferID]
	if !ok {
		return provider.Machine{}, &core.FieldError{Field: "offer", Value: req.OfferID, Allowed: "an offer of pool " + p.cfg.Pool + ": " + strings.Join(p.offerIDs(), ", ")}
	}
	if _, ok := o.Plan(req.Mode); !ok {
		return provider.Machine{}, &core.FieldError{Field: "mode", Value: string(req.Mode), Allowed: "a mode offer " + o.ID + " has a plan for"}
	}
	name, err := p.NodeName(req.ClientToken)
	if err != nil {
		return provider.Machine{}, err
	}
	want := p.Node(name, req.ClientToken, o, req.Mode, p.cfg.Clock.Now())
	nodes := p.cfg.Client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		n, err = nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return provider.Machine{}, fmt.Errorf("kubenodes: acquire %s: %w", name, err)
		}
		if !p.Owns(n) || n.Labels[LabelLease] != want.Labels[LabelLease] {
			return provider.Machine{}, fmt.Errorf("kubenodes: acquire %s: a node of that name exists: %w", name, ErrNotOurs)
		}
		if got := n.Annotations[AnnotationOffer]; got != o.ID || n.Labels[LabelMode] != string(req.Mode) {
			return provider.Machine{}, &core.FieldError{Field: "client token", Value: req.ClientToken,
				Allowed: fmt.Sprintf("a new token: node %s is already offer %s, mode %s", name, got, n.Labels[LabelMode])}
		}
		if n.DeletionTimestamp != nil {
			return provider.Machine{}, fmt.Errorf("kubenodes: acquire %s: the node is being deleted; ask with a new token", name)
		}
	case err != nil:
		return provider.Machine{}, fmt.Errorf("kubenodes: acquire %s: create node: %w", name, err)
	}
	if err := p.cfg.Machines.Start(ctx, n, o); err != nil {
		// No machine: no lease. The node goes, so that a node never
		// stands for a machine nobody started.
		if derr := nodes.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}}); derr != nil && !apierrors.IsNotFound(derr) {
			p.cfg.Log.Warn("deleting the node of a machine that did not start failed", "node", name, "err", derr)
		}
		return provider.Machine{}, fmt.Errorf("kubenodes: acquire %s: start machine: %w", name, err)
	}
	p.cfg.Log.Debug("node acquired", "node", name, "lease", req.ClientToken, "offer", o.ID, "mode", req.Mode)
	return p.machine(n), nil
}

func (p *Pool) offerIDs() []string {
	ids := make([]string, 0, len(p.offers))
	for id := range p.offers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// machine is a pool node as the provider reports it.
func (p *Pool) machine(n *corev1.Node) provider.Machine {
	started, _ := StartedAt(n)
	m := provider.Machine{ProviderID: n.Name, ClientToken: n.Labels[LabelLease], OfferID: n.Annotations[AnnotationOffer],
		Mode: core.BillingMode(n.Labels[LabelMode]), State: provider.Provisioning, LaunchedAt: started}
	if Ready(n) {
		m.State = provider.Ready
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				m.ReadyAt = c.LastTransitionTime.Time
			}
		}
		if m.ReadyAt.IsZero() || m.ReadyAt.Before(started) {
			m.ReadyAt = started
		}
	}
	return m
}

// List returns the pool's nodes, found by label, and the nodes it made
// that were deleted by someone else (Failed) until they are released.
func (p *Pool) List(ctx context.Context) ([]provider.Machine, error) {
	ns, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]provider.Machine, 0, len(ns))
	for _, n := range ns {
		out = append(out, p.machine(n))
	}
	p.mu.Lock()
	for _, m := range p.gone {
		out = append(out, m)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ProviderID < out[j].ProviderID })
	return out, nil
}

func (p *Pool) list(ctx context.Context) ([]*corev1.Node, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelPool: p.cfg.Pool}).String()
	l, err := p.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("kubenodes: list nodes of pool %s: %w", p.cfg.Pool, err)
	}
	var out []*corev1.Node
	for i := range l.Items {
		if n := &l.Items[i]; p.Owns(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Poll reports each node that became Ready, and each that went without
// a Release (Failed), once.
func (p *Pool) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	ns, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var evs []provider.Event
	here := map[string]bool{}
	for _, n := range ns {
		here[n.Name] = true
		m := p.machine(n)
		if p.seen[n.Name] != m.State {
			p.seen[n.Name] = m.State
			evs = append(evs, provider.Event{At: now, Machine: m})
		}
	}
	for name, st := range p.seen {
		if here[name] {
			continue
		}
		delete(p.seen, name)
		if st == provider.Released {
			continue
		}
		m := provider.Machine{ProviderID: name, State: provider.Failed, EndedAt: now}
		p.gone[name] = m
		evs = append(evs, provider.Event{At: now, Machine: m})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].Machine.ProviderID < evs[j].Machine.ProviderID })
	return evs, nil
}

// Release cordons the node, drains it (retrying evictions a
// PodDisruptionBudget refuses every Config.Retry) and deletes it; it
// blocks until then, or until DrainTimeout (ErrDrainTimeout). Releasing
// a node that is gone is fine; one the pool did not make is refused.
func (p *Pool) Release(ctx context.Context, providerID string) error {
	p.mu.Lock()
	_, wasGone := p.gone[providerID]
	delete(p.gone, providerID)
	p.mu.Unlock()
	if wasGone {
		return nil
	}
	if _, err := p.Cordon(ctx, providerID); err != nil {
		if errors.Is(err, ErrUnknown) {
			return nil
		}
		return err
	}
	for {
		d, err := p.Drain(ctx, providerID)
		switch {
		case err != nil && !errors.Is(err, ErrUnknown):
			return err
		case d.Deleted || errors.Is(err, ErrUnknown):
			p.mu.Lock()
			p.seen[providerID] = provider.Released
			p.mu.Unlock()
			return nil
		case d.TimedOut:
			return fmt.Errorf("kubenodes: release %s: %w after %s: %s", providerID, ErrDrainTimeout, p.cfg.DrainTimeout, d)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubenodes: release %s: %w (the node stays cordoned; a later Release goes on)", providerID, ctx.Err())
		case <-p.cfg.Clock.After(p.cfg.Retry):
		}
	}
}

// ErrUnknown is an act on a node that does not exist.
var ErrUnknown = fmt.Errorf("kubenodes: %w", provider.ErrUnknownMachine)

// get reads the node fresh and checks that it is the pool's.
func (p *Pool) get(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := p.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %s: %w", name, ErrUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("kubenodes: get node %s: %w", name, err)
	}
	if !p.Owns(n) {
		return nil, fmt.Errorf("kubenodes: node %s (labels %s=%q, %s=%q): %w", name, LabelPool, n.Labels[LabelPool], LabelLease, n.Labels[LabelLease], ErrNotOurs)
	}
	return n, nil
}

// Cordon begins a release: the node is marked unschedulable and
// annotated with when its drain began (kept if it was begun before).
// It returns that time.
func (p *Pool) Cordon(ctx context.Context, name string) (time.Time, error) {
	// The patch is conditional on the node as read, so that two
	// releases cannot both start a drain; the kubelet (KWOK here)
	// writes the node's status meanwhile, so a conflict reads it again.
	var since time.Time
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := p.get(ctx, name)
		if err != nil {
			return err
		}
		if s, ok := Draining(n); ok {
			since = s
			return nil
		}
		now := p.cfg.Clock.Now()
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion, "annotations": map[string]string{AnnotationDraining: now.UTC().Format(time.RFC3339Nano)}},
			"spec":     map[string]any{"unschedulable": true},
		})
		if _, err := p.cfg.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		p.cfg.Log.Debug("node cordoned for release", "node", name, "lease", n.Labels[LabelLease])
		since = now
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("kubenodes: cordon %s: %w", name, err)
	}
	return since, nil
}

// uncordon ends a release that gave up: the node takes work again.
func (p *Pool) uncordon(ctx context.Context, n *corev1.Node) error {
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": n.ResourceVersion, "annotations": map[string]any{AnnotationDraining: nil}},
		"spec":     map[string]any{"unschedulable": false},
	})
	_, err := p.cfg.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Drained is what one pass of Drain did.
type Drained struct {
	// Evicted are the pods this pass evicted (as they were).
	Evicted []*corev1.Pod
	// Blocked are the pods a PodDisruptionBudget kept (429), or whose
	// eviction failed otherwise, and why.
	Blocked map[string]string
	// Left is how many pods were still on the node (terminating ones
	// included).
	Left int
	// Deleted: nothing was left and the node is deleted, its machine
	// stopped.
	Deleted bool
	// TimedOut: DrainTimeout passed; with Force the pods left were
	// deleted, else the node was uncordoned and kept.
	TimedOut bool
}

func (d Drained) String() string {
	if len(d.Blocked) == 0 {
		return fmt.Sprintf("%d pods left", d.Left)
	}
	keys := make([]string, 0, len(d.Blocked))
	for k := range d.Blocked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d pods left; blocked:", d.Left)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s (%s)", k, d.Blocked[k])
	}
	return b.String()
}

// Drain makes one pass of a release begun by Cordon: it evicts every
// pod on the node through the Eviction API (DaemonSet and mirror pods
// and pods that ended excepted, as kubectl drain does; a bare pod is
// evicted too, and is gone unless its owner makes it again: the kube
// loop recreates gpufleet's); when none is left it deletes the node and
// stops its machine. A PodDisruptionBudget's refusal (429) leaves the
// pod for the next pass. Past DrainTimeout it gives up (see Config).
func (p *Pool) Drain(ctx context.Context, name string) (Drained, error) {
	d := Drained{Blocked: map[string]string{}}
	n, err := p.get(ctx, name)
	if err != nil {
		return d, err
	}
	since, ok := Draining(n)
	if !ok {
		return d, fmt.Errorf("kubenodes: drain %s: not cordoned with %s: call Cordon first", name, AnnotationDraining)
	}
	pods, err := p.cfg.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		return d, fmt.Errorf("kubenodes: drain %s: list pods: %w", name, err)
	}
	timedOut := p.cfg.Clock.Now().Sub(since) >= p.cfg.DrainTimeout
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !drains(pod) {
			continue
		}
		d.Left++
		key := pod.Namespace + "/" + pod.Name
		if pod.DeletionTimestamp != nil {
			continue // going
		}
		if timedOut && p.cfg.Force {
			err := p.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				d.Blocked[key] = "delete: " + err.Error()
			} else {
				p.cfg.Log.Warn("drain timed out: pod deleted past its disruption budget", "node", name, "pod", key, "drain_timeout", p.cfg.DrainTimeout)
				d.Evicted = append(d.Evicted, pod.DeepCopy())
			}
			continue
		}
		err := p.evict(ctx, pod)
		switch {
		case err == nil:
			d.Evicted = append(d.Evicted, pod.DeepCopy())
			p.cfg.Log.Info("pod evicted for node release", "node", name, "pod", key)
		case apierrors.IsNotFound(err):
			d.Left--
		case apierrors.IsTooManyRequests(err):
			d.Blocked[key] = "PodDisruptionBudget: " + err.Error()
		default:
			d.Blocked[key] = err.Error()
		}
	}
	if d.Left > 0 {
		if timedOut && !p.cfg.Force {
			if err := p.uncordon(ctx, n); err != nil {
				return d, fmt.Errorf("kubenodes: drain %s timed out; uncordon: %w", name, err)
			}
			d.TimedOut = true
			p.cfg.Log.Warn("drain timed out: node uncordoned and kept", "node", name, "drain_timeout", p.cfg.DrainTimeout, "left", d.String())
		}
		d.TimedOut = d.TimedOut || timedOut
		return d, nil
	}
	err = p.cfg.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return d, fmt.Errorf("kubenodes: delete node %s: %w", name, err)
	}
	if err := p.cfg.Machines.Stop(ctx, name); err != nil {
		return d, fmt.Errorf("kubenodes: node %s deleted, but stopping its machine failed (stop it by hand): %w", name, err)
	}
	d.Deleted = true
	p.cfg.Log.Info("node released: drained and deleted", "node", name, "lease", n.Labels[LabelLease], "drain", p.cfg.Clock.Now().Sub(since).Round(time.Millisecond))
	return d, nil
}

// evict posts a pod's Eviction once; Drain's next pass is the retry.
func (p *Pool) evict(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	return EvictOnce(ctx, p.cfg.Client, pod.Namespace, pod.Name, &metav1.Preconditions{UID: &uid})
}

// EvictOnce posts the Eviction of pod namespace/name once, with the
// given preconditions. client-go's typed Evict would wait out a 429's
// Retry-After (10 s, what a PodDisruptionBudget that holds answers) and
// ask again, up to ten times: it would block its caller for 100 s. The
// caller's next pass is the retry.
func EvictOnce(ctx context.Context, client kubernetes.Interface, namespace, name string, pre *metav1.Preconditions) error {
	ev := &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Namespace: namespace, Name: name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: pre},
	}
	return client.CoreV1().RESTClient().Post().MaxRetries(0).
		Namespace(namespace).Resource("pods").Name(name).SubResource("eviction").
		Body(ev).Do(ctx).Error()
}

// drains reports whether a release waits for the pod to go: not one
// that ended, not a mirror pod, not a DaemonSet's (it would come back).
func drains(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return false
	}
	for _, r := range pod.OwnerReferences {
		if r.Kind == "DaemonSet" && r.Controller != nil && *r.Controller {
			return false
		}
	}
	return true
}

// KWOK is the Machines of a cluster whose nodes KWOK fakes: the Node is
// the machine. Shape gives it KWOK's annotation and its allocatable (the
// offer's GPUs, CPUs and memory) for KWOK to keep; Start and Stop do
// nothing.
type KWOK struct{}

var _ Machines = KWOK{}
var _ Shaper = KWOK{}

// The annotation KWOK (started with --manage-nodes-with-annotation-selector)
// selects the nodes it manages by.
const (
	KWOKAnnotation = "kwok.x-k8s.io/node"
	KWOKValue      = "fake"
)

// Shape implements Shaper.
func (KWOK) Shape(n *corev1.Node, o *core.Offer) {
	n.Annotations[KWOKAnnotation] = KWOKValue
	n.Labels["type"] = "kwok"
	n.Status.Allocatable = Allocatable(o)
	n.Status.Capacity = Allocatable(o)
}

// Start implements Machines.
func (KWOK) Start(context.Context, *corev1.Node, *core.Offer) error { return nil }

// Stop implements Machines.
func (KWOK) Stop(context.Context, string) error { return nil }

// Allocatable is what a node of o offers: its GPUs as nvidia.com/gpu,
// its vCPUs and memory (large defaults where the offer has none), and
// pods.
func Allocatable(o *core.Offer) corev1.ResourceList {
	cpu, mem := resource.MustParse("1k"), resource.MustParse("1Ti")
	if o.VCPUs > 0 {
		cpu = *resource.NewQuantity(int64(o.VCPUs), resource.DecimalSI)
	}
	if o.MemoryMiB > 0 {
		mem = *resource.NewQuantity(o.MemoryMiB<<20, resource.BinarySI)
	}
	return corev1.ResourceList{
		ResourceGPU:           *resource.NewQuantity(int64(o.GPUs), resource.DecimalSI),
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}
