package agentapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// fixture is the agent protocol on a SQLite store, mounted as the server
// mounts it (httpapi.Middleware), with teams a and b, one job in each
// (ja, jb), and a shared agent token t-agent.
type fixture struct {
	ts     *httptest.Server
	st     store.Store
	clk    *clock.Manual
	tokens map[string]string // role name → secret
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/api.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, st)
}

// newFixtureOn is newFixture on st, which it closes when t ends.
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
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().CreateToken(ctx, store.Token{ID: "t-agent", Hash: hash, Role: store.RoleAgent, Name: "agent", Created: t0}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(t0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cat := &pricing.Catalog{Currency: "CNY", Offers: []core.Offer{{ID: "idc/cd/v100x8", Provider: "idc", Region: "cd", InstanceType: "v100x8", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "CNY"}}}
	mux := http.NewServeMux()
	mw := httpapi.NewMiddleware(st, clk, log, httpapi.RateLimit{}, httpapi.RateLimit{})
	for _, r := range New(st, cat, clk, log).Routes() {
		mw.Handle(mux, r)
	}
	f := &fixture{st: st, clk: clk, tokens: map[string]string{"agent": secret}, ts: httptest.NewServer(mux)}
	t.Cleanup(f.ts.Close)
	return f
}

// call sends a request with role's token and returns the status, the
// body and the response headers.
func (f *fixture) call(t *testing.T, role, method, path, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+f.tokens[role])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// uplink returns the agent's HTTP client for agent id on f's server.
func (f *fixture) uplink(id string) *link.HTTP {
	return &link.HTTP{URL: f.ts.URL, Token: f.tokens["agent"], Agent: id, Epoch: "e1", Timeout: 5 * time.Second}
}
