package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/hosted"
)

// DemoBootDelay is the sim provider's boot delay under serve: with the
// 5 s control-loop tick and the agents' 1 s heartbeat, a job submitted
// to a fresh server runs within 30 s.
const DemoBootDelay = 5 * time.Second

// DemoWaitTargets are the sim provider's wait targets under a preset
// policy: core and regular work rents at once, so that the demo's first
// job does not wait the presets' minutes for a fleet that is not there.
const DemoWaitTargets = "core=0s,regular=0s"

// hostedServer closes the hosted agents and removes their files when
// serve stops.
type hostedServer struct {
	*hosted.Provider
	dir string
	log *slog.Logger
}

// hostAgents wraps the sim provider so that each of its ready machines
// runs an in-process agent, which joins this server with its lease's
// bootstrap (the loop's join token for it, and the server's URL).
func hostAgents(cloud provider.Provider, offers []core.Offer, log *slog.Logger) (*hostedServer, error) {
	dir, err := os.MkdirTemp("", "gpufleet-agents-")
	if err != nil {
		return nil, fmt.Errorf("hosted agents: %w", err)
	}
	p, err := hosted.New(cloud, hosted.Config{Offers: offers, Dir: dir, Log: log.With("component", "hosted-agent")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	log.Info("sim provider machines run hosted agents", "dir", dir)
	return &hostedServer{Provider: p, dir: dir, log: log}, nil
}

// Close stops the agents (their jobs get the checkpoint signal and their
// grace) and removes their files. Their credentials die with their
// leases.
func (h *hostedServer) Close() {
	h.Provider.Close()
	if err := os.RemoveAll(h.dir); err != nil {
		h.log.Warn("hosted agents' files not removed", "dir", h.dir, "err", err)
	}
}
