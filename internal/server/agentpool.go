package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store"
)

// AgentPool is the static provider of machines that joined by their
// agents: each agent that declared an offer (or that the pool's
// configuration pins to one) is a machine of that offer, free while no
// lease holds it. Acquire binds a free agent to the lease (its client
// token), Release frees it; the binding lives in the store, so the pool
// holds no state a restart would lose, and Reconcile sees exactly the
// agents bound to leases. A machine whose agent is down is not handed
// out.
//
// Owned machines are not reclaimed, but spot capacity a site sells on
// (or a test) can be: Reclaim queues a reclaim notice and the reclaim
// itself, which the loop polls like a cloud's.
type AgentPool struct {
	st  store.Store
	clk clock.Clock
	cfg AgentConfig
	// pins fixes the offer of known machines by agent id, whatever
	// they declare.
	pins   map[string]string
	offers map[string]bool

	// shared: the pool serves beside another provider (JoinedProvider),
	// and its machines are only those bound to joined leases
	// (engine.IsJoinedLease): an agent that joined with --lease is the
	// other provider's machine, not the pool's.
	shared bool

	mu     sync.Mutex
	events []provider.Event
	gone   map[string]bool // reclaimed agents: not handed out again until they rejoin
}

var (
	_ provider.Provider = (*AgentPool)(nil)
	_ AgentConfigurer   = (*AgentPool)(nil)
)

// NewAgentPool returns the pool over st's agents. offers are the
// catalog's offer ids; pins maps agent ids to offers.
func NewAgentPool(st store.Store, clk clock.Clock, offers []string, pins map[string]string, cfg AgentConfig) (*AgentPool, error) {
	p := &AgentPool{st: st, clk: clk, cfg: cfg, pins: map[string]string{}, offers: map[string]bool{}, gone: map[string]bool{}}
	for _, o := range offers {
		p.offers[o] = true
	}
	for agent, offer := range pins {
		if err := store.CheckID("machines.agent", agent); err != nil {
			return nil, err
		}
		if !p.offers[offer] {
			return nil, &core.FieldError{Field: "machines[" + agent + "].offer", Value: offer, Allowed: "an offer id of the catalog"}
		}
		p.pins[agent] = offer
	}
	return p, nil
}

// AgentConfig implements AgentConfigurer.
func (p *AgentPool) AgentConfig() AgentConfig { return p.cfg }

// offerOf is the offer an agent's machine is rented out as.
func (p *AgentPool) offerOf(a *store.Agent) string {
	if o, ok := p.pins[a.ID]; ok {
		return o
	}
	return a.OfferID
}

// providerID names the machine of agent a while it serves lease: a new
// name per lease, so a late Release of an old lease cannot free the
// machine from the lease holding it now.
func providerID(agent, lease string) string { return agent + "@" + lease }

func splitProviderID(pid string) (agent, lease string, ok bool) {
	i := strings.LastIndexByte(pid, '@')
	if i <= 0 || i == len(pid)-1 {
		return "", "", false
	}
	return pid[:i], pid[i+1:], true
}

func (p *AgentPool) agents(ctx context.Context) ([]store.Agent, error) {
	var out []store.Agent
	f := store.AgentFilter{Limit: store.MaxLimit}
	for {
		page, err := p.st.Agents().ListAgents(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("agent pool: %w", err)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out, nil
		}
		f.Cursor = page.Next
	}
}

func (p *AgentPool) machine(a *store.Agent, mode core.BillingMode) provider.Machine {
	m := provider.Machine{ProviderID: providerID(a.ID, a.LeaseID), ClientToken: a.LeaseID, OfferID: p.offerOf(a), Mode: mode,
		State: provider.Ready, LaunchedAt: a.Joined, ReadyAt: a.Joined}
	if a.State == store.AgentDown {
		m.State, m.EndedAt = provider.Failed, a.StateAt
	}
	return m
}

// Acquire binds a free agent of req.OfferID to the lease named by the
// client token, or returns the agent already bound to it.
func (p *AgentPool) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	if req.ClientToken == "" {
		return provider.Machine{}, errors.New("agent pool: acquire: empty client token")
	}
	as, err := p.agents(ctx)
	if err != nil {
		return provider.Machine{}, err
	}
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range as {
		if as[i].LeaseID == req.ClientToken && p.mine(&as[i]) {
			m := p.machine(&as[i], req.Mode)
			m.LaunchedAt, m.ReadyAt = now, now
			return m, nil
		}
	}
	free := 0
	for i := range as {
		a := &as[i]
		if a.LeaseID != "" || a.State != store.AgentOK || p.gone[a.ID] || p.offerOf(a) != req.OfferID {
			continue
		}
		free++
		if err := p.st.Agents().BindAgent(ctx, a.ID, req.ClientToken); err != nil {
			return provider.Machine{}, fmt.Errorf("agent pool: acquire %s for %s: %w", req.OfferID, req.ClientToken, err)
		}
		a.LeaseID = req.ClientToken
		m := p.machine(a, req.Mode)
		m.LaunchedAt, m.ReadyAt = now, now
		return m, nil
	}
	return provider.Machine{}, fmt.Errorf("agent pool: acquire %s: no free machine of it has an agent that is up (%d agents joined): %w", req.OfferID, len(as), provider.ErrCapacity)
}

// Release frees the agent bound to the machine's lease; releasing a
// machine already released is fine.
func (p *AgentPool) Release(ctx context.Context, pid string) error {
	agent, lease, ok := splitProviderID(pid)
	if !ok {
		return fmt.Errorf("agent pool: release %q: %w", pid, provider.ErrUnknownMachine)
	}
	a, err := p.st.Agents().GetAgent(ctx, agent)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("agent pool: release %q: %w", pid, provider.ErrUnknownMachine)
	}
	if err != nil {
		return fmt.Errorf("agent pool: release %q: %w", pid, err)
	}
	if a.LeaseID != lease {
		return nil // released before, or bound anew since
	}
	if err := p.st.Agents().BindAgent(ctx, agent, ""); err != nil {
		return fmt.Errorf("agent pool: release %q: %w", pid, err)
	}
	return nil
}

// List returns the machines bound to leases.
func (p *AgentPool) List(ctx context.Context) ([]provider.Machine, error) {
	as, err := p.agents(ctx)
	if err != nil {
		return nil, err
	}
	out := []provider.Machine{}
	for i := range as {
		if as[i].LeaseID != "" && p.mine(&as[i]) {
			out = append(out, p.machine(&as[i], core.OnDemand))
		}
	}
	return out, nil
}

// mine reports whether the pool's machine is the one a bound agent runs
// on: any bound agent's, alone; beside another provider, only those
// bound to joined leases.
func (p *AgentPool) mine(a *store.Agent) bool {
	return !p.shared || engine.IsJoinedLease(a.LeaseID)
}

// Machines counts the machines of each catalog offer the pool has, free
// or not, up or not (a down agent may return): its joined agents and the
// machines its file pins that have not joined yet. A job none of them can
// run would wait forever: the API refuses it at submit, the loop says so.
func (p *AgentPool) Machines(ctx context.Context) (map[string]int, error) {
	as, err := p.agents(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	seen := map[string]bool{}
	for i := range as {
		a := &as[i]
		seen[a.ID] = true
		if a.LeaseID != "" && !p.mine(a) {
			continue // a rented machine's agent (hosted, --lease)
		}
		if o := p.offerOf(a); p.offers[o] {
			out[o]++
		}
	}
	for agent, o := range p.pins {
		if !seen[agent] {
			out[o]++
		}
	}
	return out, nil
}

// Free counts, per offer, the machines the pool could hand out now: the
// agents that are up, bound to no lease, not reclaimed, and of an offer
// of the catalog. An agent of no offer (it joined without --offer, and
// no pin names it) is not among them: nothing says what it is.
func (p *AgentPool) Free(ctx context.Context) (map[string]int, error) {
	as, err := p.agents(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for i := range as {
		a := &as[i]
		if o := p.offerOf(a); a.LeaseID == "" && a.State == store.AgentOK && !p.gone[a.ID] && p.offers[o] {
			out[o]++
		}
	}
	return out, nil
}

// Poll returns the reclaim events due by now.
func (p *AgentPool) Poll(_ context.Context, now time.Time) ([]provider.Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.SortStableFunc(p.events, func(a, b provider.Event) int { return a.At.Compare(b.At) })
	i := 0
	for i < len(p.events) && !p.events[i].At.After(now) {
		i++
	}
	out := slices.Clone(p.events[:i])
	p.events = slices.Delete(p.events, 0, i)
	for _, e := range out {
		if e.Machine.State == provider.Reclaimed {
			if agent, _, ok := splitProviderID(e.Machine.ProviderID); ok {
				p.gone[agent] = true
			}
		}
	}
	return out, nil
}

// Reclaim gives the machine of agent a reclaim notice now: the loop
// checkpoints its jobs, and after notice the machine is taken (its
// jobs' units requeued) and not handed out again until the agent
// rejoins after a restart of the server.
func (p *AgentPool) Reclaim(ctx context.Context, agent string, notice time.Duration) error {
	a, err := p.st.Agents().GetAgent(ctx, agent)
	if err != nil {
		return fmt.Errorf("agent pool: reclaim: %w", err)
	}
	if a.LeaseID == "" {
		return fmt.Errorf("agent pool: reclaim %s: %w", agent, &core.FieldError{Field: "agent", Value: agent, Allowed: "an agent whose machine is leased"})
	}
	now := p.clk.Now()
	m := p.machine(&a, core.Spot)
	m.State, m.ReclaimAt = provider.Reclaiming, now.Add(notice)
	gone := m
	gone.State, gone.EndedAt = provider.Reclaimed, now.Add(notice)
	p.mu.Lock()
	p.events = append(p.events, provider.Event{At: now, Machine: m}, provider.Event{At: now.Add(notice), Machine: gone})
	p.mu.Unlock()
	return nil
}
