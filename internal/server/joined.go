package server

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/engine"
	fleetpolicy "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// FreeMachines is a provider that holds machines it can hand out now
// without renting them: agents that joined by hand with an offer (the
// agent pool, alone or beside a cloud in a JoinedProvider). The loop
// gives the engine these counts each tick (State.Joined), and the engine
// leases them for waiting work before it rents anything.
type FreeMachines interface {
	Free(ctx context.Context) (map[string]int, error)
}

// JoinedProvider is a provider (the sim cloud, exec scripts) with an
// agent pool beside it: agents started by hand without --lease, with a
// catalog offer, are machines the loop leases like the static pool's,
// and the cloud rents the rest. The engine decides which: a lease it
// made for a joined machine (engine.IsJoinedLease) is acquired from the
// pool, every other from the cloud; machines are released to whichever
// holds them, and listed and polled from both.
type JoinedProvider struct {
	cloud provider.Provider
	pool  *AgentPool
}

var (
	_ provider.Provider = (*JoinedProvider)(nil)
	_ FreeMachines      = (*JoinedProvider)(nil)
	_ FreeMachines      = (*AgentPool)(nil)
)

// NewJoinedProvider puts pool beside cloud. The pool then keeps to the
// agents bound to joined leases: an agent that joined with --lease (the
// cloud's machine, a hosted agent) is never the pool's.
func NewJoinedProvider(cloud provider.Provider, pool *AgentPool) (*JoinedProvider, error) {
	if cloud == nil || pool == nil {
		return nil, errors.New("joined provider: a provider and an agent pool are required")
	}
	pool.shared = true
	return &JoinedProvider{cloud: cloud, pool: pool}, nil
}

// Cloud is the provider beside the pool.
func (j *JoinedProvider) Cloud() provider.Provider { return j.cloud }

// Pool is the agent pool.
func (j *JoinedProvider) Pool() *AgentPool { return j.pool }

// Acquire implements provider.Provider.
func (j *JoinedProvider) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	if engine.IsJoinedLease(req.ClientToken) {
		return j.pool.Acquire(ctx, req)
	}
	return j.cloud.Acquire(ctx, req)
}

// Release implements provider.Provider.
func (j *JoinedProvider) Release(ctx context.Context, providerID string) error {
	if _, lease, ok := splitProviderID(providerID); ok && engine.IsJoinedLease(lease) {
		return j.pool.Release(ctx, providerID)
	}
	return j.cloud.Release(ctx, providerID)
}

// List implements provider.Provider.
func (j *JoinedProvider) List(ctx context.Context) ([]provider.Machine, error) {
	ms, err := j.cloud.List(ctx)
	if err != nil {
		return nil, err
	}
	joined, err := j.pool.List(ctx)
	if err != nil {
		return nil, err
	}
	return append(ms, joined...), nil
}

// Poll implements provider.Provider: both providers' events, in time
// order.
func (j *JoinedProvider) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	evs, err := j.cloud.Poll(ctx, now)
	if err != nil {
		return nil, err
	}
	joined, err := j.pool.Poll(ctx, now)
	if err != nil {
		return evs, err
	}
	if len(joined) == 0 {
		return evs, nil
	}
	evs = append(evs, joined...)
	slices.SortStableFunc(evs, func(a, b provider.Event) int { return a.At.Compare(b.At) })
	return evs, nil
}

// Free implements FreeMachines.
func (j *JoinedProvider) Free(ctx context.Context) (map[string]int, error) {
	return j.pool.Free(ctx)
}

// setJoined gives the engine the machines the provider can hand out
// without renting (FreeMachines), of the catalog's offers, in offer
// order. A provider that cannot count them leaves the step renting as
// before: a failed count is logged, not a failed tick.
func (l *Loop) setJoined(ctx context.Context, st *engine.State) {
	st.Joined = nil
	fm, ok := l.cfg.Provider.(FreeMachines)
	if !ok {
		return
	}
	free, err := fm.Free(ctx)
	if err != nil {
		l.cfg.Log.Warn("joined machines not counted; renting as if none waited", "err", err)
		return
	}
	ids := make([]string, 0, len(free))
	for id, n := range free {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if o, ok := l.offer(id); ok {
			st.Joined = append(st.Joined, fleetpolicy.Joined{Offer: o, Free: free[id]})
		}
	}
}
