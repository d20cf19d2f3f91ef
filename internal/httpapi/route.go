package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Route is one route of the server: its pattern (an http.ServeMux
// pattern, METHOD and path, which also names it in the metrics and in
// the OpenAPI document), what it does in one sentence, its handler, and
// the roles whose tokens may call it. Roles nil makes the route public:
// no token, limited by the client's address instead.
type Route struct {
	Pattern string
	Summary string
	Handler http.HandlerFunc
	Roles   []store.Role
}

// Body describes a route's request and response bodies (values of the Go
// types the handler decodes and encodes; nil for none) and the query
// parameters it reads, for the OpenAPI document: the schemas are derived
// from the types, so they cannot drift from what the handler does.
type Body struct {
	Request, Response any
	Params            []string
}

// Middleware is what every route shares, in the order a request meets
// it: the request metrics, the body bound and the debug log line
// (instrument); the token (Authenticate) or, on a public route other
// than a probe, the client address's rate limit (LimitAnonymous); and a
// JSON body (RequireJSON). One Middleware serves the whole server, so
// that a token's rate limit is one bucket across the REST API and the
// agent protocol.
type Middleware struct {
	store     store.Store
	clock     clock.Clock
	log       *slog.Logger
	perToken  *limiter
	anonymous *limiter
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

// NewMiddleware returns the middleware of a server on st (nil: a route
// that needs a token answers 503), with perToken the limit of each token
// and anonymous that of each client address on the public routes (a
// zero Rate disables either). Time comes from clk; logs go to log.
func NewMiddleware(st store.Store, clk clock.Clock, log *slog.Logger, perToken, anonymous RateLimit) *Middleware {
	return &Middleware{
		store: st, clock: clk, log: log, perToken: newLimiter(perToken), anonymous: newLimiter(anonymous),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpufleet_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gpufleet_http_request_duration_seconds", Help: "HTTP request latency by route.", Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
}

// Collectors are the request metrics, for the server's registry.
func (m *Middleware) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.latency}
}

// Handle mounts rt on mux wrapped in the middleware.
func (m *Middleware) Handle(mux *http.ServeMux, rt Route) {
	h := rt.Handler
	if TakesBody(rt.Pattern) {
		h = RequireJSON(h)
	}
	switch {
	case rt.Roles != nil:
		h = m.Authenticate(rt.Roles, h)
	case !IsProbe(rt.Pattern):
		h = m.LimitAnonymous(h)
	}
	mux.Handle(rt.Pattern, m.instrument(rt.Pattern, h))
}

// IsProbe reports whether pattern is a liveness or readiness probe, which
// an orchestrator must reach however busy the address it probes from is.
func IsProbe(pattern string) bool { return pattern == "GET /healthz" || pattern == "GET /readyz" }

// TakesBody reports whether pattern's method carries a request body.
func TakesBody(pattern string) bool {
	method, _, _ := strings.Cut(pattern, " ")
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// RequireJSON wraps h, a route whose body is JSON: a request that carries
// a body, or names its type, must name application/json (415 otherwise).
// A page of another origin can post only a form (urlencoded, multipart,
// text/plain) or an untyped body without asking the server first (a CORS
// preflight, which this API never grants), so it cannot send the API a
// request it acts on. A bodiless POST (cancel, ack, revoke) may leave
// the type out: it carries nothing, and those routes need a bearer token,
// which such a page cannot attach.
func RequireJSON(h http.HandlerFunc) http.HandlerFunc {
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
			WriteError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type",
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
func (m *Middleware) instrument(name string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		who := &Principal{}
		h(sw, r.WithContext(context.WithValue(r.Context(), principalSlotKey{}, who)))
		elapsed := time.Since(start)
		m.requests.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
		m.latency.WithLabelValues(name).Observe(elapsed.Seconds())
		if m.log.Enabled(r.Context(), slog.LevelDebug) {
			m.log.LogAttrs(r.Context(), slog.LevelDebug, "api: request", slog.String("route", name), slog.String("path", r.URL.Path),
				slog.Int("status", sw.code), slog.Duration("took", elapsed), slog.String("token", who.TokenID), slog.String("role", string(who.Role)))
		}
	})
}
