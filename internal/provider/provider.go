// Package provider is the boundary to whoever rents gpufleet its
// machines: a cloud API, an IDC's scripts, machines we own. Every
// provider sits behind the one small Provider interface, and the
// simulated provider (provider/sim) implements it for tests, demos and
// the simulator, so the code that acquires and releases is the same in
// all three.
//
// Calls are idempotent by client token: asking twice with the same token
// returns the same machine, releasing twice is not an error. That is
// what makes the control loop safe to retry and to restart.
package provider

import (
	"context"
	"errors"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ErrCapacity is returned when the provider has no machine of the offer
// to give now.
var ErrCapacity = errors.New("provider: no capacity")

// ErrUnknownMachine is returned for a machine the provider does not know.
var ErrUnknownMachine = errors.New("provider: unknown machine")

// State is where a machine is, as the provider sees it.
type State string

// The machine states a provider reports.
const (
	Provisioning State = "provisioning"
	Ready        State = "ready"
	// Reclaiming: a spot machine under a reclaim notice; it will be taken
	// at Machine.ReclaimAt.
	Reclaiming State = "reclaiming"
	Reclaimed  State = "reclaimed"
	Released   State = "released"
	Failed     State = "failed"
)

// AcquireRequest asks for one machine.
type AcquireRequest struct {
	// ClientToken makes the call idempotent; the lease ID is a good one.
	ClientToken string
	OfferID     string
	Mode        core.BillingMode
	// Bootstrap is what the machine's agent joins with; the provider
	// hands it to the machine (user data, an SSH session, a script's
	// environment). Zero: the caller gives none (the simulator).
	Bootstrap Bootstrap
}

// Bootstrap is how a new machine's agent finds and joins the server: it
// joins as the lease LeaseID with the one-time JoinToken, which is good
// only for that lease and only until Expires.
type Bootstrap struct {
	// ServerURL is the server the agent joins.
	ServerURL string
	// LeaseID is the lease the machine is (the request's client token).
	LeaseID string
	// JoinToken is the agent's secret; a provider must not log it.
	JoinToken string
	// Expires is when an unused JoinToken stops working.
	Expires time.Time
	// BinaryURL is where the machine may download the gpufleet binary
	// when it has none (served by the server); empty: it is installed.
	BinaryURL string
}

// Machine is one rented machine as the provider reports it.
type Machine struct {
	ProviderID  string
	ClientToken string
	OfferID     string
	Mode        core.BillingMode
	State       State
	// LaunchedAt is when billing starts; ReadyAt when it can take work.
	LaunchedAt time.Time
	ReadyAt    time.Time
	// ReclaimAt is, for a machine under a reclaim notice, when it goes.
	ReclaimAt time.Time
	// EndedAt is when it was released or reclaimed.
	EndedAt time.Time
}

// Event is a change the provider reports: a machine became ready, got a
// reclaim notice, was reclaimed or failed.
type Event struct {
	At      time.Time
	Machine Machine
}

// Provider rents machines.
type Provider interface {
	// Acquire asks for a machine; with a token seen before it returns
	// that machine again.
	Acquire(ctx context.Context, req AcquireRequest) (Machine, error)
	// Release gives a machine back; releasing a released machine is fine.
	Release(ctx context.Context, providerID string) error
	// List returns every machine the provider holds for us, in any state
	// but released, so that a restarted server can reconcile. A reclaimed
	// or failed machine stays listed until it is released: the Release is
	// the caller's acknowledgement, so an end missed across a restart is
	// still seen.
	List(ctx context.Context) ([]Machine, error)
	// Poll returns the events due by now, in time order, and forgets
	// them.
	//
	// Nothing falls between List and Poll: every change after the state
	// a machine was last shown in (by Acquire, List or an earlier Poll)
	// is reported by a later Poll, once. A restarted server reconciles
	// with List and from then on learns of changes from Poll alone, so a
	// machine List showed provisioning that is ready by the first Poll
	// must come back from that Poll as ready; a provider that took it as
	// already seen would leave its lease provisioning for good. What List
	// did show need not be reported again.
	Poll(ctx context.Context, now time.Time) ([]Event, error)
}
