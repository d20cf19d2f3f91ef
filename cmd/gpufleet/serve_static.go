package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/server"
	"github.com/gpufleet/gpufleet/internal/store"
	"go.yaml.in/yaml/v3"
)

// staticConfig is the static provider's file (--provider-config). Every
// field is optional: with no file, machines join with the offer their
// agents declare (--offer) and the defaults hold.
type staticConfig struct {
	// Machines pins known machines, by agent id, to catalog offers
	// (their prices are the catalog's), whatever the agents declare.
	Machines []struct {
		Agent string `yaml:"agent"`
		Offer string `yaml:"offer"`
	} `yaml:"machines"`
	// SuspectAfter and DownAfter: how long an agent may be silent before
	// it is suspect, then down (its jobs requeued).
	SuspectAfter string `yaml:"suspect_after"`
	DownAfter    string `yaml:"down_after"`
	// CheckpointRoot is storage every machine mounts, for checkpoints
	// that outlive a machine.
	CheckpointRoot string `yaml:"checkpoint_root"`
	// Grace is the time a stopping job has after the checkpoint signal.
	Grace string `yaml:"grace"`
}

// newStaticProvider returns the provider of machines joined by their
// agents, configured by the file at path (none: defaults).
func newStaticProvider(ctx context.Context, path string, c *pricing.Catalog, st store.Store, clk clock.Clock, log *slog.Logger) (provider.Provider, error) {
	var sc staticConfig
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("static provider config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&sc); err != nil {
			return nil, fmt.Errorf("static provider config %s: %w", path, err)
		}
	}
	var cfg server.AgentConfig
	for _, d := range []struct {
		field, v string
		dst      *time.Duration
	}{{"suspect_after", sc.SuspectAfter, &cfg.SuspectAfter}, {"down_after", sc.DownAfter, &cfg.DownAfter}, {"grace", sc.Grace, &cfg.Grace}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("static provider config %s: %w", path, &core.FieldError{Field: d.field, Value: d.v, Allowed: "a positive duration (30s, 2m)"})
		}
		*d.dst = v
	}
	if cfg.SuspectAfter > 0 && cfg.DownAfter > 0 && cfg.DownAfter <= cfg.SuspectAfter {
		return nil, fmt.Errorf("static provider config %s: %w", path, &core.FieldError{Field: "down_after", Value: sc.DownAfter, Allowed: "longer than suspect_after " + sc.SuspectAfter})
	}
	if sc.CheckpointRoot != "" {
		if !filepath.IsAbs(sc.CheckpointRoot) {
			return nil, fmt.Errorf("static provider config %s: %w", path, &core.FieldError{Field: "checkpoint_root", Value: sc.CheckpointRoot, Allowed: "an absolute path every machine mounts"})
		}
		cfg.CheckpointRoot = sc.CheckpointRoot
	}
	pins := map[string]string{}
	for i, m := range sc.Machines {
		if _, dup := pins[m.Agent]; dup {
			return nil, fmt.Errorf("static provider config %s: %w", path, &core.FieldError{Field: fmt.Sprintf("machines[%d].agent", i), Value: m.Agent, Allowed: "each agent once"})
		}
		pins[m.Agent] = m.Offer
	}
	offers := make([]string, len(c.Offers))
	for i := range c.Offers {
		offers[i] = c.Offers[i].ID
	}
	pool, err := server.NewAgentPool(st, clk, offers, pins, cfg)
	if err != nil {
		return nil, fmt.Errorf("static provider config %s: %w", path, err)
	}
	log.Info("static provider: machines join through their agents", "pinned", len(pins), "checkpoint_root", cfg.CheckpointRoot)
	return pool, nil
}

// withJoinedAgents puts an agent pool beside cloud: an agent started by
// hand with a catalog offer and without --lease joins as a machine of
// that offer, which the loop leases for waiting work before it rents
// (server.JoinedProvider). The pool takes the agent defaults.
func withJoinedAgents(cloud provider.Provider, c *pricing.Catalog, st store.Store, clk clock.Clock, log *slog.Logger) (provider.Provider, error) {
	offers := make([]string, len(c.Offers))
	for i := range c.Offers {
		offers[i] = c.Offers[i].ID
	}
	pool, err := server.NewAgentPool(st, clk, offers, nil, server.AgentConfig{})
	if err != nil {
		return nil, err
	}
	log.Info("agents started by hand with --offer join as machines of their offer, leased before renting")
	return server.NewJoinedProvider(cloud, pool)
}
