package hosted

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
)

func offers() []core.Offer {
	return []core.Offer{{ID: "sim/r/t4x2", Provider: "sim", Region: "r", InstanceType: "t4x2", GPUModel: "T4", GPUMemMiB: 15360, GPUs: 2,
		VCPUs: 8, MemoryMiB: 65536, Currency: "USD", Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 1_000_000, Per: core.Hour, Granularity: 3600}}}}
}

// hellos is a server that records the agents' joins (their heartbeats:
// agent id, lease, GPUs) and answers nothing else.
type hellos struct {
	mu     sync.Mutex
	agents []string
	// bearer is the token each agent last sent.
	bearer map[string]string
}

func (h *hellos) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var hb link.Heartbeat
	if r.URL.Path == "/api/v1/agent/heartbeat" && json.NewDecoder(r.Body).Decode(&hb) == nil {
		h.mu.Lock()
		if a := fmt.Sprintf("%s lease %s %d GPUs", hb.Agent, hb.LeaseID, len(hb.GPUs)); !slices.Contains(h.agents, a) {
			h.agents = append(h.agents, a)
		}
		if h.bearer == nil {
			h.bearer = map[string]string{}
		}
		h.bearer[hb.Agent] = r.Header.Get("Authorization")
		h.mu.Unlock()
	}
	http.Error(w, "not here", http.StatusServiceUnavailable)
}

func (h *hellos) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.agents)
}

// TestAgentFollowsItsMachine: a machine that is ready has an agent,
// which calls the server as "agent-<machine>"; its release stops the
// agent and removes its files; Close stops the rest.
func TestAgentFollowsItsMachine(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cloud, err := sim.New(sim.Config{Offers: offers(), Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	h := &hellos{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	dir := t.TempDir()
	p, err := New(cloud, Config{Offers: offers(), ServerURL: srv.URL, Token: "gpf_x", Dir: dir, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	m1, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "sim/r/t4x2", Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	if m1.State == provider.Ready || len(p.Running()) != 0 {
		t.Fatalf("an agent before the machine is ready: %+v, %v", m1, p.Running())
	}
	m2, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "sim/r/t4x2", Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := p.Poll(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := p.Running(); len(got) != 2 {
		t.Fatalf("running agents %v, want both machines'", got)
	}
	want := []string{"agent-" + m1.ProviderID + " lease L1 2 GPUs", "agent-" + m2.ProviderID + " lease L2 2 GPUs"}
	deadline := time.Now().Add(20 * time.Second)
	for !(slices.Contains(h.seen(), want[0]) && slices.Contains(h.seen(), want[1])) {
		if time.Now().After(deadline) {
			t.Fatalf("agents heard from: %v, want %v", h.seen(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, m1.ProviderID)); err != nil {
		t.Errorf("agent's data directory: %v", err)
	}
	if err := p.Release(ctx, m1.ProviderID); err != nil {
		t.Fatal(err)
	}
	if got := p.Running(); !slices.Equal(got, []string{m2.ProviderID}) {
		t.Errorf("running after the release of %s: %v", m1.ProviderID, got)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, m1.ProviderID)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the released machine's agent files are still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Close()
	if got := p.Running(); len(got) != 0 {
		t.Errorf("running after Close: %v", got)
	}
	// A machine ready after Close gets no agent.
	if _, err := p.List(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Running(); len(got) != 0 {
		t.Errorf("an agent started after Close: %v", got)
	}
}

func TestNewRefusesMissingConfig(t *testing.T) {
	cloud, err := sim.New(sim.Config{Offers: offers(), Source: rand.NewPCG(1, 2), Clock: clock.Real{}})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"no url":   {Token: "t", Dir: "d"},
		"no token": {ServerURL: "http://x", Dir: "d"},
		"no dir":   {ServerURL: "http://x", Token: "t"},
	} {
		if _, err := New(cloud, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(nil, Config{ServerURL: "http://x", Token: "t", Dir: "d"}); err == nil {
		t.Error("no provider: no error")
	}
}

// TestAgentJoinsWithBootstrap: with no shared token, each machine's agent
// joins the server its Acquire's bootstrap names with that lease's join
// token (a retry's token replaces the first while the machine boots); a
// machine acquired with no bootstrap gets no agent.
func TestAgentJoinsWithBootstrap(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cloud, err := sim.New(sim.Config{Offers: offers(), Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	h := &hellos{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	p, err := New(cloud, Config{Offers: offers(), Dir: t.TempDir(), Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	boot := func(tok string) provider.Bootstrap {
		return provider.Bootstrap{ServerURL: srv.URL, LeaseID: "L1", JoinToken: tok, Expires: clk.Now().Add(time.Hour)}
	}
	m1, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "sim/r/t4x2", Mode: core.OnDemand, Bootstrap: boot("gpf_join_1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "sim/r/t4x2", Mode: core.OnDemand, Bootstrap: boot("gpf_join_2")}); err != nil {
		t.Fatal(err)
	}
	m2, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "sim/r/t4x2", Mode: core.OnDemand})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := p.Poll(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := p.Running(); len(got) != 1 || got[0] != m1.ProviderID {
		t.Fatalf("running agents %v, want %s's only (%s had no bootstrap)", got, m1.ProviderID, m2.ProviderID)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		got := h.bearer["agent-"+m1.ProviderID]
		h.mu.Unlock()
		if got == "Bearer gpf_join_2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent's token %q, want the retry's join token", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
