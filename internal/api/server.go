package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/agentapi"
	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves the API over a catalog.
type Server struct {
	catalog  *pricing.Catalog
	clock    clock.Clock
	log      *slog.Logger
	registry *prometheus.Registry
	mux      *http.ServeMux
	// agent serves the agent protocol's routes, mounted on mux with the
	// REST API's.
	agent *agentapi.Protocol

	store      store.Store
	capacity   fleet.Capacity
	machines   func(ctx context.Context) (map[string]int, error)
	rateLimit  httpapi.RateLimit
	anonLimit  httpapi.RateLimit
	submitted  prometheus.Counter
	collectors []prometheus.Collector
	readiness  []Readiness
	// policy is the control loop's: GET /api/v1/policy shows it and the
	// overview's idle ladder applies it.
	policy policy.Policy
}

// Readiness is a part of the server that /readyz asks whether it does its
// work: the control loop (server.Loop) is one. A replica that answers
// requests while its loop schedules nothing is not ready.
type Readiness interface {
	// Ready returns nil when ready, else why not. The reason goes to the
	// log, not to the anonymous caller of /readyz.
	Ready() error
}

// Replica is a Readiness that knows which server process it is and which
// one leads the control loop (server.Loop is one): /readyz names both, in
// its body and in the Gpufleet-Replica and Gpufleet-Leader headers.
type Replica interface {
	// Replica returns this process's name, whether it leads, and the
	// leader as last recorded in the store (Term 0: none known).
	Replica() (self string, leading bool, leader store.Leadership)
}

// ReadyView is the body of a 200 from /readyz.
type ReadyView struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
	// Replica names this server process; Leading says whether it runs
	// the control loop. Empty and false without a control loop.
	Replica string `json:"replica,omitempty"`
	Leading bool   `json:"leading"`
	// Leader is the replica that leads, as it recorded itself on taking
	// the lead; absent when none is known.
	Leader *LeaderView `json:"leader,omitempty"`
}

// LeaderView is the control loop's leader: the replica, since when it
// leads, and its term (each takeover's is one more).
type LeaderView struct {
	Replica string    `json:"replica"`
	Since   time.Time `json:"since"`
	Term    int64     `json:"term"`
}

// Option configures New.
type Option func(*Server)

// WithStore serves the /api/v1 teams, tokens, jobs, leases and events
// routes from st. Without a store those routes answer 503.
func WithStore(st store.Store) Option { return func(s *Server) { s.store = st } }

// WithCapacity tells the server how many machines of each offer its
// provider may hold, so that a job larger than that is refused at submit
// (fleet.Feasible) instead of waiting forever. Without it only the
// catalog bounds a job.
func WithCapacity(c fleet.Capacity) Option { return func(s *Server) { s.capacity = c } }

// WithMachines tells the server that its machines are a pool it cannot
// rent more of (the static provider): count says how many machines of
// each offer it has, and a job no offer of the pool can run is refused
// at submit.
func WithMachines(count func(ctx context.Context) (map[string]int, error)) Option {
	return func(s *Server) { s.machines = count }
}

// WithRateLimit sets the per-token rate limit (httpapi.DefaultRateLimit
// otherwise; a zero Rate disables it).
func WithRateLimit(rl httpapi.RateLimit) Option { return func(s *Server) { s.rateLimit = rl } }

// WithAnonymousRateLimit sets the per-address rate limit of the routes
// that need no token (httpapi.DefaultAnonymousRateLimit otherwise; a zero
// Rate disables it). The probes /healthz and /readyz are never limited.
func WithAnonymousRateLimit(rl httpapi.RateLimit) Option {
	return func(s *Server) { s.anonLimit = rl }
}

// WithReadiness makes /readyz answer 503 while r is not ready, besides
// while the store does not answer.
func WithReadiness(r Readiness) Option {
	return func(s *Server) { s.readiness = append(s.readiness, r) }
}

// WithCollectors adds metrics (the control loop's) to /metrics.
func WithCollectors(cs ...prometheus.Collector) Option {
	return func(s *Server) { s.collectors = append(s.collectors, cs...) }
}

// New returns a server for catalog c. Time comes from clk; logs go to log.
func New(c *pricing.Catalog, clk clock.Clock, log *slog.Logger, opts ...Option) *Server {
	s := &Server{catalog: c, clock: clk, log: log, registry: prometheus.NewRegistry(), mux: http.NewServeMux(),
		rateLimit: httpapi.DefaultRateLimit, anonLimit: httpapi.DefaultAnonymousRateLimit, policy: policy.Default()}
	for _, o := range opts {
		o(s)
	}
	s.agent = agentapi.New(s.store, c, clk, log)
	mw := httpapi.NewMiddleware(s.store, clk, log, s.rateLimit, s.anonLimit)
	s.submitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "gpufleet_jobs_submitted_total", Help: "Jobs accepted through the API (replays not counted)."})
	offers := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_catalog_offers", Help: "Offers in the loaded catalog."})
	offers.Set(float64(len(c.Offers)))
	s.registry.MustRegister(mw.Collectors()...)
	s.registry.MustRegister(offers, s.submitted, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.registry.MustRegister(s.collectors...)
	for _, r := range s.routes() {
		mw.Handle(s.mux, r)
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	s.mountUI(s.mux)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, http.StatusNotFound, "not_found", "", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// HTTPServer wraps s in an http.Server with timeouts set.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr: addr, Handler: s,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10,
	}
}

// The role sets the REST API's routes allow (the agent protocol's routes
// take agent tokens only).
var (
	adminOnly = []store.Role{store.RoleAdmin}
	writers   = []store.Role{store.RoleAdmin, store.RoleTeamAdmin, store.RoleMember}
	readers   = []store.Role{store.RoleAdmin, store.RoleTeamAdmin, store.RoleMember, store.RoleViewer}
	managers  = []store.Role{store.RoleAdmin, store.RoleTeamAdmin}
)

// routes are every route the server mounts, the agent protocol's
// included: the OpenAPI document lists them all.
func (s *Server) routes() []httpapi.Route {
	base := []httpapi.Route{
		{Pattern: "GET /healthz", Summary: "Liveness: 200 while the server runs.", Handler: s.health},
		{Pattern: "GET /readyz", Summary: "Readiness: 200 when the store answers and the control loop works (a replica that leads ticks without failing; one that follows is ready), 503 otherwise. The body and the Gpufleet-Replica and Gpufleet-Leader headers name this replica, whether it leads, and the leader.", Handler: s.ready},
		{Pattern: "GET /api/v1/openapi.json", Summary: "This API's OpenAPI 3 document.", Handler: s.openapi},
		{Pattern: "GET /api/v1/offers", Summary: "List the catalog's offers, filtered by gpu and region.", Handler: s.listOffers},
		{Pattern: "GET /api/v1/offers/{id...}", Summary: "One offer by id (provider/region/instance_type).", Handler: s.getOffer},
		{Pattern: "POST /api/v1/quote", Summary: "Price count machines of an offer in a mode over [start, end).", Handler: s.quote},
		{Pattern: "POST /api/v1/teams", Summary: "Create a team (admin).", Handler: s.createTeam, Roles: adminOnly},
		{Pattern: "GET /api/v1/teams", Summary: "List the teams (admin).", Handler: s.listTeams, Roles: adminOnly},
		{Pattern: "POST /api/v1/tokens", Summary: "Create a token, creating its user if new; the secret is in this response only (admin, or team-admin for its team).", Handler: s.createToken, Roles: managers},
		{Pattern: "POST /api/v1/jobs", Summary: "Submit a job. The server names a team token's job (job- and 16 hex digits; only an admin sets id) and a team token submits as its own user. An Idempotency-Key header makes retries safe (201 new, 200 replay, 409 a different body); a job no offer can ever run is a 422 naming the field.", Handler: s.submitJob, Roles: writers},
		{Pattern: "GET /api/v1/jobs", Summary: "List jobs, newest first, filtered by team, state (comma-separated) and tier; cursor pagination.", Handler: s.listJobs, Roles: readers},
		{Pattern: "GET /api/v1/jobs/{id}", Summary: "One job; another team's job is a 404.", Handler: s.getJob, Roles: readers},
		{Pattern: "POST /api/v1/jobs/{id}/cancel", Summary: "Cancel a job; the control loop stops its units.", Handler: s.cancelJob, Roles: writers},
		{Pattern: "GET /api/v1/leases", Summary: "List leases, newest first, filtered by state; cursor pagination.", Handler: s.listLeases, Roles: readers},
		{Pattern: "GET /api/v1/tokens", Summary: "List tokens (never their secrets: id, prefix, owner, role, times), filtered by team, user and active (admin; team-admin for its team).", Handler: s.listTokens, Roles: managers},
		{Pattern: "POST /api/v1/tokens/{id}/revoke", Summary: "Revoke a token; it is refused (401) from the next request on. Another team's token is a 404.", Handler: s.revokeToken, Roles: managers},
		{Pattern: "GET /api/v1/events", Summary: "The audit trail of decisions and admin actions, filtered by subject, kind, team and [from, to); a team role sees its own team's events only.", Handler: s.listEvents, Roles: readers},
		{Pattern: "GET /api/v1/alerts", Summary: "Alerts (idle or zombie GPUs, budgets), newest first, filtered by team, kind, lease and open; a team role sees its own team's only; cursor pagination.", Handler: s.listAlerts, Roles: readers},
		{Pattern: "POST /api/v1/alerts/{id}/ack", Summary: "Acknowledge an alert (it stays open until its condition ends). Another team's alert is a 404.", Handler: s.ackAlert, Roles: writers},
		{Pattern: "GET /api/v1/reports/usage", Summary: "Cost and utilization per team over [from, to) (default: this month so far): cost, allocated, sampled and busy GPU-hours; admins also get the bill, paid GPU-hours and the idle line.", Handler: s.usageReport, Roles: readers},
	}
	// Routes of other areas live with their handlers, one file each.
	base = append(base, s.agent.Routes()...)
	base = append(base, s.nodeRoutes()...)
	base = append(base, s.auditRoutes()...)
	base = append(base, s.uiRoutes()...)
	base = append(base, s.policyRoutes()...)
	return base
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "time": s.clock.Now().UTC()})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.store != nil {
		if _, err := s.store.Loop().LoadLoop(r.Context()); err != nil {
			s.log.Warn("not ready: store", "err", err)
			httpapi.WriteError(w, http.StatusServiceUnavailable, "unavailable", "", "the store does not answer")
			return
		}
	}
	view := ReadyView{Status: "ready", Time: s.clock.Now().UTC()}
	for _, rd := range s.readiness {
		rp, ok := rd.(Replica)
		if !ok {
			continue
		}
		self, leading, leader := rp.Replica()
		view.Replica, view.Leading = self, leading
		w.Header().Set("Gpufleet-Replica", self)
		if leader.Term > 0 {
			view.Leader = &LeaderView{Replica: leader.Replica, Since: leader.Since.UTC(), Term: leader.Term}
			w.Header().Set("Gpufleet-Leader", leader.Replica)
		}
	}
	for _, rd := range s.readiness {
		if err := rd.Ready(); err != nil {
			s.log.Warn("not ready", "err", err)
			httpapi.WriteError(w, http.StatusServiceUnavailable, "unavailable", "", "the control loop is not making progress (the server log says why)")
			return
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, view)
}

func (s *Server) listOffers(w http.ResponseWriter, r *http.Request) {
	out := []OfferView{}
	for _, o := range s.catalog.Filter(r.URL.Query().Get("gpu"), r.URL.Query().Get("region")) {
		out = append(out, NewOfferView(&o))
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"offers": out, "currency": s.catalog.Currency})
}

func (s *Server) getOffer(w http.ResponseWriter, r *http.Request) {
	o, err := s.catalog.Offer(r.PathValue("id"))
	if err != nil {
		httpapi.WriteError(w, http.StatusNotFound, "not_found", "id", err.Error())
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, NewOfferView(o))
}

// QuoteRequest is the body of POST /api/v1/quote.
type QuoteRequest struct {
	Offer string    `json:"offer"`
	Mode  string    `json:"mode"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Count int       `json:"count"`
}

func (s *Server) quote(w http.ResponseWriter, r *http.Request) {
	var req QuoteRequest
	if !httpapi.Decode(w, r, &req) {
		return
	}
	q, err := Quote(s.catalog, req)
	if err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, NewQuoteView(q))
}

// Quote validates req against c and prices it. The CLI's quote command and
// the API share it; billing.QuoteLease bounds the span (MaxQuoteSpan).
func Quote(c *pricing.Catalog, req QuoteRequest) (billing.Quote, error) {
	if req.Count == 0 {
		req.Count = 1
	}
	o, err := c.Offer(req.Offer)
	if err != nil {
		return billing.Quote{}, &core.FieldError{Field: "offer", Value: req.Offer, Allowed: "an offer id from the catalog (" + err.Error() + ")"}
	}
	mode, err := core.ParseBillingMode(req.Mode)
	if err != nil {
		return billing.Quote{}, err
	}
	if req.Start.IsZero() || req.End.IsZero() {
		return billing.Quote{}, &core.FieldError{Field: "start/end", Value: "", Allowed: "both times, RFC 3339"}
	}
	if req.End.Before(req.Start) {
		return billing.Quote{}, &core.FieldError{Field: "end", Value: req.End.Format(time.RFC3339), Allowed: "a time not before start " + req.Start.Format(time.RFC3339)}
	}
	if req.Count < 1 || req.Count > 10000 {
		return billing.Quote{}, &core.FieldError{Field: "count", Value: strconv.Itoa(req.Count), Allowed: "1..10000"}
	}
	return billing.QuoteLease(o, mode, billing.Span{Start: req.Start, End: req.End}, req.Count, c.Vouchers)
}
