package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/ssh"
)

// newSSHProvider returns the SSH fleet provider over the hosts in the
// YAML file at path (docs/providers.md).
//
// The machines' agents join with the acquire's bootstrap; while a
// server hands out none, join mints one agent token, once, at the first
// start that needs it (not revoked at stop: the agents outlive this
// process).
func newSSHProvider(_ context.Context, path string, c *pricing.Catalog, clk clock.Clock, log *slog.Logger, join func() (url, token string, err error)) (provider.Provider, error) {
	if path == "" {
		return nil, &core.FieldError{Field: "--provider-config", Value: "", Allowed: "the ssh provider's YAML file (docs/providers.md)"}
	}
	cfg, err := ssh.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	for i, h := range cfg.Hosts {
		if h.Offer == "" {
			continue
		}
		if _, err := c.Offer(h.Offer); err != nil {
			return nil, fmt.Errorf("ssh provider config %s: %w", path, &core.FieldError{Field: fmt.Sprintf("hosts[%d].offer", i), Value: h.Offer, Allowed: "an offer of the catalog (--catalog)"})
		}
	}
	cfg.Offers, cfg.Clock, cfg.Log = c.Offers, clk, log
	if join != nil {
		var mu sync.Mutex
		var url, token string
		cfg.Join = func() (string, string, error) {
			mu.Lock()
			defer mu.Unlock()
			if token == "" {
				u, t, err := join()
				if err != nil {
					return "", "", err
				}
				url, token = u, t
			}
			return url, token, nil
		}
	}
	p, err := ssh.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh provider %s: %w", path, err)
	}
	log.Info("ssh provider", "config", path, "hosts", len(cfg.Hosts), "state_file", cfg.StateFile)
	return p, nil
}
