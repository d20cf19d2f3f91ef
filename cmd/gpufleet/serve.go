package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/server"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var addr, publicURL, catalogPath, db, providerKind, providerConfig string
	var seed uint64
	var logJSON bool
	var logLevel string
	var tick, simDelay time.Duration
	var waits, policyArg string
	var sqliteSync string
	var rateLimit float64
	var rateBurst int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gpufleet server: API, control loop and sim provider on embedded defaults",
		Long: `Run the gpufleet server: the REST API under /api/v1 (offers, quotes, teams, tokens,
jobs, leases, events), its OpenAPI document at /api/v1/openapi.json, Prometheus
metrics at /metrics, health at /healthz, and the control loop that schedules the
submitted jobs on machines rented from the simulated provider.

With no flags it is a complete working system: the SQLite file gpufleet.db in the
working directory, the sim provider over the embedded demo catalog, the API on
127.0.0.1:8080. On first start (no admin token in the store) it creates an admin
token and prints it once to stderr. --db postgres://... uses PostgreSQL instead;
several servers may share it, one of them runs the loop.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if simDelay < 0 {
				return usageError{&core.FieldError{Field: "--sim-delay", Value: simDelay.String(), Allowed: "a duration >= 0 (0s, 5s, 2m)"}}
			}
			if sqliteSync != "full" && sqliteSync != "normal" {
				return usageError{&core.FieldError{Field: "--sqlite-sync", Value: sqliteSync, Allowed: "full (every acknowledged write on disk) or normal (survives a crash of the process, not of the machine)"}}
			}
			if rateLimit < 0 || rateBurst < 1 {
				return usageError{&core.FieldError{Field: "--rate-limit/--rate-burst", Value: fmt.Sprintf("%g/%d", rateLimit, rateBurst), Allowed: "a rate >= 0 requests/s (0: no limit) and a burst >= 1"}}
			}
			c, err := loadCatalog(catalogPath)
			if err != nil {
				return err
			}
			if providerKind == "sim" && !cmd.Flags().Changed("wait-target") && !isPolicyFile(policyArg) {
				waits = DemoWaitTargets
			}
			pol, err := servePolicy(policyArg, waits)
			if err != nil {
				return err
			}
			if len(pol.Offers(c.Offers)) == 0 {
				return usageError{&core.FieldError{Field: "--policy " + pol.Source + ": billing_modes", Value: fmt.Sprint(pol.BillingModes), Allowed: "modes some offer of the catalog is sold in"}}
			}
			ecfg, err := pol.Engine(pol.Offers(c.Offers), time.Now())
			if err != nil {
				return fmt.Errorf("serve: policy %s: %w", pol.Source, err)
			}
			log, err := newLogger(cmd.ErrOrStderr(), logJSON, logLevel)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer ln.Close()
			st, err := openStore(ctx, db, sqliteSync == "full", log)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer st.Close()
			if s, ok := st.(interface{ Tightened() []string }); ok {
				for _, f := range s.Tightened() {
					log.Warn("store: the database file was readable by others; made it owner-only (0600)", "file", f)
				}
			}
			clk := clock.Real{}
			// The URL the machines' agents join: each lease's bootstrap
			// carries it with the lease's join token.
			if publicURL == "" {
				publicURL = "http://" + ln.Addr().String()
			}
			var cloud provider.Provider
			switch providerKind {
			case "sim":
				cfg := sim.DemoConfig(c.Offers, rand.NewPCG(seed, 0x5eed), clk)
				cfg.Default.Delay = sim.Fixed(simDelay)
				// The simulated machines die with this process while the
				// store keeps their leases: the start time, in ms, names
				// this process's machines apart from the last one's.
				cfg.Incarnation = strconv.FormatInt(clk.Now().UnixMilli(), 36)
				log.Info("sim provider", "seed", seed, "incarnation", cfg.Incarnation)
				cloud, err = sim.New(cfg)
			case "static":
				cloud, err = newStaticProvider(ctx, providerConfig, c, st, clk, log)
			case "exec":
				cloud, err = newExecProvider(ctx, providerConfig, c, clk, log, publicURL)
			case "ssh":
				cloud, err = newSSHProvider(ctx, providerConfig, c, clk, log, func() (string, string, error) {
					_, secret, err := api.MintAgentToken(ctx, st, clk, "ssh provider machines", "serve: the ssh provider's machines join with it")
					return publicURL, secret, err
				})
			case "ec2":
				cloud, err = newEC2Provider(ctx, providerConfig, c, log, func() (string, string, error) {
					_, secret, err := api.MintAgentToken(ctx, st, clk, "ec2 provider machines", "serve: ec2 instances launched without a lease's join token join with it")
					return publicURL, secret, err
				})
			default:
				return usageError{fmt.Errorf("--provider %q: want sim, static, exec, ssh or ec2", providerKind)}
			}
			if err != nil {
				return fmt.Errorf("serve: %s provider: %w", providerKind, err)
			}
			// The sim provider's limit per offer bounds what a job may ask
			// (submissions) and what a waiting job can get (the loop).
			var capacity fleet.Capacity
			if pc, ok := cloud.(interface{ Capacity(offerID string) int }); ok {
				capacity = pc.Capacity
			}
			// The sim provider's machines run hosted agents: every job runs
			// as a real process and ends with its own exit status.
			var agents *hostedServer
			if providerKind == "sim" {
				if agents, err = hostAgents(cloud, c.Offers, log); err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				defer agents.Close()
				cloud = agents
			}
			// Agents started by hand with --offer (no --lease) are machines
			// too, leased before anything is rented (serve_static.go).
			if providerKind != "static" {
				if cloud, err = withJoinedAgents(cloud, c, st, clk, log); err != nil {
					return fmt.Errorf("serve: %w", err)
				}
			}
			// The static pool rents nothing: the engine leases its joined
			// machines only, work waits for one with a reason, and a job no
			// machine of the pool can run is refused at submit.
			var apiOpts []api.Option
			if pool, ok := cloud.(*server.AgentPool); ok {
				ecfg.NoAcquire = true
				apiOpts = append(apiOpts, api.WithMachines(pool.Machines))
			}
			notify, err := policyNotifier(pol, os.Getenv, st, clk, log)
			if err != nil {
				return err
			}
			loop, err := server.NewLoop(server.Config{Store: st, Provider: cloud, Offers: c.Offers, RentOffers: pol.Offers(c.Offers), TimeOfUse: pol.Tariff(c.Offers),
				Engine: ecfg, Clock: clk, Log: log, Tick: tick, Capacity: capacity, Notify: notify, PublicURL: publicURL})
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			// The admin token is shown once: it is made only when nothing
			// left can fail, so a start refused for a bad flag or provider
			// does not store a token nobody saw.
			secret, err := api.EnsureAdminToken(ctx, st, clk)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			if secret != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "admin token (shown once, store it now): %s\n", secret)
			}
			apiOpts = append([]api.Option{api.WithStore(st), api.WithCollectors(loop.Collectors()...), api.WithReadiness(loop), api.WithCapacity(capacity), api.WithPolicy(pol), api.WithRateLimit(httpapi.RateLimit{Rate: rateLimit, Burst: rateBurst})}, apiOpts...)
			srv := api.New(c, clk, log, apiOpts...).HTTPServer(addr)
			log.Info("gpufleet serving", "addr", "http://"+ln.Addr().String(), "offers", len(c.Offers), "currency", c.Currency, "db", redact(db), "policy", pol.Name, "policy_source", pol.Source, "policy_hash", pol.Hash())
			lctx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := loop.Run(lctx); err != nil {
					log.Error("control loop", "err", err)
				}
			})
			err = serveUntilDone(ctx, srv, ln, log)
			stop()
			wg.Wait()
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().StringVar(&publicURL, "public-url", "", "the URL rented machines' agents reach this server at (default: http:// and the listen address)")
	cmd.Flags().StringVar(&catalogPath, "catalog", "", "catalog file (.yaml or .csv); the embedded demo catalog if empty")
	cmd.Flags().StringVar(&db, "db", "gpufleet.db", "store: a SQLite file path, or a postgres:// URL")
	cmd.Flags().StringVar(&providerKind, "provider", "sim", "where machines come from: sim (simulated cloud over the catalog), static (machines joined by their agents), exec (user scripts), ssh (hosts reached by SSH), ec2 (AWS EC2 instances)")
	cmd.Flags().StringVar(&providerConfig, "provider-config", "", "the static, exec, ssh or ec2 provider's configuration file (docs/providers.md)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the sim provider's randomness (provisioning delays, failures, reclaims)")
	cmd.Flags().DurationVar(&simDelay, "sim-delay", DemoBootDelay, "the sim provider's provisioning delay, the same for every machine (short by default: a demo job runs within 30 s)")
	cmd.Flags().StringVar(&sqliteSync, "sqlite-sync", "full", "a SQLite store's synchronous mode: full (a write is on disk before the API acknowledges it) or normal (faster; a crash of the machine may lose the last commits)")
	cmd.Flags().Float64Var(&rateLimit, "rate-limit", httpapi.DefaultRateLimit.Rate, "requests a second each token may make (429 with Retry-After beyond it); 0 for no limit")
	cmd.Flags().IntVar(&rateBurst, "rate-burst", httpapi.DefaultRateLimit.Burst, "requests each token may make at once before --rate-limit applies")
	cmd.Flags().BoolVar(&logJSON, "log-json", false, "log as JSON lines instead of text")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "the least level logged: debug (adds a line per API request), info, warn or error")
	cmd.Flags().DurationVar(&tick, "tick", server.DefaultTick, "control loop period")
	cmd.Flags().StringVar(&policyArg, "policy", policy.DefaultName, "the policy the control loop runs: a preset (gpufleet, reactive, autostop) or a policy file (.yaml, docs/policy.md); GET /api/v1/policy shows it")
	cmd.Flags().StringVar(&waits, "wait-target", "", "override the policy's wait targets: how long pending work of a tier may wait for the current fleet before more is rented, e.g. core=0s,regular=5m (unset tiers keep the policy's: by default core 1m, regular 10m, offline 1h; the sim provider's demo, with a preset policy, uses "+DemoWaitTargets+")")
	attachKube(cmd) // serve --kubernetes (serve_kube.go)
	return cmd
}

// newLogger returns the text (or JSON) logger on w at level (debug,
// info, warn or error).
func newLogger(w io.Writer, asJSON bool, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil || strings.ContainsAny(level, "+-") {
		return nil, usageError{&core.FieldError{Field: "log-level", Value: level, Allowed: "debug, info, warn or error"}}
	}
	opts := &slog.HandlerOptions{Level: l}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// redact drops the password from a database URL for logs.
func redact(db string) string {
	if at := strings.LastIndex(db, "@"); at >= 0 {
		if scheme := strings.Index(db, "://"); scheme >= 0 && scheme < at {
			return db[:scheme+3] + "…" + db[at:]
		}
	}
	return db
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

// servePolicy is serve's policy: the --policy preset or file, with
// --wait-target's tiers over its wait targets. A peak-sized base is
// refused: a server does not know its workload before it comes.
func servePolicy(arg, waits string) (policy.Policy, error) {
	var p policy.Policy
	var err error
	switch {
	case isPolicyFile(arg):
		if p, err = loadPolicy(arg); err != nil {
			return policy.Policy{}, err
		}
	case slices.Contains(policy.PresetNames, arg):
		p, _ = policy.Preset(arg)
	default:
		return policy.Policy{}, usageError{&core.FieldError{Field: "--policy", Value: arg, Allowed: "a preset (" + strings.Join(policy.PresetNames, ", ") + ") or a policy file (.yaml)"}}
	}
	if p.Reserved.PeakSized {
		return policy.Policy{}, usageError{&core.FieldError{Field: "--policy " + arg + ": reserved.peak_sized", Value: "true",
			Allowed: "false for serve (a peak-sized base is sized from a workload known in advance: the simulator's; give reserved.gpus instead)"}}
	}
	if p.Spot.Rule == policy.SpotUniformProgress {
		return policy.Policy{}, usageError{&core.FieldError{Field: "--policy " + arg + ": spot.rule", Value: p.Spot.Rule,
			Allowed: "fallback for serve (uniform-progress is a simulator baseline, docs/simulator.md)"}}
	}
	if err := parseWaitTargets(waits, p.WaitTargets); err != nil {
		return policy.Policy{}, usageError{err}
	}
	return p, nil
}

// parseWaitTargets reads --wait-target, comma-separated tier=duration
// pairs, into wait (the policy's targets); empty changes nothing.
func parseWaitTargets(s string, wait map[core.Tier]policy.Duration) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return &core.FieldError{Field: "--wait-target", Value: kv, Allowed: "tier=duration pairs, e.g. core=0s,regular=5m"}
		}
		tier, err := core.ParseTier(strings.TrimSpace(k))
		if err != nil {
			return fmt.Errorf("--wait-target: %w", err)
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return &core.FieldError{Field: "--wait-target " + string(tier), Value: v, Allowed: "a duration >= 0 (30s, 5m, 1h)"}
		}
		wait[tier] = policy.Duration(d)
	}
	return nil
}
