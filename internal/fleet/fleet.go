package fleet

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Config tunes the fleet policy; zero fields take the defaults in
// Defaults.
type Config struct {
	// WaitTarget is how long pending work of each tier may wait for the
	// current fleet before more is rented (core shortest).
	WaitTarget map[core.Tier]time.Duration
	// ScaleOutBP: acquire ahead of waiting targets when fleet utilization
	// (allocated/paid GPU share) is above this, in basis points (8000).
	ScaleOutBP int64
	// ScaleInBP: a machine allocated below this share (3000) is a
	// candidate for consolidation.
	ScaleInBP int64
	// ReleaseMargin is how long before the billing boundary an idle
	// machine is released (2 minutes: provider calls take time).
	ReleaseMargin time.Duration
	// MinIdle is the least idle time before a machine billed per second
	// or minute is released: the hysteresis that stops flapping (5 m).
	MinIdle time.Duration
	// MinHold is the least time after acquiring before releasing (10 m).
	MinHold time.Duration
	// IdleUtilPct and IdleFor: a GPU under IdleUtilPct for IdleFor raises
	// the idle alert (20%, 30 minutes).
	IdleUtilPct int
	IdleFor     time.Duration
	// IdleWindow and IdleBurstBP are the ladder's rule (IdleLow): a GPU
	// is low when the time-weighted mean of its utilization over the last
	// IdleWindow (IdleFor when zero), with its busiest IdleBurstBP basis
	// points of the window's time left out, is under IdleUtilPct
	// (IdleWindow = IdleFor and IdleBurstBP = 1000 when zero; a negative
	// IdleBurstBP leaves nothing out).
	IdleWindow  time.Duration
	IdleBurstBP int
	// NotifyAfter and ActAfter are the ladder's next rungs after the alert
	// (15 and 30 minutes), and IdleAction what the last rung does.
	NotifyAfter, ActAfter time.Duration
	IdleAction            IdleAction
	// ZombieAfter: a GPU whose unit's agent reports no process for this
	// long is a zombie (10 minutes).
	ZombieAfter time.Duration
	// MaxReclaims: after this many spot reclaims a unit runs on-demand (3).
	MaxReclaims int
	// ProvisioningDelay is the expected time from acquire to ready, per
	// offer ID; DefaultDelay for the rest (3 minutes).
	ProvisioningDelay map[string]time.Duration
	DefaultDelay      time.Duration
	// DefaultDuration is the duration assumed for work without an
	// estimate (1 hour).
	DefaultDuration time.Duration
	// Reserved is the committed base: machines per GPU model kept on a
	// committed term whatever the load.
	Reserved map[string]int
	// ReservedOffer names, per GPU model, the offer the base is rented
	// from (ReservedFit's choice); a model without one, or whose offer is
	// refused, takes the cheapest per GPU (ReservedOffer).
	ReservedOffer map[string]string
	// ReservedMode is the committed mode for the base (monthly).
	ReservedMode core.BillingMode
	// MaxAcquire caps acquisitions per step (64).
	MaxAcquire int
	// MoveOverhead is what moving a unit costs in GPU time: checkpoint
	// plus restart (5 minutes). Consolidation moves work only when the
	// machine time it saves is worth more.
	MoveOverhead time.Duration
	// NoConsolidation turns moving work off sparse machines off.
	NoConsolidation bool
	// IgnoreBoundary releases an idle machine after MinIdle whatever its
	// billing boundary: the cluster-autoscaler baseline, not our policy.
	IgnoreBoundary bool
	// NoPacking rents one machine per waiting unit (the autostop
	// baseline), instead of packing units into machines being rented.
	NoPacking bool
	// OutlookHorizon is how far back recent demand is read to price a
	// committed term on what it is expected to serve (see Outlook; a day);
	// negative: terms are priced on the job they are rented for alone.
	OutlookHorizon time.Duration
	// PrescaleLead, when above 0, rents ahead of the daily peak: for the
	// demand the recent days reached within this long of the time of day
	// (Prescale); PrescaleQuantile is the lower quantile of those days, in
	// percent (0: the least of them).
	PrescaleLead     time.Duration
	PrescaleQuantile int
}

// IdleAction is what the idle ladder's last rung does.
type IdleAction string

// The idle actions.
const (
	IdleShare    IdleAction = "share"    // mark the GPU shareable: pack other work onto it
	IdleDownsize IdleAction = "downsize" // advise a smaller GPU or fewer GPUs
	IdleStop     IdleAction = "stop"     // stop the job and free the GPU
	IdleNone     IdleAction = "none"
)

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	if c.WaitTarget == nil {
		c.WaitTarget = map[core.Tier]time.Duration{core.TierCore: time.Minute, core.TierRegular: 10 * time.Minute, core.TierOffline: time.Hour}
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.ScaleOutBP == 0 {
		c.ScaleOutBP = 8000
	}
	if c.ScaleInBP == 0 {
		c.ScaleInBP = 3000
	}
	set(&c.ReleaseMargin, 2*time.Minute)
	set(&c.MinIdle, 5*time.Minute)
	set(&c.MinHold, 10*time.Minute)
	if c.IdleUtilPct == 0 {
		c.IdleUtilPct = 20
	}
	set(&c.IdleFor, 30*time.Minute)
	set(&c.IdleWindow, c.IdleFor)
	if c.IdleBurstBP == 0 {
		c.IdleBurstBP = 1000
	}
	set(&c.NotifyAfter, 15*time.Minute)
	set(&c.ActAfter, 30*time.Minute)
	if c.IdleAction == "" {
		c.IdleAction = IdleShare
	}
	set(&c.ZombieAfter, 10*time.Minute)
	if c.MaxReclaims == 0 {
		c.MaxReclaims = 3
	}
	set(&c.DefaultDelay, 3*time.Minute)
	set(&c.DefaultDuration, time.Hour)
	if c.ReservedMode == "" {
		c.ReservedMode = core.Monthly
	}
	if c.MaxAcquire == 0 {
		c.MaxAcquire = 64
	}
	set(&c.MoveOverhead, 5*time.Minute)
	set(&c.OutlookHorizon, 24*time.Hour)
	return c
}

func (c Config) delay(offerID string) time.Duration {
	if d, ok := c.ProvisioningDelay[offerID]; ok {
		return d
	}
	return c.DefaultDelay
}

// SoonestReady is the shortest expected time from renting a machine to
// its being ready, over every offer.
func (c Config) SoonestReady() time.Duration {
	d := c.DefaultDelay
	for _, x := range c.ProvisioningDelay {
		d = min(d, x)
	}
	return d
}

// Machine is the fleet's view of one lease.
type Machine struct {
	Lease *core.Lease
	Offer *core.Offer
	Plan  *core.PricePlan
	// ReadyAt is zero while provisioning.
	ReadyAt time.Time
	// AllocMilli is the GPU share allocated to running units, including
	// placements made this step.
	AllocMilli core.Milli
	// IdleSince is when the machine last became empty; zero while busy.
	IdleSince time.Time
	// ReclaimAt is set while a spot reclaim notice is pending.
	ReclaimAt time.Time
	// For lists the units it was rented for, where known.
	For []string
	// Paid, if set, remembers the machine's paid boundary between calls
	// (the engine keeps one per lease); nil: priced afresh.
	Paid *billing.PaidMemo
}

// paidUntil is billing.PaidUntil for the machine as of now.
func (m *Machine) paidUntil(now time.Time) (time.Time, error) {
	if m.Paid != nil {
		return m.Paid.PaidUntil(m.Plan, m.Lease.Start, now)
	}
	return billing.PaidUntil(m.Plan, m.Lease.Start, now)
}

// CapMilli is the machine's GPU capacity.
func (m *Machine) CapMilli() core.Milli { return m.Offer.CapMilli() }
