package main

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent"
	"github.com/gpufleet/gpufleet/internal/core"
)

// imdsProbe bounds --imds auto's look for the instance metadata service.
const imdsProbe = time.Second

// spotNotices is the agent's --imds: "off" reads no spot notice; "auto"
// reads EC2's (IMDSv2 spot/instance-action) when the metadata service
// answers within a second, that is on an EC2 instance, and nothing
// elsewhere; a URL reads the metadata service there (a test's).
func spotNotices(ctx context.Context, mode string, log *slog.Logger) (agent.SpotNotices, error) {
	switch mode {
	case "off", "":
		return nil, nil
	case "auto":
		m := agent.NewIMDS("")
		if err := m.Probe(ctx, imdsProbe); err != nil {
			log.Debug("no instance metadata service: spot notices not read", "err", err)
			return nil, nil
		}
		log.Info("on EC2: reading spot interruption notices from the instance metadata (IMDSv2)")
		return m, nil
	}
	u, err := url.Parse(mode)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{&core.FieldError{Field: "imds", Value: mode, Allowed: "auto, off or the metadata service's http:// URL"}}
	}
	log.Info("reading spot interruption notices from the instance metadata", "imds", mode)
	return agent.NewIMDS(mode), nil
}
