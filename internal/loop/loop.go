// Package loop is the control loop that the live server
// (internal/server) and the simulator (internal/sim) both run, so that
// they differ only in clock, provider, executor and persistence. Turn is
// one turn of it:
//
//	Observe (the provider's events) → Driver.Inputs (executor, agents,
//	cancellations) → engine.Step → engine.Apply → Driver.Commit
//	→ Release → Acquire (every requested lease) → Driver.Acquired
//
// What a machine's event does to the state — ready, a reclaim notice
// (the engine decides the checkpoints), reclaimed, failed — and what a
// provider's answer to an acquisition does — launched, refused for
// capacity — are written here once, and so is their order. Each driver
// adds only its own bookkeeping through a Driver and Hooks: the server
// its store and the agents' join tokens, the simulator its accounting
// and virtual finishes. No decision is made here: every one is the
// engine's.
package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// Hooks are a driver's own work around the shared steps; a nil hook does
// nothing.
type Hooks struct {
	// Losing is called when lease's machine gets a reclaim notice
	// (reclaimed false) or is reclaimed (true), before the engine stops
	// its units: the simulator counts their allocated time.
	Losing func(lease string, at time.Time, reclaimed bool)
	// Resumed gets each unit that checkpointed at a notice and runs on
	// from its checkpoint until the machine goes.
	Resumed func(u *engine.Unit)
	// Bootstrap is what a requested lease's machine joins with; an
	// error postpones its acquisition to the next Act. Nil: none (the
	// simulator's machines need no agent).
	Bootstrap func(le *engine.Lease) (provider.Bootstrap, error)
	// Answered is called once the provider answered an acquisition for
	// lease: with the machine, or with provider.ErrCapacity.
	Answered func(le *engine.Lease, m provider.Machine, boot provider.Bootstrap, err error)
}

// Observe polls the provider and applies its events at now to st's
// leases (by provider id): ready, a reclaim notice (with the engine's
// checkpoint decisions, then the checkpointed units resumed until the
// machine goes), reclaimed, failed. It returns the events to record and
// the provider ids of the machines that ended, whose end the driver
// acknowledges with Release.
func Observe(ctx context.Context, st *engine.State, p provider.Provider, now time.Time, cfg engine.Config, h Hooks) (events []core.Event, ended []string, err error) {
	evs, err := p.Poll(ctx, now)
	if err != nil {
		return nil, nil, fmt.Errorf("poll provider: %w", err)
	}
	if len(evs) == 0 {
		return nil, nil, nil
	}
	leaseOf := make(map[string]string, len(st.Leases))
	for _, le := range st.Leases {
		if le.ProviderID != "" {
			leaseOf[le.ProviderID] = le.ID
		}
	}
	for _, e := range evs {
		id, ok := leaseOf[e.Machine.ProviderID]
		if !ok {
			continue // not ours, or already ended; a reconcile deals with strays
		}
		switch e.Machine.State {
		case provider.Ready:
			engine.OnReady(st, id, e.At)
		case provider.Reclaiming:
			if h.Losing != nil {
				h.Losing(id, e.At, false)
			}
			for _, rc := range engine.OnReclaimNotice(st, id, e.At, e.Machine.ReclaimAt, cfg) {
				events = append(events, core.Event{At: e.At, Kind: "reclaim-notice", Subject: rc.Unit, Reason: rc.Reason})
			}
			// The checkpoint the notice asked for is taken at once: the
			// units run on from it until the machine goes.
			for _, u := range engine.ResumeCheckpointed(st, id) {
				if h.Resumed != nil {
					h.Resumed(u)
				}
			}
		case provider.Reclaimed:
			if h.Losing != nil {
				h.Losing(id, e.At, true)
			}
			engine.OnReclaimed(st, id, e.At)
			ended = append(ended, e.Machine.ProviderID)
		case provider.Failed:
			engine.OnFailed(st, id, e.At)
			ended = append(ended, e.Machine.ProviderID)
		default:
			continue
		}
		events = append(events, core.Event{At: e.At, Kind: "lease." + string(e.Machine.State), Subject: id,
			Reason: fmt.Sprintf("the provider reports machine %s %s", e.Machine.ProviderID, e.Machine.State)})
	}
	return events, ended, nil
}

// Acquired is what Act did for the leases it asked machines for.
type Acquired struct {
	// Changed are the leases the provider answered (launched, or
	// refused and failed): the driver saves them.
	Changed []*engine.Lease
	// Events are what to record of them.
	Events []core.Event
	// Postponed are the leases whose acquisition failed otherwise (or
	// whose bootstrap could not be made), with the error: they stay
	// requested and the next Act asks again with the same client token.
	Postponed map[string]error
}

// Release gives back the machines with the given provider ids; a machine
// the provider no longer knows is gone already. It returns the errors by
// provider id: the driver decides whether one stops it (the simulator)
// or waits for the next reconcile (the server).
func Release(ctx context.Context, p provider.Provider, ids []string) map[string]error {
	var errs map[string]error
	for _, id := range ids {
		if err := p.Release(ctx, id); err != nil && !errors.Is(err, provider.ErrUnknownMachine) {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[id] = err
		}
	}
	return errs
}

// Acquire asks the provider for a machine for every lease of st still
// requested (new ones, and those an earlier call postponed), with the
// lease's client token, so that asking again never rents twice. A machine
// launched is the engine's OnLaunched (and OnReady if it came ready); a
// refusal for capacity is OnRefused: the lease fails and the engine rents
// none of that offer and mode while the refusal holds.
func Acquire(ctx context.Context, st *engine.State, p provider.Provider, now time.Time, h Hooks) Acquired {
	var a Acquired
	postpone := func(id string, err error) {
		if a.Postponed == nil {
			a.Postponed = map[string]error{}
		}
		a.Postponed[id] = err
	}
	for _, le := range st.Leases {
		if le.State != core.LeaseRequested {
			continue
		}
		var boot provider.Bootstrap
		if h.Bootstrap != nil {
			b, err := h.Bootstrap(le)
			if err != nil {
				postpone(le.ID, fmt.Errorf("bootstrap: %w", err))
				continue
			}
			boot = b
		}
		m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: le.ClientToken, OfferID: le.OfferID, Mode: le.Mode, Bootstrap: boot})
		switch {
		case errors.Is(err, provider.ErrCapacity):
			engine.OnRefused(st, le.ID, now)
			a.Events = append(a.Events, core.Event{At: now, Kind: "lease.failed", Subject: le.ID, Reason: fmt.Sprintf("the provider has no capacity for %s %s", le.OfferID, le.Mode)})
		case err != nil:
			postpone(le.ID, err)
			continue
		default:
			engine.OnLaunched(st, le.ID, m.ProviderID, m.LaunchedAt)
			if m.State == provider.Ready {
				engine.OnReady(st, le.ID, m.ReadyAt)
			}
			a.Events = append(a.Events, core.Event{At: now, Kind: "lease.launched", Subject: le.ID, Reason: fmt.Sprintf("the provider launched machine %s for %s %s", m.ProviderID, le.OfferID, le.Mode)})
		}
		if h.Answered != nil {
			h.Answered(le, m, boot, err)
		}
		a.Changed = append(a.Changed, le)
	}
	return a
}
