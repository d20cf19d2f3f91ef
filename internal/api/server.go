package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// Server serves the API over a catalog.
type Server struct {
	catalog  *pricing.Catalog
	clock    clock.Clock
	log      *slog.Logger
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	mux      *http.ServeMux

	store       store.Store
	capacity    fleet.Capacity
	machines    func(ctx context.Context) (map[string]int, error)
	limiter     *limiter
	anonLimiter *limiter
	submitted   prometheus.Counter
	collectors  []prometheus.Collector
	readiness   []Readiness
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

// WithRateLimit sets the per-token rate limit (DefaultRateLimit otherwise;
// a zero Rate disables it).
func WithRateLimit(rl RateLimit) Option { return func(s *Server) { s.limiter = newLimiter(rl) } }

// WithAnonymousRateLimit sets the per-address rate limit of the routes
// that need no token (DefaultAnonymousRateLimit otherwise; a zero Rate
// disables it). The probes /healthz and /readyz are never limited.
func WithAnonymousRateLimit(rl RateLimit) Option {
	return func(s *Server) { s.anonLimiter = newLimiter(rl) }
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
		limiter: newLimiter(DefaultRateLimit), anonLimiter: newLimiter(DefaultAnonymousRateLimit), policy: policy.Default()}
	for _, o := range opts {
		o(s)
	}
	s.submitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "gpufleet_jobs_submitted_total", Help: "Jobs accepted through the API (replays not counted)."})
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpufleet_http_requests_total", Help: "HTTP requests by route and status code.",
	}, []string{"route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gpufleet_http_request_duration_seconds", Help: "HTTP request latency by route.", Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	offers := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_catalog_offers", Help: "Offers in the loaded catalog."})
	offers.Set(float64(len(c.Offers)))
	s.registry.MustRegister(s.requests, s.latency, offers, s.submitted, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.registry.MustRegister(s.collectors...)
	for _, r := range s.routes() {
		h := r.handler
		if takesBody(r.pattern) {
			h = requireJSON(h)
		}
		switch {
		case r.roles != nil:
			h = s.authenticate(r.roles, h)
		case !isProbe(r.pattern):
			h = s.limitAnonymous(h)
		}
		s.mux.Handle(r.pattern, s.instrument(r.pattern, h))
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	s.mountUI(s.mux)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
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

type route struct {
	pattern string
	summary string
	handler http.HandlerFunc
	// roles may use the route; nil for a public route (no token).
	roles []store.Role
}

func (s *Server) routes() []route {
	base := []route{
		{"GET /healthz", "Liveness: 200 while the server runs.", s.health, nil},
		{"GET /readyz", "Readiness: 200 when the store answers and the control loop works (a replica that leads ticks without failing; one that follows is ready), 503 otherwise. The body and the Gpufleet-Replica and Gpufleet-Leader headers name this replica, whether it leads, and the leader.", s.ready, nil},
		{"GET /api/v1/openapi.json", "This API's OpenAPI 3 document.", s.openapi, nil},
		{"GET /api/v1/offers", "List the catalog's offers, filtered by gpu and region.", s.listOffers, nil},
		{"GET /api/v1/offers/{id...}", "One offer by id (provider/region/instance_type).", s.getOffer, nil},
		{"POST /api/v1/quote", "Price count machines of an offer in a mode over [start, end).", s.quote, nil},
		{"POST /api/v1/teams", "Create a team (admin).", s.createTeam, adminOnly},
		{"GET /api/v1/teams", "List the teams (admin).", s.listTeams, adminOnly},
		{"POST /api/v1/tokens", "Create a token, creating its user if new; the secret is in this response only (admin, or team-admin for its team).", s.createToken, managers},
		{"POST /api/v1/jobs", "Submit a job. The server names a team token's job (job- and 16 hex digits; only an admin sets id) and a team token submits as its own user. An Idempotency-Key header makes retries safe (201 new, 200 replay, 409 a different body); a job no offer can ever run is a 422 naming the field.", s.submitJob, writers},
		{"GET /api/v1/jobs", "List jobs, newest first, filtered by team, state (comma-separated) and tier; cursor pagination.", s.listJobs, readers},
		{"GET /api/v1/jobs/{id}", "One job; another team's job is a 404.", s.getJob, readers},
		{"POST /api/v1/jobs/{id}/cancel", "Cancel a job; the control loop stops its units.", s.cancelJob, writers},
		{"GET /api/v1/leases", "List leases, newest first, filtered by state; cursor pagination.", s.listLeases, readers},
		{"GET /api/v1/tokens", "List tokens (never their secrets: id, prefix, owner, role, times), filtered by team, user and active (admin; team-admin for its team).", s.listTokens, managers},
		{"POST /api/v1/tokens/{id}/revoke", "Revoke a token; it is refused (401) from the next request on. Another team's token is a 404.", s.revokeToken, managers},
		{"GET /api/v1/events", "The audit trail of decisions and admin actions, filtered by subject, kind, team and [from, to); a team role sees its own team's events only.", s.listEvents, readers},
		{"GET /api/v1/alerts", "Alerts (idle or zombie GPUs, budgets), newest first, filtered by team, kind, lease and open; a team role sees its own team's only; cursor pagination.", s.listAlerts, readers},
		{"POST /api/v1/alerts/{id}/ack", "Acknowledge an alert (it stays open until its condition ends). Another team's alert is a 404.", s.ackAlert, writers},
		{"GET /api/v1/reports/usage", "Cost and utilization per team over [from, to) (default: this month so far): cost, allocated, sampled and busy GPU-hours; admins also get the bill, paid GPU-hours and the idle line.", s.usageReport, readers},
	}
	// Routes of other areas live with their handlers, one file each.
	base = append(base, s.agentRoutes()...)
	base = append(base, s.auditRoutes()...)
	base = append(base, s.uiRoutes()...)
	base = append(base, s.policyRoutes()...)
	return base
}

// isProbe reports whether pattern is a liveness or readiness probe, which
// an orchestrator must reach however busy the address it probes from is.
func isProbe(pattern string) bool { return pattern == "GET /healthz" || pattern == "GET /readyz" }

// takesBody reports whether pattern's method carries a request body.
func takesBody(pattern string) bool {
	method, _, _ := strings.Cut(pattern, " ")
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// requireJSON wraps h, a route whose body is JSON: a request that carries
// a body, or names its type, must name application/json (415 otherwise).
// A page of another origin can post only a form (urlencoded, multipart,
// text/plain) or an untyped body without asking the server first (a CORS
// preflight, which this API never grants), so it cannot send the API a
// request it acts on. A bodiless POST (cancel, ack, revoke) may leave
// the type out: it carries nothing, and those routes need a bearer token,
// which such a page cannot attach.
func requireJSON(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if ct == "" && r.ContentLength == 0 {
			h(w, r)
			return
		}
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			got := fmt.Sprintf("Content-Type %q", ct)
			if ct == "" {
				got = "no Content-Type"
			}
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type",
				got+": want application/json; a request body is JSON")
			return
		}
		h(w, r)
	}
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader records the status code for the metrics.
func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

// instrument wraps a route's handler: the body bound, the metrics, and
// one debug log line per request naming the route, the path, the status
// and the token that authenticated it by its id. The line never carries
// the query, the headers or the body: a secret travels in those (the
// bearer token, a token's creation reply), never in a path.
func (s *Server) instrument(name string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		who := &Principal{}
		h(sw, r.WithContext(context.WithValue(r.Context(), principalSlotKey{}, who)))
		elapsed := time.Since(start)
		s.requests.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
		s.latency.WithLabelValues(name).Observe(elapsed.Seconds())
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.LogAttrs(r.Context(), slog.LevelDebug, "api: request", slog.String("route", name), slog.String("path", r.URL.Path),
				slog.Int("status", sw.code), slog.Duration("took", elapsed), slog.String("token", who.TokenID), slog.String("role", string(who.Role)))
		}
	})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "time": s.clock.Now().UTC()})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.store != nil {
		if _, err := s.store.Loop().LoadLoop(r.Context()); err != nil {
			s.log.Warn("not ready: store", "err", err)
			writeError(w, http.StatusServiceUnavailable, "unavailable", "", "the store does not answer")
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
			writeError(w, http.StatusServiceUnavailable, "unavailable", "", "the control loop is not making progress (the server log says why)")
			return
		}
	}
	writeJSON(w, http.StatusOK, view)
}

func (s *Server) listOffers(w http.ResponseWriter, r *http.Request) {
	out := []OfferView{}
	for _, o := range s.catalog.Filter(r.URL.Query().Get("gpu"), r.URL.Query().Get("region")) {
		out = append(out, NewOfferView(&o))
	}
	writeJSON(w, http.StatusOK, map[string]any{"offers": out, "currency": s.catalog.Currency})
}

func (s *Server) getOffer(w http.ResponseWriter, r *http.Request) {
	o, err := s.catalog.Offer(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", "id", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, NewOfferView(o))
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
	if !decode(w, r, &req) {
		return
	}
	q, err := Quote(s.catalog, req)
	if err != nil {
		writeValidation(w, err)
		return
	}
	writeJSON(w, http.StatusOK, NewQuoteView(q))
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

// decode reads a JSON body strictly: unknown fields, a key given twice
// in one object, anything after the value, and a body over MaxBodyBytes
// are errors. encoding/json keeps the last of two equal keys (and matches
// keys without regard to case), so {"gpus":1,"GPUS":1000} would pass a
// reviewer who reads the first; checkJSON refuses it before decoding.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = checkJSON(body)
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("request body over %d bytes", tooBig.Limit))
		return false
	}
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		writeError(w, http.StatusBadRequest, "invalid_json", dup.path, err.Error())
		return false
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		writeError(w, http.StatusBadRequest, "invalid_argument", typeErr.Field, fmt.Sprintf("field %s: want %s", typeErr.Field, typeErr.Type))
		return false
	}
	writeError(w, http.StatusBadRequest, "invalid_json", "", "invalid JSON body: "+err.Error())
	return false
}

// duplicateKeyError is a key given twice in one JSON object.
type duplicateKeyError struct {
	path  string // the key's path, e.g. quotas[1].gpu_class
	first string // the first spelling, when it differs in case
}

func (e *duplicateKeyError) Error() string {
	if e.first != "" {
		return fmt.Sprintf("invalid JSON body: key %s given twice (as %q too; keys match without regard to case)", e.path, e.first)
	}
	return fmt.Sprintf("invalid JSON body: key %s given twice", e.path)
}

// checkJSON reports the first key given twice in an object of data (keys
// equal under Unicode case folding, as encoding/json matches them), and
// anything but white space after the first value. Syntax errors are left
// to the decoder, which reports them with their offset.
func checkJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := checkValue(dec, ""); err != nil {
		if errors.Is(err, errSyntax) {
			return nil
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// errSyntax stops checkJSON at malformed JSON (or an empty body), which
// the decoder then reports with its offset.
var errSyntax = errors.New("json syntax")

// checkValue reads one value from dec, checking the keys of its objects;
// path names the value in errors.
func checkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errSyntax
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errSyntax
			}
			key, _ := kt.(string)
			p := key
			if path != "" {
				p = path + "." + key
			}
			fold := foldKey(key)
			if first, ok := seen[fold]; ok {
				e := &duplicateKeyError{path: p}
				if first != key {
					e.first = first
				}
				return e
			}
			seen[fold] = key
			if err := checkValue(dec, p); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return errSyntax
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return errSyntax
		}
	}
	return nil
}

// foldKey maps s to one representative of its case-folding class: each
// rune becomes the smallest rune of its unicode.SimpleFold orbit, so two
// keys that strings.EqualFold matches map to one string.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeValidation(w http.ResponseWriter, err error) {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		writeError(w, http.StatusBadRequest, "invalid_argument", fe.Field, err.Error())
		return
	}
	writeError(w, http.StatusBadRequest, "invalid_argument", "", err.Error())
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Field, b.Error.Message = code, field, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
