// Package hosted gives the machines of a provider that has no real ones
// (the sim provider) a real node agent each, inside this process: fake
// GPUs sized to the machine's offer, their load driven by the jobs that
// run on them, and the jobs themselves run as real processes on this
// host. The server then runs every job through the agent protocol, as it
// does on real machines: a job's end is its process's exit, never a
// guess from its estimated duration.
//
// An agent starts when its machine is ready (a Ready event, an Acquire
// that answers ready, or a ready machine in List) and stops when the
// machine is released, reclaimed or failed, or when Close is called. The
// agent joins with the bootstrap its machine's Acquire carried (the
// lease's one-time join token and the server's URL), kept per machine
// until the agent starts, and from then on speaks with the credential
// the join answered with: it is that lease's machine and no other's.
package hosted

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent"
	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// Version is what the hosted agents report in their heartbeats.
const Version = "gpufleet-agent/hosted"

// Config is how the hosted agents reach the server and where they keep
// their files.
type Config struct {
	// Offers size each machine's fake GPUs.
	Offers []core.Offer
	// ServerURL and Token are the server and a shared agent token for
	// the machines whose Acquire carried no bootstrap (a caller that gives
	// none); both empty: such a machine gets no agent.
	ServerURL, Token string
	// Dir holds each agent's data directory (Dir/<provider id>).
	Dir string
	// Interval is the agents' heartbeat, command-fetch and sample period
	// (1 s: the machines are local and a demo should not wait).
	Interval time.Duration
	// Grace and TermGrace are the agents' stop periods (5 s, 2 s).
	Grace, TermGrace time.Duration
	// Log logs the agents' lives; nil discards.
	Log *slog.Logger
}

// Provider is a provider whose ready machines run hosted agents.
type Provider struct {
	provider.Provider
	cfg    Config
	offers map[string]*core.Offer

	mu     sync.Mutex
	agents map[string]*hosted // by provider id
	// boots are the bootstraps of the machines whose agents have not
	// started, by provider id.
	boots  map[string]provider.Bootstrap
	closed bool
	wg     sync.WaitGroup
}

type hosted struct {
	stop context.CancelFunc
	done chan struct{}
}

var _ provider.Provider = (*Provider)(nil)

// New wraps inner.
func New(inner provider.Provider, cfg Config) (*Provider, error) {
	switch {
	case inner == nil:
		return nil, errors.New("hosted: no provider to wrap")
	case (cfg.ServerURL == "") != (cfg.Token == ""):
		return nil, errors.New("hosted: a shared agent token needs the server's URL, and the URL a token")
	case cfg.Dir == "":
		return nil, errors.New("hosted: the agents need a directory for their files")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 5 * time.Second
	}
	if cfg.TermGrace <= 0 {
		cfg.TermGrace = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{Provider: inner, cfg: cfg, offers: map[string]*core.Offer{}, agents: map[string]*hosted{}, boots: map[string]provider.Bootstrap{}}
	for i := range cfg.Offers {
		p.offers[cfg.Offers[i].ID] = &cfg.Offers[i]
	}
	return p, nil
}

// Acquire implements provider.Provider: the machine's bootstrap is kept
// for its agent (a retry's replaces an earlier one while the agent has
// not started); a machine ready at once gets its agent now.
func (p *Provider) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	m, err := p.Provider.Acquire(ctx, req)
	if err == nil {
		if req.Bootstrap.JoinToken != "" {
			p.mu.Lock()
			if p.agents[m.ProviderID] == nil {
				p.boots[m.ProviderID] = req.Bootstrap
			}
			p.mu.Unlock()
		}
		p.follow(m)
	}
	return m, err
}

// Poll implements provider.Provider: agents start and stop with the
// machines' events.
func (p *Provider) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	evs, err := p.Provider.Poll(ctx, now)
	for _, e := range evs {
		p.follow(e.Machine)
	}
	return evs, err
}

// List implements provider.Provider: a ready machine listed without an
// agent (a restart of the loop within this process) gets one.
func (p *Provider) List(ctx context.Context) ([]provider.Machine, error) {
	ms, err := p.Provider.List(ctx)
	for _, m := range ms {
		p.follow(m)
	}
	return ms, err
}

// Release implements provider.Provider: the agent stops with its machine.
func (p *Provider) Release(ctx context.Context, providerID string) error {
	p.stop(providerID)
	return p.Provider.Release(ctx, providerID)
}

// Running lists the provider ids of the machines whose agents run.
func (p *Provider) Running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.agents))
	for id := range p.agents {
		out = append(out, id)
	}
	return out
}

// Close stops every agent (their jobs get the checkpoint signal, then
// their grace) and waits for them.
func (p *Provider) Close() {
	p.mu.Lock()
	p.closed = true
	for id, h := range p.agents {
		h.stop()
		delete(p.agents, id)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// follow starts or stops m's agent as its state asks.
func (p *Provider) follow(m provider.Machine) {
	switch m.State {
	case provider.Ready, provider.Reclaiming:
		p.start(m)
	case provider.Released, provider.Reclaimed, provider.Failed:
		p.stop(m.ProviderID)
	}
}

func (p *Provider) start(m provider.Machine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.agents[m.ProviderID] != nil {
		return
	}
	log := p.cfg.Log.With("machine", m.ProviderID, "lease", m.ClientToken)
	url, token := p.cfg.ServerURL, p.cfg.Token
	if b, ok := p.boots[m.ProviderID]; ok {
		url, token = b.ServerURL, b.JoinToken
	}
	if token == "" {
		log.Error("hosted agent not started: its machine's Acquire carried no bootstrap and there is no shared token")
		return
	}
	delete(p.boots, m.ProviderID)
	board := gpu.DefaultBoard
	if o := p.offers[m.OfferID]; o != nil {
		board = gpu.Board{Count: o.GPUs, Model: o.GPUModel, MemMiB: o.GPUMemMiB}
	}
	dir := filepath.Join(p.cfg.Dir, m.ProviderID)
	epoch, err := agent.SpoolEpoch(dir)
	if err != nil {
		log.Error("hosted agent not started: its data directory", "dir", dir, "err", err)
		return
	}
	id := "agent-" + m.ProviderID
	cfg := agent.Config{
		AgentID: id, LeaseID: m.ClientToken, OfferID: m.OfferID, Version: Version, DataDir: dir,
		GPUSource: "fake", GPU: gpu.Options{FakeBoard: board},
		Uplink:         &link.HTTP{URL: url, Token: token, Agent: id, Epoch: epoch},
		SampleInterval: p.cfg.Interval, HeartbeatInterval: p.cfg.Interval,
		BackoffBase: p.cfg.Interval, BackoffMax: 10 * p.cfg.Interval,
		Grace: p.cfg.Grace, TermGrace: p.cfg.TermGrace,
		Logger: log, DieWithParent: true,
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hosted{stop: cancel, done: make(chan struct{})}
	p.agents[m.ProviderID] = h
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(h.done)
		log.Info("hosted agent starting", "agent", id, "offer", m.OfferID, "gpus", board.Count)
		if err := agent.Run(ctx, cfg); err != nil {
			log.Error("hosted agent stopped", "agent", id, "err", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("hosted agent's files not removed", "dir", dir, "err", err)
		}
	}()
}

func (p *Provider) stop(providerID string) {
	p.mu.Lock()
	h := p.agents[providerID]
	delete(p.agents, providerID)
	delete(p.boots, providerID)
	p.mu.Unlock()
	if h != nil {
		h.stop()
	}
}

// String names the wrapper in logs.
func (p *Provider) String() string { return fmt.Sprintf("hosted agents on %T", p.Provider) }
