package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var addr, catalogPath string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gpufleet server (API, metrics) on embedded defaults",
		Long: `Run the gpufleet server: the REST API under /api/v1 (offers, quotes), its OpenAPI
document at /api/v1/openapi.json, Prometheus metrics at /metrics and health at /healthz.
With no flags it serves the embedded demo catalog on 127.0.0.1:8080.

The job queue, the control loop, the store and the dashboard arrive with their
issues; this server is their home.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadCatalog(catalogPath)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			srv := api.New(c, clock.Real{}, log).HTTPServer(addr)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			log.Info("gpufleet serving", "addr", "http://"+ln.Addr().String(), "offers", len(c.Offers), "currency", c.Currency)
			return serveUntilDone(cmd.Context(), srv, ln, log)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().StringVar(&catalogPath, "catalog", "", "catalog file (.yaml or .csv); the embedded demo catalog if empty")
	return cmd
}

// serveUntilDone serves on ln until ctx ends, then shuts down gracefully.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
