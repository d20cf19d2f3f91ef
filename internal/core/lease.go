package core

import "time"

// LeaseState is where a lease is in its life.
type LeaseState string

// The lease states: requested → provisioning → ready → draining →
// released | reclaimed | failed.
const (
	LeaseRequested    LeaseState = "requested"
	LeaseProvisioning LeaseState = "provisioning"
	LeaseReady        LeaseState = "ready"
	LeaseDraining     LeaseState = "draining"
	LeaseReleased     LeaseState = "released"
	LeaseReclaimed    LeaseState = "reclaimed"
	LeaseFailed       LeaseState = "failed"
)

// Final reports whether s is a terminal state.
func (s LeaseState) Final() bool {
	return s == LeaseReleased || s == LeaseReclaimed || s == LeaseFailed
}

// Lease is one rented machine. Its cost so far and its next billing
// boundary are derived from it by the billing package, never stored.
type Lease struct {
	ID      string
	OfferID string
	Mode    BillingMode
	// Start is when billing starts (the provider's launch time).
	Start time.Time
	// CommittedEnd is Start plus the plan's term for committed modes.
	CommittedEnd time.Time
	// End is when billing stopped (released or reclaimed); zero while open.
	End   time.Time
	State LeaseState
	// ClientToken makes the provider call that created the lease idempotent.
	ClientToken string
	// ProviderID is the provider's own name for the machine.
	ProviderID string
	// Earlier are the terms the lease was billed on before Mode from
	// Start, oldest first: a committed machine renewed on another of its
	// offer's terms (fleet.RenewalTerm) keeps its earlier ones here. Each
	// runs from its Start to the next one's, the last to Start; every one
	// ended on a billing boundary of its own plan, so each is billed
	// whole, apart from the others. Empty for a lease never renewed on
	// another term.
	Earlier []Term
}

// Term is a stretch of a lease billed on one of its offer's plans.
type Term struct {
	Mode  BillingMode `json:"mode"`
	Start time.Time   `json:"start"`
}

// FirstStart is when the lease's billing began: the start of its first
// term.
func (l *Lease) FirstStart() time.Time {
	if len(l.Earlier) > 0 {
		return l.Earlier[0].Start
	}
	return l.Start
}

// Open reports whether the lease is still billed.
func (l *Lease) Open() bool { return l.End.IsZero() }

// GPU is one GPU of a ready lease as schedulable capacity.
type GPU struct {
	Index      int
	FreeMilli  Milli
	FreeMemMiB int64
	Shared     bool
}

// Node is a ready lease as schedulable capacity.
type Node struct {
	LeaseID   string
	OfferID   string
	GPUModel  string
	GPUMemMiB int64
	Spot      bool
	Committed bool
	// Renewal is how long one renewal of a committed node's term runs:
	// its offer's shortest committed term, on which a machine kept past
	// its boundary renews unless fleet.RenewalTerm picks a longer one.
	// Zero on a node that is not committed.
	Renewal time.Duration
	// Joined: a machine whose agent joined by hand, there already.
	Joined bool
	// Accelerator, Capability and SliceMilli are the offer's (see Offer).
	// A slice's one GPU starts Shared with FreeMilli its share, so that
	// only shares fit on it; GPUMemMiB stays the whole GPU's.
	Accelerator Accelerator
	Capability  Capability
	SliceMilli  Milli
	// CPUMilli and MemMiB are the host's capacity; FreeCPUMilli and
	// FreeMemMiB what is unallocated. Zero capacity means not tracked.
	CPUMilli, FreeCPUMilli int64
	MemMiB, FreeMemMiB     int64
	GPUs                   []GPU
}

// Hardware is what of n decides which jobs may ever run on it.
func (n *Node) Hardware() Hardware {
	return Hardware{Accelerator: n.Accelerator, Capability: n.Capability, GPUModel: n.GPUModel, MemPerGPUMiB: sliceMem(n.GPUMemMiB, n.SliceMilli), SliceMilli: n.SliceMilli}
}

// CapMilli is n's GPU capacity in milli-GPUs.
func (n *Node) CapMilli() Milli {
	per := WholeGPU
	if n.SliceMilli > 0 {
		per = n.SliceMilli
	}
	return Milli(len(n.GPUs)) * per
}

// FreeMilli returns the node's unallocated GPU share.
func (n *Node) FreeMilli() Milli {
	var s Milli
	for _, g := range n.GPUs {
		s += g.FreeMilli
	}
	return s
}
