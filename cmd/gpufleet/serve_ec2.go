package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/ec2"
)

// newEC2Provider returns the EC2 provider of the YAML file at path
// (docs/providers.md). Credentials come from the AWS SDK's default chain
// (environment, ~/.aws, the instance's role). Each lease's bootstrap
// (server URL, join token) goes into its instance's user data; a lease
// acquired without one uses the file's server_url and agent_token, or
// else fallback's (serve mints an agent token there, once).
func newEC2Provider(ctx context.Context, path string, c *pricing.Catalog, log *slog.Logger, fallback func() (url, token string, err error)) (provider.Provider, error) {
	cfg, err := ec2.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	cfg.Fallback = fallback
	cfg.Offer = func(id string) (*core.Offer, bool) {
		o, err := c.Offer(id)
		return o, err == nil
	}
	p, err := ec2.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ec2 provider %s: %w", path, err)
	}
	rentable := p.Offers(c.Offers)
	if len(rentable) == 0 {
		return nil, fmt.Errorf("ec2 provider %s: %w", path, &core.FieldError{Field: "catalog", Value: fmt.Sprintf("%d offers", len(c.Offers)),
			Allowed: "AWS offers (provider aws) of region " + cfg.Region + " with an instance type and an AMI (gpufleet catalog import of the AWS price list)"})
	}
	log.Info("ec2 provider", "config", path, "region", cfg.Region, "cluster", cfg.Cluster, "endpoint", cfg.Endpoint,
		"rentable_offers", len(rentable), "catalog_offers", len(c.Offers), "poll_interval", cfg.PollInterval)
	if len(rentable) < len(c.Offers) {
		log.Warn("ec2 provider: the catalog has offers this provider cannot rent (another provider or region, or no AMI); acquiring one fails", "rentable", len(rentable), "catalog", len(c.Offers))
	}
	return p, nil
}
