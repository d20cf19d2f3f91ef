package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gpufleet/gpufleet/internal/store"
)

// Principal is who a request acts as: the token it carried, resolved.
type Principal struct {
	TokenID string
	User    string
	// Team is empty for admins and agents.
	Team string
	Role store.Role
	// Kind, Lease and Agent are the agent token's binding (store.Token).
	Kind  store.TokenKind
	Lease string
	Agent string
}

// Actor names the principal in audit events: its user, or its token for
// agent tokens.
func (p Principal) Actor() string {
	if p.User != "" {
		return p.User
	}
	return "token:" + p.TokenID
}

// SeesTeam reports whether p may see a row of team: an admin sees every
// team's rows, a team-scoped role its own team's only.
func (p Principal) SeesTeam(team string) bool {
	return p.Role == store.RoleAdmin || (p.Role.TeamScoped() && p.Team == team)
}

type principalKey struct{}

// principalSlotKey holds a *Principal that instrument reads after the
// handler: authenticate fills it, so the request log names the token.
type principalSlotKey struct{}

// PrincipalFrom returns the principal Authenticate attached to ctx; false
// on a route that needs no token.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Authenticate wraps h: the request must carry "Authorization: Bearer
// <secret>" of an active token (401 otherwise) whose role is in roles (403
// otherwise), within the token's rate limit (429 with Retry-After). h
// finds the token's Principal with PrincipalFrom. Without a store every
// such request is a 503.
func (m *Middleware) Authenticate(roles []store.Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if m.store == nil {
			WriteError(w, http.StatusServiceUnavailable, "unavailable", "", "this server has no store")
			return
		}
		auth := r.Header.Get("Authorization")
		secret, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || secret == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet"`)
			WriteError(w, http.StatusUnauthorized, "unauthenticated", "", "missing bearer token (Authorization: Bearer gpf_...)")
			return
		}
		// A secret is the exact string it was issued as: a space or a line
		// break around it is not tidied away into a match.
		if strings.ContainsFunc(secret, unicode.IsSpace) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet", error="invalid_token"`)
			WriteError(w, http.StatusUnauthorized, "unauthenticated", "Authorization",
				"bearer token contains whitespace: want exactly one space after Bearer and the token with nothing around it (Authorization: Bearer gpf_...)")
			return
		}
		now := m.clock.Now()
		tok, err := m.store.Tokens().TokenByHash(r.Context(), store.HashToken(secret), now)
		if errors.Is(err, store.ErrNotFound) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet", error="invalid_token"`)
			WriteError(w, http.StatusUnauthorized, "unauthenticated", "", "unknown, revoked or expired token")
			return
		}
		if err != nil {
			Internal(m.log, w, r, fmt.Errorf("resolve token: %w", err))
			return
		}
		if wait, ok := m.perToken.take(tok.ID, now); !ok {
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
			WriteError(w, http.StatusTooManyRequests, "rate_limited", "", fmt.Sprintf("token rate limit exceeded; retry in %s", wait.Round(time.Millisecond)))
			return
		}
		if !slices.Contains(roles, tok.Role) {
			WriteError(w, http.StatusForbidden, "forbidden", "", fmt.Sprintf("role %s may not %s %s", tok.Role, r.Method, r.URL.Path))
			return
		}
		if m.perToken.touchDue(tok.ID, now) {
			// LastUsed to the minute: one write a minute per token, not
			// one per request.
			if err := m.store.Tokens().TouchToken(r.Context(), tok.ID, now); err != nil {
				m.log.Warn("api: touch token", "token", tok.ID, "err", err)
			}
		}
		p := Principal{TokenID: tok.ID, User: tok.User, Team: tok.Team, Role: tok.Role, Kind: tok.Kind, Lease: tok.Lease, Agent: tok.Agent}
		if slot, ok := r.Context().Value(principalSlotKey{}).(*Principal); ok {
			*slot = p
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// LimitAnonymous wraps h, a route that needs no token, in the limit of
// the client's address (429 with Retry-After): without a token there is
// nothing else to count a caller by.
func (m *Middleware) LimitAnonymous(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if wait, ok := m.anonymous.take(clientKey(r), m.clock.Now()); !ok {
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
			WriteError(w, http.StatusTooManyRequests, "rate_limited", "", fmt.Sprintf("rate limit of requests without a token from this address exceeded; retry in %s", wait.Round(time.Millisecond)))
			return
		}
		h(w, r)
	}
}

// clientKey is who a request without a token is limited as: its peer's
// IP address, an IPv6 one by its /64 (one site's usual allocation, which
// a client could otherwise walk to get a fresh bucket per request). It
// does not read X-Forwarded-For, which any client can write; behind a
// proxy every client shares the proxy's limit.
func clientKey(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// RateLimit configures a token bucket: Rate requests a second refill it
// up to Burst. A zero Rate disables the limit.
type RateLimit struct {
	Rate  float64
	Burst int
}

// DefaultRateLimit is the per-token limit a server has unless told
// otherwise.
var DefaultRateLimit = RateLimit{Rate: 100, Burst: 200}

// DefaultAnonymousRateLimit is the per-address limit of the routes that
// need no token (offers, quote, the OpenAPI document) a server has unless
// told otherwise: far above what a person or a script quoting prices sends, far
// below a flood.
var DefaultAnonymousRateLimit = RateLimit{Rate: 20, Burst: 100}

// limiter holds one token bucket per key: an API token's id, or a
// client's address.
type limiter struct {
	cfg     RateLimit
	mu      sync.Mutex
	buckets map[string]*bucket
	touched map[string]time.Time
	// swept is when buckets were last swept of full ones.
	swept time.Time
}

// touchInterval is how often a token's LastUsed is written.
const touchInterval = time.Minute

// touchDue reports whether id's LastUsed should be written at now, and
// if so counts it as written.
func (l *limiter) touchDue(id string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.touched[id]; ok && now.Sub(last) < touchInterval {
		return false
	}
	l.touched[id] = now
	return true
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(cfg RateLimit) *limiter {
	return &limiter{cfg: cfg, buckets: map[string]*bucket{}, touched: map[string]time.Time{}}
}

// take spends one request of id's bucket at now; when it is empty it
// returns how long until one is available.
func (l *limiter) take(id string, now time.Time) (time.Duration, bool) {
	if l.cfg.Rate <= 0 {
		return 0, true
	}
	burst := float64(max(l.cfg.Burst, 1))
	l.mu.Lock()
	defer l.mu.Unlock()
	// A bucket left alone for the time it takes to fill is full, the same
	// as no bucket: dropping those keeps the map to the keys seen in the
	// last two fill times, however many addresses a flood comes from. The
	// sweep runs once a fill time, so it costs O(1) a request.
	fill := time.Duration(burst / l.cfg.Rate * float64(time.Second))
	if now.Sub(l.swept) >= fill {
		for k, b := range l.buckets {
			if now.Sub(b.at) >= fill {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b := l.buckets[id]
	if b == nil {
		b = &bucket{tokens: burst, at: now}
		l.buckets[id] = b
	}
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(burst, b.tokens+el.Seconds()*l.cfg.Rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / l.cfg.Rate * float64(time.Second)), false
}
