package fleet

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Release is a decision to give a machine back, or to keep it and why.
type Release struct {
	LeaseID string
	// Keep is set when the machine is idle but kept; Until says till when.
	Keep  bool
	Until time.Time
	// Reason says why a machine is released. For a kept machine it is
	// empty and Why formats it when asked: every step keeps most idle
	// machines and nobody reads why, so formatting it eagerly was a tenth
	// of a replay's time.
	Reason string
	// kept holds what Why needs to say why the machine is kept (kept as
	// data rather than a closure: one closure per kept machine per step
	// was most of Releases' allocations).
	kept keptWhy
}

// keptWhy is the reason a machine is kept, unformatted.
type keptWhy struct {
	kind    keptKind
	idle, d time.Duration
	mode    core.BillingMode
}

type keptKind uint8

const (
	keptNone keptKind = iota
	keptTerm
	keptFits
	keptHold
	keptMinIdle
	keptPaid
)

// Why is the reason of the decision, kept or released.
func (r *Release) Why() string {
	if r.Reason != "" {
		return r.Reason
	}
	k := &r.kept
	switch k.kind {
	case keptTerm: // kept until the term's end
		return fmt.Sprintf("idle %s, but its %s term is paid until %s: kept for offline backfill, never released early", k.idle.Round(time.Second), k.mode, r.Until.UTC().Format(time.RFC3339))
	case keptFits:
		return "idle, but waiting work fits it"
	case keptHold:
		return fmt.Sprintf("acquired %s ago, held at least %s", k.idle.Round(time.Second), k.d)
	case keptMinIdle:
		return fmt.Sprintf("idle %s, released after %s idle", k.idle.Round(time.Second), k.d)
	case keptPaid: // kept until d before the boundary
		return fmt.Sprintf("idle %s but paid until %s: kept for arriving work, released %s before the boundary", k.idle.Round(time.Second), r.Until.Add(k.d).UTC().Format(time.RFC3339), k.d)
	}
	return ""
}

// Releases decides, for every ready machine with nothing allocated, whether
// to release it now. An idle machine is kept while the time already paid
// for lasts — work may still arrive — and released just before its next
// billing boundary (ReleaseMargin ahead), never later. A committed term is
// never released before it ends: it is backfilled instead. Machines billed
// per second or minute are released after MinIdle, the hysteresis that
// keeps the fleet from flapping; no machine is released within MinHold of
// its start. pendingFits reports whether waiting work could use the
// machine: such a machine is kept for it.
func Releases(now time.Time, machines []Machine, pendingFits func(m *Machine) bool, cfg Config) []Release {
	cfg = cfg.Defaults()
	// Room for every idle machine at once (most are kept at every step).
	idleMachines := 0
	for i := range machines {
		if machines[i].releasable() {
			idleMachines++
		}
	}
	if idleMachines == 0 {
		return nil
	}
	out := make([]Release, 0, idleMachines)
	for i := range machines {
		m := &machines[i]
		l := m.Lease
		if !m.releasable() {
			continue
		}
		idle := now.Sub(m.IdleSince)
		if m.IdleSince.IsZero() {
			idle = 0
		}
		paid, err := m.paidUntil(now)
		if err != nil {
			continue
		}
		keep := func(until time.Time, why keptWhy) {
			out = append(out, Release{LeaseID: l.ID, Keep: true, Until: until, kept: why})
		}
		switch {
		case m.Plan.Committed() && now.Before(l.Start.Add(time.Duration(m.Plan.Term)*time.Second).Add(-cfg.ReleaseMargin)):
			end := l.Start.Add(time.Duration(m.Plan.Term) * time.Second)
			keep(end, keptWhy{kind: keptTerm, idle: idle, mode: m.Plan.Mode})
		case pendingFits != nil && pendingFits(m):
			keep(paid, keptWhy{kind: keptFits})
		case now.Sub(l.Start) < cfg.MinHold:
			keep(l.Start.Add(cfg.MinHold), keptWhy{kind: keptHold, idle: now.Sub(l.Start), d: cfg.MinHold})
		case m.Plan.Granularity < 3600 && !m.Plan.Committed() || cfg.IgnoreBoundary && !m.Plan.Committed():
			// Per-second or per-minute billing: the boundary is always
			// near, so hysteresis decides.
			if idle >= cfg.MinIdle {
				out = append(out, Release{LeaseID: l.ID, Reason: fmt.Sprintf("released: idle %s (≥ %s) on per-%s billing, no pending work fits", idle.Round(time.Second), cfg.MinIdle, granText(m.Plan.Granularity))})
			} else {
				keep(m.IdleSince.Add(cfg.MinIdle), keptWhy{kind: keptMinIdle, idle: idle, d: cfg.MinIdle})
			}
		case !now.Before(paid.Add(-cfg.ReleaseMargin)):
			out = append(out, Release{LeaseID: l.ID, Reason: fmt.Sprintf("released at its %s boundary %s: idle %s, no pending work fits", granText(m.Plan.Granularity), paid.UTC().Format(time.RFC3339), idle.Round(time.Minute))})
		default:
			keep(paid.Add(-cfg.ReleaseMargin), keptWhy{kind: keptPaid, idle: idle, d: cfg.ReleaseMargin})
		}
	}
	return out
}

// releasable: a live, ready machine with nothing allocated and no
// reclaim notice — one Releases decides on.
func (m *Machine) releasable() bool {
	return !m.Lease.State.Final() && !m.ReadyAt.IsZero() && m.AllocMilli <= 0 && m.ReclaimAt.IsZero()
}

func granText(sec int64) string {
	for _, p := range core.Periods {
		if p.Seconds() == sec {
			return string(p)
		}
	}
	return fmt.Sprintf("%ds", sec)
}
