package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/audit/audittest"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// auditServer serves the audit's fixed workload from a SQLite store in
// t.TempDir(), over real HTTP, with an admin token, a member of team
// vision and a viewer of team nlp.
func auditServer(t *testing.T) (url string, tokens map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := audittest.Seed(ctx, st, audittest.Workload()); err != nil {
		t.Fatal(err)
	}
	tokens = map[string]string{}
	for _, u := range []struct {
		name, team string
		role       store.Role
	}{{"admin", "", store.RoleAdmin}, {"vision", "vision", store.RoleMember}, {"nlp", "nlp", store.RoleViewer}} {
		secret, hash, err := store.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Users().CreateUser(ctx, store.User{ID: "u-" + u.name, Team: u.team, Role: u.role, Created: audittest.Nov}); err != nil {
			t.Fatal(err)
		}
		if err := st.Tokens().CreateToken(ctx, store.Token{ID: "t-" + u.name, Hash: hash, User: "u-" + u.name, Team: u.team, Role: u.role,
			Prefix: store.SecretPrefix(secret), Created: audittest.Nov}); err != nil {
			t.Fatal(err)
		}
		tokens[u.name] = secret
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: audittest.Catalog()}
	ts := httptest.NewServer(New(cat, clock.NewManual(audittest.Clock), slog.New(slog.NewTextHandler(io.Discard, nil)), WithStore(st), WithRateLimit(httpapi.RateLimit{})))
	t.Cleanup(ts.Close)
	return ts.URL, tokens
}

func getAudit(t *testing.T, url, token, query string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/api/v1/reports/audit"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestAuditAPIMatchesGolden: the admin's JSON is the engine's golden file,
// byte for byte: the API loads and renders through the same code.
func TestAuditAPIMatchesGolden(t *testing.T) {
	url, tok := auditServer(t)
	code, _, body := getAudit(t, url, tok["admin"], "?from=2026-11&to=2026-12")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	want, err := os.ReadFile(filepath.Join("..", "report", "testdata", "audit_month.json"))
	if err != nil {
		t.Fatal(err)
	}
	if body != string(want) {
		t.Errorf("GET /api/v1/reports/audit differs from internal/report/testdata/audit_month.json:\n%s", body)
	}
}

// TestAuditAPITeamIsolation: a team role gets its own team's audit only,
// in every format; another team's jobs, lines, the idle line and the
// fleet's lease changes never appear, and asking for another team is 403.
func TestAuditAPITeamIsolation(t *testing.T) {
	url, tok := auditServer(t)
	others := map[string][]string{
		"vision": {"gang-8", "etl-peak", "train-small", "nlp", "research", "(idle)", "lease-change", "l-base-2"},
		"nlp":    {"mem-16", "infer-h100", "etl-peak", "train-small", "vision", "research", "(idle)", "lease-change"},
	}
	own := map[string]string{"vision": "infer-h100", "nlp": "gang-8"}
	for team, forbidden := range others {
		for _, format := range []string{"json", "csv", "html"} {
			code, h, body := getAudit(t, url, tok[team], "?from=2026-11&to=2026-12&format="+format)
			if code != 200 {
				t.Fatalf("%s %s: %d %s", team, format, code, body)
			}
			if !strings.Contains(body, own[team]) {
				t.Errorf("%s %s: lacks its own job %s", team, format, own[team])
			}
			for _, f := range forbidden {
				if strings.Contains(body, f) {
					t.Errorf("%s %s: shows %q", team, format, f)
				}
			}
			if format == "html" && !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
				t.Errorf("html content type %q", h.Get("Content-Type"))
			}
		}
		var v struct {
			Team  string `json:"team"`
			Total struct {
				Cost json.Number `json:"cost"`
			} `json:"total"`
		}
		_, _, body := getAudit(t, url, tok[team], "?from=2026-11&to=2026-12&team="+team)
		if err := json.Unmarshal([]byte(body), &v); err != nil || v.Team != team {
			t.Errorf("%s: team %q, %v", team, v.Team, err)
		}
	}
	code, _, body := getAudit(t, url, tok["vision"], "?from=2026-11&to=2026-12&team=nlp")
	if code != 403 || strings.Contains(body, "gang-8") {
		t.Errorf("vision asking for nlp: %d %s", code, body)
	}
	// The admin may ask for one team, and gets what its members get.
	_, _, admin := getAudit(t, url, tok["admin"], "?from=2026-11&to=2026-12&team=vision")
	_, _, member := getAudit(t, url, tok["vision"], "?from=2026-11&to=2026-12")
	if admin != member {
		t.Errorf("admin's team=vision differs from the member's own audit")
	}
}

func TestAuditAPIErrors(t *testing.T) {
	url, tok := auditServer(t)
	if code, _, _ := getAudit(t, url, "", "?from=2026-11&to=2026-12"); code != 401 {
		t.Errorf("no token: %d", code)
	}
	cases := []struct{ query, field string }{
		{"?from=yesterday&to=2026-12", "from"},
		{"?from=2026-12&to=2026-11", "to"},
		{"?from=2026-01&to=2027-06", "to"},
		{"?from=2026-11&to=2026-12&format=pdf", "format"},
		{"?from=2026-11&to=2026-12&period=year", "period"},
		{"?from=2026-11&to=2026-12&tz=Mars/Base", "tz"},
	}
	for _, c := range cases {
		code, _, body := getAudit(t, url, tok["admin"], c.query)
		var e httpapi.ErrorBody
		if code != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Field != c.field {
			t.Errorf("%s: %d %s, want 400 on %s", c.query, code, body, c.field)
		}
	}
}
