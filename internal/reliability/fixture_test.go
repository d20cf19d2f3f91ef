package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/postgres/pgtest"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is the API on a SQLite file with teams a and b, a job in each
// and one token per role (the team-scoped ones in team a), logging at
// debug level into logs.
type fixture struct {
	ts     *httptest.Server
	st     store.Store
	dbPath string
	tokens map[store.Role]string
	logs   *lockedBuffer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	path := t.TempDir() + "/rel.db"
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOn(t, st)
	f.dbPath = path
	return f
}

// newPostgresFixture is newFixture on a fresh PostgreSQL schema.
func newPostgresFixture(t testing.TB) *fixture {
	t.Helper()
	dsn, schema := pgtest.Schema(t, "rel_")
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, st)
}

// backends runs fn on a fixture of each store backend.
func backends(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, newFixture(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, newPostgresFixture(t)) })
}

func newFixtureOn(t testing.TB, st store.Store) *fixture {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { st.Close() })
	for _, team := range []string{"a", "b"} {
		if err := st.Teams().CreateTeam(ctx, core.Team{ID: team, Name: "team " + team, Weight: 1}); err != nil {
			t.Fatal(err)
		}
		j := core.Job{ID: "j" + team, Team: team, Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: t0}
		if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{st: st, tokens: map[store.Role]string{}, logs: &lockedBuffer{}}
	for _, role := range store.Roles {
		secret, hash, err := store.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		tok := store.Token{ID: "t-" + string(role), Hash: hash, Role: role, Name: string(role), Created: t0}
		if role != store.RoleAgent {
			u := store.User{ID: "u-" + string(role), Role: role, Created: t0}
			if role.TeamScoped() {
				u.Team = "a"
			}
			if err := st.Users().CreateUser(ctx, u); err != nil {
				t.Fatal(err)
			}
			tok.User, tok.Team = u.ID, u.Team
		}
		if err := st.Tokens().CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		f.tokens[role] = secret
	}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := api.New(pricing.Demo(), clock.NewManual(t0), log, api.WithStore(st), api.WithRateLimit(httpapi.RateLimit{}), api.WithAnonymousRateLimit(httpapi.RateLimit{}))
	f.ts = httptest.NewServer(srv)
	t.Cleanup(f.ts.Close)
	return f
}

// do sends one request with the secret as bearer token ("" for none)
// and returns the status, the content type and the body.
func (f *fixture) do(t testing.TB, method, path, secret string, body []byte) (int, string, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, f.ts.URL+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// operation is one route of the served OpenAPI document.
type operation struct {
	method, path string
	roles        []store.Role // nil: public
	query        []string
	request      map[string]any // the request body's schema, if any
}

// operations reads the served OpenAPI document: the routes as the
// server itself lists them, so none is left out.
func (f *fixture) operations(t testing.TB) []operation {
	t.Helper()
	code, _, body := f.do(t, "GET", "/api/v1/openapi.json", "", nil)
	if code != http.StatusOK {
		t.Fatalf("openapi: %d", code)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Roles      []string `json:"x-roles"`
			Parameters []struct {
				Name, In string
			} `json:"parameters"`
			RequestBody struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []operation
	for path, item := range doc.Paths {
		for method, op := range item {
			o := operation{method: strings.ToUpper(method), path: path}
			for _, r := range op.Roles {
				o.roles = append(o.roles, store.Role(r))
			}
			for _, p := range op.Parameters {
				if p.In == "query" {
					o.query = append(o.query, p.Name)
				}
			}
			if c, ok := op.RequestBody.Content["application/json"]; ok {
				o.request = c.Schema
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].path != ops[j].path {
			return ops[i].path < ops[j].path
		}
		return ops[i].method < ops[j].method
	})
	if len(ops) < 10 {
		t.Fatalf("only %d operations in the OpenAPI document", len(ops))
	}
	return ops
}

// fill replaces every {param} of an OpenAPI path with value.
func fill(path, value string) string {
	for {
		i := strings.Index(path, "{")
		if i < 0 {
			return path
		}
		j := strings.Index(path[i:], "}")
		if j < 0 {
			return path
		}
		path = path[:i] + value + path[i+j+1:]
	}
}
