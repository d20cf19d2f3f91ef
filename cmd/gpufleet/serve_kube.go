package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/kube"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// attachKube adds the Kubernetes mode to serve: with --kubernetes the
// command schedules the GPU pods of a cluster (schedulerName gpufleet)
// on its GPU nodes instead of running the API and the rented fleet
// (docs/kubernetes.md).
func attachKube(cmd *cobra.Command) {
	var on bool
	var kubeconfig, schedulerName string
	var teams []string
	cmd.Flags().BoolVar(&on, "kubernetes", false, "schedule the GPU pods of a Kubernetes cluster (schedulerName gpufleet) on its GPU nodes, as a secondary scheduler (docs/kubernetes.md)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "with --kubernetes: the kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)")
	cmd.Flags().StringVar(&schedulerName, "scheduler-name", kube.SchedulerName, "with --kubernetes: the spec.schedulerName of the pods gpufleet schedules")
	cmd.Flags().StringSliceVar(&teams, "kube-team", nil, "with --kubernetes: NAMESPACE=TEAM, the team of a namespace's pods (repeatable; over the policy file's kubernetes.teams; a namespace named in neither is its own team)")
	// client-go's defaults (5 requests/s, bursts of 10) held gpufleet to
	// 5 bindings a second on the test cluster (docs/kubernetes.md);
	// kube-scheduler's are 50 for its bindings with events on a client
	// of their own, and gpufleet's one client binds and records events,
	// so it gets twice that.
	cmd.Flags().Float32("kube-api-qps", 100, "with --kubernetes: requests per second to the apiserver (client-side limit)")
	cmd.Flags().Int("kube-api-burst", 200, "with --kubernetes: requests allowed at once above --kube-api-qps")
	cmd.Flags().String("kube-reservation-image", kube.DefaultReservationImage, "with --kubernetes: the image of the reservation pods of shared GPUs (runs `gpufleet kube-reservation`)")
	var pool nodePoolFlags // serve_nodepool.go
	pool.add(cmd)
	var dcgm dcgmFlags // serve_dcgm.go
	dcgm.add(cmd)
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !on {
			for _, f := range slices.Concat([]string{"kubeconfig", "scheduler-name", "kube-team", "kube-api-qps", "kube-api-burst", "kube-reservation-image"}, pool.flags(), dcgm.flags()) {
				if cmd.Flags().Changed(f) {
					return usageError{fmt.Errorf("--%s needs --kubernetes", f)}
				}
			}
			return run(cmd, args)
		}
		if err := pool.check(cmd); err != nil {
			return err
		}
		d, err := dcgm.build(cmd)
		if err != nil {
			return err
		}
		return serveKube(cmd, kubeconfig, schedulerName, teams, &pool, d)
	}
}

func serveKube(cmd *cobra.Command, kubeconfig, schedulerName string, teamFlags []string, pool *nodePoolFlags, dcgm *kube.DCGM) error {
	fl := cmd.Flags()
	str := func(name string) string { v, _ := fl.GetString(name); return v }
	c, err := loadCatalog(str("catalog"))
	if err != nil {
		return err
	}
	pol, err := servePolicy(str("policy"), str("wait-target"))
	if err != nil {
		return err
	}
	teams, err := kubeTeams(pol, teamFlags)
	if err != nil {
		return err
	}
	ecfg, err := pol.Engine(pol.Offers(c.Offers), time.Now())
	if err != nil {
		return fmt.Errorf("serve: policy %s: %w", pol.Source, err)
	}
	logJSON, _ := fl.GetBool("log-json")
	log, err := newLogger(cmd.ErrOrStderr(), logJSON, str("log-level"))
	if err != nil {
		return err
	}
	cfg, from, err := kubeConfig(kubeconfig, "serve")
	if err != nil {
		return err
	}
	if cfg.QPS, cfg.Burst, err = kubeRate(fl); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("serve: kubernetes client: %w", err)
	}
	tick, _ := fl.GetDuration("tick")
	if !fl.Changed("tick") {
		tick = 2 * time.Second
	}
	np, err := pool.build(client, pol.Offers(c.Offers), log)
	if err != nil {
		return err
	}
	s, err := kube.New(kube.Config{Client: client, Options: kube.Options{SchedulerName: schedulerName, Teams: teams, Catalog: c.Offers,
		Quotas: pol.Kubernetes.QuotaTeams(), ReservationImage: str("kube-reservation-image")},
		Engine: ecfg, Tick: tick, Log: log, NodePool: np, DCGM: dcgm})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ctx := cmd.Context()
	addr := str("addr")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.Steps() == 0 {
			http.Error(w, "informers not synced yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health server", "err", err)
		}
	}()
	defer srv.Close()
	log.Info("gpufleet scheduling on kubernetes", "kubeconfig", from, "host", cfg.Host, "scheduler_name", schedulerName,
		"policy", pol.Name, "policy_source", pol.Source, "teams", teamList(teams), "quotas", quotaList(pol.Kubernetes.Quotas), "api_qps", cfg.QPS, "api_burst", cfg.Burst, "dcgm", dcgmText(dcgm), "health", "http://"+ln.Addr().String()+"/healthz", "metrics", "http://"+ln.Addr().String()+"/metrics")
	return s.Run(ctx)
}

// kubeTeams is the namespace-to-team map: the policy file's
// kubernetes.teams, then each --kube-team NAMESPACE=TEAM over it.
func kubeTeams(pol policy.Policy, flags []string) (map[string]string, error) {
	teams := maps.Clone(pol.Kubernetes.Teams)
	if teams == nil {
		teams = map[string]string{}
	}
	for _, t := range flags {
		ns, team, ok := strings.Cut(t, "=")
		if !ok || ns == "" || team == "" {
			return nil, usageError{&core.FieldError{Field: "--kube-team", Value: t, Allowed: "NAMESPACE=TEAM"}}
		}
		teams[ns] = team
	}
	// The flags are held to the file's rules, so that a map is valid
	// wherever it came from.
	if err := (policy.Kubernetes{Teams: teams}).Validate(); err != nil {
		return nil, usageError{fmt.Errorf("--kube-team: %w", err)}
	}
	return teams, nil
}

// teamList is the map as NS=TEAM pairs in namespace order, for the log.
func teamList(teams map[string]string) string {
	var b strings.Builder
	for _, ns := range slices.Sorted(maps.Keys(teams)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(ns + "=" + teams[ns])
	}
	return b.String()
}

// kubeRate is the client's rate limit from --kube-api-qps and
// --kube-api-burst.
func kubeRate(fl *pflag.FlagSet) (float32, int, error) {
	qps, _ := fl.GetFloat32("kube-api-qps")
	burst, _ := fl.GetInt("kube-api-burst")
	if !(qps > 0 && qps <= 100_000) {
		return 0, 0, usageError{&core.FieldError{Field: "--kube-api-qps", Value: fmt.Sprint(qps), Allowed: "requests per second, > 0 and at most 100000"}}
	}
	if burst < 1 || burst > 200_000 {
		return 0, 0, usageError{&core.FieldError{Field: "--kube-api-burst", Value: fmt.Sprint(burst), Allowed: "requests, 1..200000"}}
	}
	return qps, burst, nil
}

// quotaList is the quotas as TEAM:MODEL=GPUS pairs in order, for the log.
func quotaList(q map[string]map[string]int) string {
	var parts []string
	for _, team := range slices.Sorted(maps.Keys(q)) {
		for _, model := range slices.Sorted(maps.Keys(q[team])) {
			parts = append(parts, fmt.Sprintf("%s:%s=%d", team, model, q[team][model]))
		}
	}
	return strings.Join(parts, ",")
}

// kubeConfig is the client configuration from --kubeconfig, else
// $KUBECONFIG, else the pod's service account; from says which. cmd
// names the command in errors.
func kubeConfig(flag, cmd string) (*rest.Config, string, error) {
	rules, from := &clientcmd.ClientConfigLoadingRules{ExplicitPath: flag}, "--kubeconfig "+flag
	if flag == "" {
		// KUBECONFIG may list several files, merged as kubectl does.
		rules, from = &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(os.Getenv("KUBECONFIG"))}, "KUBECONFIG"
	}
	if flag != "" || len(rules.Precedence) > 0 {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("%s: kubeconfig from %s: %w", cmd, from, err)
		}
		return cfg, from, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, "", usageError{fmt.Errorf("%s --kubernetes: no --kubeconfig, no KUBECONFIG, and not in a cluster: %w", cmd, err)}
	}
	return cfg, "in-cluster service account", nil
}
