package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// Driver is what a loop's driver does around one Turn; the server and
// the simulator are the two. Each method is its own bookkeeping, never a
// decision: what is decided is Step's, and what a provider event or an
// acquisition does to the state is Observe's and Acquire's.
type Driver interface {
	// Inputs applies to st what happened since the last turn that the
	// provider's poll does not report: units the executor saw end,
	// cancellations, the agents' reports. It runs after the provider's
	// events, so a unit whose machine was reclaimed at the instant it
	// would have ended is requeued, not finished, in both drivers. It
	// returns the events to record.
	Inputs(ctx context.Context, st *engine.State, now time.Time) ([]core.Event, error)
	// Decided sees the step's decisions before they are applied (the
	// units they name are as they were) and returns events to record
	// after the step's own.
	Decided(ctx context.Context, st *engine.State, d *engine.Decisions) []core.Event
	// Commit records the turn after Apply and before any machine is
	// released or rented: a driver that persists writes here, so a
	// crash after it leaves intents (requested leases) that the next
	// Acquire asks for again, never machines nobody knows of. An error
	// ends the turn with nothing acted on.
	Commit(ctx context.Context, st *engine.State, t Turned) error
	// ReleaseFailed is told of a machine the provider did not release;
	// an error ends the turn (the simulator), nil goes on (the server
	// reconciles at its next tick, which releases the machine again).
	ReleaseFailed(providerID string, err error) error
	// Acquired records what Acquire did, after the provider answered.
	Acquired(ctx context.Context, st *engine.State, now time.Time, a Acquired) error
}

// Turned is what one turn decided and observed, handed to Commit.
type Turned struct {
	Now time.Time
	// Events are the provider's, the driver's inputs', the step's and
	// Decided's, in that order.
	Events    []core.Event
	Decisions engine.Decisions
	// Created are the leases the step asked for (requested, not yet
	// acquired).
	Created []*engine.Lease
}

// Turn runs one turn of the control loop at now on st:
//
//	Observe (provider events) → drv.Inputs → engine.Step → drv.Decided
//	→ engine.Apply → drv.Commit → Release (ended and released machines)
//	→ Acquire (every requested lease) → drv.Acquired
//
// The server's tick and the simulator's step are this function with
// their own Driver and Hooks; the order of the calls, and so what wins
// when two things happen at one instant, is written only here.
func Turn(ctx context.Context, st *engine.State, p provider.Provider, now time.Time, cfg engine.Config, drv Driver, h Hooks) error {
	events, ended, err := Observe(ctx, st, p, now, cfg, h)
	if err != nil {
		return err
	}
	in, err := drv.Inputs(ctx, st, now)
	if err != nil {
		return err
	}
	events = append(events, in...)
	d := engine.Step(st, now, cfg)
	events = append(events, d.Events...)
	events = append(events, drv.Decided(ctx, st, &d)...)
	// Machines the step releases, by provider id, read before Apply
	// ends their leases.
	release := ended
	if len(d.Release) > 0 {
		machine := make(map[string]string, len(st.Leases))
		for _, le := range st.Leases {
			machine[le.ID] = le.ProviderID
		}
		for _, r := range d.Release {
			if pid := machine[r.LeaseID]; pid != "" {
				release = append(release, pid)
			}
		}
	}
	created := engine.Apply(st, d)
	if err := drv.Commit(ctx, st, Turned{Now: now, Events: events, Decisions: d, Created: created}); err != nil {
		return err
	}
	for pid, err := range Release(ctx, p, release) {
		if err := drv.ReleaseFailed(pid, err); err != nil {
			return fmt.Errorf("release %s: %w", pid, err)
		}
	}
	return drv.Acquired(ctx, st, now, Acquire(ctx, st, p, now, h))
}
