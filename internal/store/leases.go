package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Lease is a lease as stored: the domain lease, when its intent was
// written, and what engine.Lease tracks beyond it. The offer and plan are
// not stored: they are looked up in the catalog by OfferID and Mode.
type Lease struct {
	core.Lease
	// Requested is when the intent was written, before the provider was
	// called.
	Requested time.Time
	// ReadyAt is zero until the machine can take work; ReclaimAt is set
	// while a spot reclaim notice is pending; IdleSince is when it last
	// became empty.
	ReadyAt   time.Time
	ReclaimAt time.Time
	IdleSince time.Time
	// For lists the units the machine was rented for (unit keys). It is
	// written with the intent and never changes: after a restart the
	// autostop baseline still waits for the machines rented for a unit.
	For []string
}

// LeaseFilter selects leases; empty fields match everything.
type LeaseFilter struct {
	States []core.LeaseState
	// HeldFrom and HeldTo, when HeldTo is set, select the leases held at
	// some time in [HeldFrom, HeldTo): launched (Start set) before HeldTo
	// and not ended (End zero, or after HeldFrom). Reports over a range
	// read these, not the whole history.
	HeldFrom, HeldTo time.Time
	// Limit is the page size (0: DefaultLimit); Cursor the Next of the
	// previous page.
	Limit  int
	Cursor string
}

// Leases keeps every machine the system ever asked for. The intent is
// written, in state requested, before the provider is called, so that a
// restart finds it and reconciles it with the provider's own list.
type Leases interface {
	// CreateLease writes the intent for a new lease, which must be in state
	// requested with a client token. An existing id or client token is
	// ErrConflict.
	CreateLease(ctx context.Context, l Lease) error
	// GetLease returns the lease with id.
	GetLease(ctx context.Context, id string) (Lease, error)
	// LeaseByClientToken returns the lease created with token.
	LeaseByClientToken(ctx context.Context, token string) (Lease, error)
	// LeaseByProviderID returns the lease the provider calls providerID:
	// the live one if there is one, else the newest that ended. A
	// provider may name a new machine with the id of one that is gone
	// (the sim provider numbers machines afresh in each process).
	LeaseByProviderID(ctx context.Context, providerID string) (Lease, error)
	// UpdateLease writes l's state, provider id and times. The move from
	// the stored state to l.State must follow CheckLeaseTransition; the
	// offer, mode, client token and request time never change
	// (ErrConflict). A live lease may not take the provider id of another
	// live lease (ErrConflict): one machine is one live lease. Leases
	// that ended keep their ids and block nothing.
	UpdateLease(ctx context.Context, l Lease) error
	// ListLiveLeases returns every lease not in a final state, oldest
	// first: what the loop restarts from and reconciles.
	ListLiveLeases(ctx context.Context) ([]Lease, error)
	// ListLeases returns a page of the leases f selects, newest first.
	ListLeases(ctx context.Context, f LeaseFilter) (Page[Lease], error)
}

// LeaseStates lists every lease state in lifecycle order.
var LeaseStates = []core.LeaseState{core.LeaseRequested, core.LeaseProvisioning, core.LeaseReady, core.LeaseDraining,
	core.LeaseReleased, core.LeaseReclaimed, core.LeaseFailed}

// ParseLeaseState validates a lease state name.
func ParseLeaseState(field, s string) (core.LeaseState, error) {
	for _, st := range LeaseStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", &core.FieldError{Field: field, Value: s, Allowed: "one of requested, provisioning, ready, draining, released, reclaimed, failed"}
}

func leaseRank(s core.LeaseState) int {
	switch s {
	case core.LeaseRequested:
		return 0
	case core.LeaseProvisioning:
		return 1
	case core.LeaseReady:
		return 2
	case core.LeaseDraining:
		return 3
	}
	return 4
}

// LeaseTransitionAllowed reports whether a lease may move from one state
// to another: forward along requested → provisioning → ready → draining →
// released | reclaimed | failed, skipping steps (a restart may find a
// requested machine already ready), back from draining to ready (a drain
// called off because work arrived), or to the same state. A final state
// never changes.
func LeaseTransitionAllowed(from, to core.LeaseState) bool {
	switch {
	case from == to:
		return true
	case from.Final():
		return false
	case from == core.LeaseDraining && to == core.LeaseReady:
		return true
	}
	return leaseRank(to) > leaseRank(from)
}

// LeasePredecessors lists the states a lease may move to s from.
func LeasePredecessors(s core.LeaseState) []core.LeaseState {
	var out []core.LeaseState
	for _, f := range LeaseStates {
		if LeaseTransitionAllowed(f, s) {
			out = append(out, f)
		}
	}
	return out
}

// CheckLeaseTransition returns an ErrConflict error unless the move is
// allowed.
func CheckLeaseTransition(id string, from, to core.LeaseState) error {
	if !LeaseTransitionAllowed(from, to) {
		return Conflict("lease %q: state %s cannot become %s", id, from, to)
	}
	return nil
}

// ValidateLease reports the first problem with l's fields.
func ValidateLease(l *Lease) error {
	if err := CheckID("id", l.ID); err != nil {
		return err
	}
	if err := CheckID("offer", l.OfferID); err != nil {
		return err
	}
	if !canonicalMode(l.Mode) {
		return &core.FieldError{Field: "mode", Value: string(l.Mode), Allowed: "one of on-demand, spot, daily, weekly, monthly"}
	}
	if _, err := ParseLeaseState("state", string(l.State)); err != nil {
		return err
	}
	if err := CheckID("client_token", l.ClientToken); err != nil {
		return err
	}
	for i, u := range l.For {
		if err := CheckID(fmt.Sprintf("for[%d]", i), u); err != nil {
			return err
		}
	}
	for i, t := range l.Earlier {
		f := fmt.Sprintf("earlier[%d]", i)
		if !canonicalMode(t.Mode) {
			return &core.FieldError{Field: f + ".mode", Value: string(t.Mode), Allowed: "one of on-demand, spot, daily, weekly, monthly"}
		}
		next := l.Start
		if i+1 < len(l.Earlier) {
			next = l.Earlier[i+1].Start
		}
		if t.Start.IsZero() || !t.Start.Before(next) {
			return &core.FieldError{Field: f + ".start", Value: t.Start.UTC().Format(time.RFC3339Nano),
				Allowed: "a time before the next term's start " + next.UTC().Format(time.RFC3339Nano) + " (terms are oldest first, each before the lease's start)"}
		}
	}
	return CheckText("provider_id", l.ProviderID)
}

// ValidateIntent reports the first problem with a lease intent about to be
// created: ValidateLease's, state requested and a request time.
func ValidateIntent(l *Lease) error {
	if err := ValidateLease(l); err != nil {
		return err
	}
	if l.State != core.LeaseRequested {
		return &core.FieldError{Field: "state", Value: string(l.State), Allowed: "requested: an intent is written before the provider is called"}
	}
	if l.Requested.IsZero() {
		return &core.FieldError{Field: "requested", Value: "", Allowed: "the time the intent was written"}
	}
	return nil
}

// canonicalMode reports whether m is a billing mode's canonical name
// (core.ParseBillingMode also takes aliases, which are not stored).
func canonicalMode(m core.BillingMode) bool {
	for _, x := range core.BillingModes {
		if x == m {
			return true
		}
	}
	return false
}
