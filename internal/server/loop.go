package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	fleetpolicy "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store"
)

// DefaultTick is the loop's period when Config leaves Tick zero.
const DefaultTick = 5 * time.Second

// LeaderKey is the advisory lock the loop's leader holds.
const LeaderKey int64 = 0x6770_7566_6c74 // "gpuflt"

// Config is what a Loop runs on.
type Config struct {
	Store    store.Store
	Provider provider.Provider
	// Offers is the catalog the engine rents from and the leases' offers
	// are resolved in.
	Offers []core.Offer
	// RentOffers is what the engine may rent: the policy's billing modes
	// of Offers (policy.Policy.Offers); nil: Offers.
	RentOffers []core.Offer
	// TimeOfUse is the tariff deferrable work waits for (policy.Policy's
	// Tariff); nil: no shifting.
	TimeOfUse *core.TimeOfUse
	Engine    engine.Config
	Clock     clock.Clock
	Log       *slog.Logger
	// Tick is the period between steps (DefaultTick if zero).
	Tick time.Duration
	// Agents configures the work with node agents (agents.go).
	Agents AgentConfig
	// Executor runs the units on machines no agent serves (executor.go);
	// nil: none does, they wait for their machine's agent.
	Executor Executor
	// Capacity is the provider's limit on machines per offer (nil: none
	// known); a waiting unit that no offer within it can run gets a
	// unit.unrunnable event (fleet.Feasible).
	Capacity fleetpolicy.Capacity
	// Replica names this process among the servers sharing the store:
	// the leader records it on taking the lead, and /readyz shows it
	// (DefaultReplica if empty).
	Replica string
	// PublicURL is the server's URL as the machines reach it: with it,
	// each lease acquired from the provider gets a one-time join token
	// for its machine's agent, handed over in the AcquireRequest's
	// Bootstrap (bootstrap.go). Empty: no bootstrap (the simulator).
	PublicURL string
	// BinaryURL is where a machine may download the gpufleet binary
	// (Bootstrap.BinaryURL); empty: the machines have it installed.
	BinaryURL string
	// Notify, when set, is told of the idle ladder's notify and action
	// rungs and of zombies (notify.go) once each tick's decisions are
	// committed; a Notifier that has Run(ctx) is run by Run.
	Notify Notifier
}

// DefaultReplica names this process: its host name and process id, which
// tell apart the replicas of one deployment, on one machine or several.
func DefaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// Loop is the live control loop.
type Loop struct {
	cfg     Config
	offers  map[string]*core.Offer
	metrics *metrics
	tracker *agentTracker
	// demand is the fleet's recent demand, kept between ticks.
	demand []fleetpolicy.DemandPoint
	// health is what Ready reports on.
	health health
	// unrunnable is the reason last reported for each waiting unit that
	// no offer can run, so that each reason is an event once.
	unrunnable map[string]string
	// ledger is the teams' month-to-date spend last read (ledger.go).
	ledger ledgerCache
	// joins are the join tokens of the leases waiting for their
	// provider, by lease (bootstrap.go).
	joins map[string]joinSecret
	// live is the engine state kept between ticks (live.go); nil: the
	// next tick loads it whole.
	live *liveState
	// reconcileDue is set when the provider did not release a machine
	// whose lease the store has ended: the next tick reconciles first,
	// releasing it again, until a reconcile succeeds. A machine nobody
	// uses is never left running until the next start.
	reconcileDue bool
}

// NewLoop returns a loop on cfg.
func NewLoop(cfg Config) (*Loop, error) {
	if cfg.Store == nil || cfg.Provider == nil || cfg.Clock == nil || cfg.Log == nil {
		return nil, errors.New("new loop: store, provider, clock and log are required")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.RentOffers == nil {
		cfg.RentOffers = cfg.Offers
	}
	if cfg.Replica == "" {
		cfg.Replica = DefaultReplica()
	}
	l := &Loop{cfg: cfg, offers: map[string]*core.Offer{}, metrics: newMetrics(), unrunnable: map[string]string{}, joins: map[string]joinSecret{}}
	for i := range cfg.Offers {
		l.offers[cfg.Offers[i].ID] = &cfg.Offers[i]
	}
	return l, nil
}

func (l *Loop) offer(id string) (*core.Offer, bool) {
	o, ok := l.offers[id]
	return o, ok
}

// Run leads (waiting for the leadership lock while another process holds
// it), reconciles, then ticks until ctx ends. A store error while leading
// gives the lock up and starts over.
func (l *Loop) Run(ctx context.Context) error {
	if r, ok := l.cfg.Notify.(interface{ Run(context.Context) }); ok {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); r.Run(ctx) }()
	}
	for {
		err := l.lead(ctx)
		l.metrics.leader.Set(0) // the lock is given up whenever lead returns
		if ctx.Err() != nil {
			return nil
		}
		l.health.failed(err)
		l.metrics.failures.Inc()
		l.cfg.Log.Error("control loop stopped leading; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-l.cfg.Clock.After(l.cfg.Tick):
		}
	}
}

func (l *Loop) lead(ctx context.Context) error {
	if ld, ok := l.cfg.Store.(store.Leader); ok {
		for {
			release, ok, err := ld.TryLeader(ctx, LeaderKey)
			if err != nil {
				return fmt.Errorf("lead: %w", err)
			}
			if ok {
				defer release()
				break
			}
			// Who leads, for /readyz: a store that cannot say is retried
			// with the lock at the next tick.
			leader, err := l.cfg.Store.Loop().LoadLeader(ctx)
			if err != nil {
				return fmt.Errorf("lead: %w", err)
			}
			l.health.following(leader)
			l.metrics.leader.Set(0)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-l.cfg.Clock.After(l.cfg.Tick):
			}
		}
	}
	// The record names the leader to the followers; the lock, held
	// until lead returns, is what makes it the only one.
	rec, err := l.cfg.Store.Loop().RecordLeader(ctx, l.cfg.Replica, l.cfg.Clock.Now())
	if err != nil {
		return fmt.Errorf("lead: %w", err)
	}
	l.live = nil // another leader may have ticked since this one last did
	l.cfg.Log.Info("control loop leading", "tick", l.cfg.Tick, "replica", rec.Replica, "term", rec.Term)
	l.health.led(rec)
	l.metrics.leader.Set(1)
	if err := l.Reconcile(ctx); err != nil {
		return err
	}
	for {
		if err := l.Tick(ctx); err != nil {
			return err
		}
		now := l.cfg.Clock.Now()
		l.health.ticked(now)
		l.metrics.lastOK.Set(float64(now.UnixMilli()) / 1e3)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.cfg.Clock.After(l.cfg.Tick):
		}
	}
}

// Reconcile brings the store's leases in line with the provider's
// machines: a machine the store has no lease for is adopted (a lease in
// its state, its provider id as client token), a live lease whose machine
// the provider no longer lists is marked failed, a lease the store
// released whose machine is still there is released again, and a
// requested lease whose machine exists takes its provider id and state.
func (l *Loop) Reconcile(ctx context.Context) error {
	l.live = nil // it writes leases itself: the next tick loads them
	now := l.cfg.Clock.Now()
	machines, err := l.cfg.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: list machines: %w", err)
	}
	live, err := l.cfg.Store.Leases().ListLiveLeases(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	byToken := map[string]*store.Lease{}
	byPID := map[string]*store.Lease{}
	for i := range live {
		byToken[live[i].ClientToken] = &live[i]
		if live[i].ProviderID != "" {
			byPID[live[i].ProviderID] = &live[i]
		}
	}
	seen := map[string]bool{}
	var events []core.Event
	var release []string
	for _, m := range machines {
		sl := byPID[m.ProviderID]
		if sl == nil && m.ClientToken != "" {
			sl = byToken[m.ClientToken]
		}
		if sl == nil {
			// Not live in the store: a released lease whose Release was
			// lost, or a machine the store never saw.
			old, err := l.cfg.Store.Leases().LeaseByProviderID(ctx, m.ProviderID)
			if err != nil && m.ClientToken != "" && errors.Is(err, store.ErrNotFound) {
				old, err = l.cfg.Store.Leases().LeaseByClientToken(ctx, m.ClientToken)
			}
			switch {
			case err == nil:
				seen[old.ID] = true
				if m.State != provider.Released {
					release = append(release, m.ProviderID)
					events = append(events, core.Event{At: now, Kind: "lease.rereleased", Subject: old.ID,
						Reason: fmt.Sprintf("the store has lease %s %s but the provider still holds machine %s: releasing it again", old.ID, old.State, m.ProviderID)})
				}
			case errors.Is(err, store.ErrNotFound):
				adopted, ev, err := l.adopt(ctx, m, now)
				if err != nil {
					return err
				}
				seen[adopted] = true
				events = append(events, ev)
				if _, known := l.offer(m.OfferID); !known {
					release = append(release, m.ProviderID)
				}
			default:
				return fmt.Errorf("reconcile: machine %s: %w", m.ProviderID, err)
			}
			continue
		}
		seen[sl.ID] = true
		next := *sl
		next.ProviderID = m.ProviderID
		applyMachine(&next, m)
		if next.State != sl.State || next.ProviderID != sl.ProviderID {
			if err := l.cfg.Store.Leases().UpdateLease(ctx, next); err != nil {
				return fmt.Errorf("reconcile: lease %s: %w", sl.ID, err)
			}
			events = append(events, core.Event{At: now, Kind: "lease.reconciled", Subject: sl.ID,
				Reason: fmt.Sprintf("the provider has machine %s %s: lease %s was %s, is now %s", m.ProviderID, m.State, sl.ID, sl.State, next.State)})
		}
		if next.State.Final() {
			release = append(release, m.ProviderID) // the Release acknowledges the end
		}
	}
	for i := range live {
		sl := &live[i]
		if seen[sl.ID] || sl.ProviderID == "" {
			// Unseen intents without a machine are acquired by the next
			// tick with their client token.
			continue
		}
		next := *sl
		next.State, next.End = core.LeaseFailed, now
		if err := l.cfg.Store.Leases().UpdateLease(ctx, next); err != nil {
			return fmt.Errorf("reconcile: lease %s: %w", sl.ID, err)
		}
		events = append(events, core.Event{At: now, Kind: "lease.vanished", Subject: sl.ID,
			Reason: fmt.Sprintf("the provider no longer lists machine %s of lease %s: marked failed", sl.ProviderID, sl.ID)})
	}
	if len(events) > 0 {
		if _, err := l.cfg.Store.Events().AppendEvents(ctx, events...); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
	}
	for _, pid := range release {
		if err := l.cfg.Provider.Release(ctx, pid); err != nil {
			return fmt.Errorf("reconcile: release %s: %w", pid, err)
		}
	}
	l.cfg.Log.Info("reconciled leases with the provider", "machines", len(machines), "live_leases", len(live), "changes", len(events))
	return nil
}

// adopt stores a lease for a machine the store never saw.
func (l *Loop) adopt(ctx context.Context, m provider.Machine, now time.Time) (string, core.Event, error) {
	id := "adopted-" + m.ProviderID
	token := m.ClientToken
	if token == "" {
		token = id
	}
	_, known := l.offer(m.OfferID)
	sl := store.Lease{Lease: core.Lease{ID: id, OfferID: m.OfferID, Mode: m.Mode, State: core.LeaseRequested, ClientToken: token}, Requested: now}
	err := l.cfg.Store.Tx(ctx, func(tx store.Tx) error {
		if err := tx.Leases().CreateLease(ctx, sl); err != nil {
			return err
		}
		sl.ProviderID = m.ProviderID
		applyMachine(&sl, m)
		if !known {
			// The engine cannot schedule on (or price) an offer outside
			// the catalog: record the machine, then give it back.
			sl.State, sl.End = core.LeaseReleased, now
		}
		return tx.Leases().UpdateLease(ctx, sl)
	})
	if err != nil {
		return "", core.Event{}, fmt.Errorf("reconcile: adopt machine %s: %w", m.ProviderID, err)
	}
	why := "adopted"
	if !known {
		why = "recorded and released: its offer is not in the catalog"
	}
	return id, core.Event{At: now, Kind: "lease.adopted", Subject: id,
		Reason: fmt.Sprintf("the provider holds machine %s (%s %s, %s) that the store had no lease for: %s", m.ProviderID, m.OfferID, m.Mode, m.State, why)}, nil
}

// applyMachine moves a stored lease to what the provider reports.
func applyMachine(sl *store.Lease, m provider.Machine) {
	if !m.LaunchedAt.IsZero() && sl.Start.IsZero() {
		sl.Start = m.LaunchedAt
	}
	var to core.LeaseState
	switch m.State {
	case provider.Provisioning:
		to = core.LeaseProvisioning
	case provider.Ready, provider.Reclaiming:
		to = core.LeaseReady
		if sl.ReadyAt.IsZero() {
			sl.ReadyAt = m.ReadyAt
		}
		if m.State == provider.Reclaiming {
			sl.ReclaimAt = m.ReclaimAt
		}
	case provider.Reclaimed:
		to, sl.End = core.LeaseReclaimed, m.EndedAt
	case provider.Released:
		to, sl.End = core.LeaseReleased, m.EndedAt
	case provider.Failed:
		to, sl.End = core.LeaseFailed, m.EndedAt
	default:
		return
	}
	if store.LeaseTransitionAllowed(sl.State, to) {
		sl.State = to
	}
}
