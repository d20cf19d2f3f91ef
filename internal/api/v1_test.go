package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// fixture is a server on a SQLite store with teams a and b, one job in
// each (ja, jb) and a token per role (team-scoped ones in team a).
type fixture struct {
	ts     *httptest.Server
	srv    *Server
	st     store.Store
	clk    *clock.Manual
	tokens map[string]string // role name → secret; "none" → ""
}

func newFixture(t testing.TB, opts ...Option) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/api.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, st, opts...)
}

// newFixtureOn is newFixture on st, which it closes when t ends.
func newFixtureOn(t testing.TB, st store.Store, opts ...Option) *fixture {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(t0)
	for _, team := range []string{"a", "b"} {
		if err := st.Teams().CreateTeam(ctx, core.Team{ID: team, Name: "team " + team, Weight: 1}); err != nil {
			t.Fatal(err)
		}
		j := core.Job{ID: "j" + team, Team: team, Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: t0}
		if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{st: st, clk: clk, tokens: map[string]string{"none": ""}}
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
		f.tokens[string(role)] = secret
	}
	// Team b has a member token (t-other) and each team an open alert
	// (1 for a, 2 for b), for the isolation checks.
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Users().CreateUser(ctx, store.User{ID: "u-other", Team: "b", Role: store.RoleMember, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().CreateToken(ctx, store.Token{ID: "t-other", Hash: hash, User: "u-other", Team: "b", Role: store.RoleMember, Prefix: store.SecretPrefix(secret), Created: t0}); err != nil {
		t.Fatal(err)
	}
	f.tokens["other"] = secret
	for _, team := range []string{"a", "b"} {
		if _, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "idle-alert", LeaseID: "L-" + team, Team: team, Reason: "idle 30 min", Raised: t0}); err != nil {
			t.Fatal(err)
		}
	}
	opts = append([]Option{WithStore(st), WithRateLimit(httpapi.RateLimit{}), WithAnonymousRateLimit(httpapi.RateLimit{})}, opts...)
	f.srv = New(testCatalog(), clk, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	f.ts = httptest.NewServer(f.srv)
	t.Cleanup(f.ts.Close)
	return f
}

// call sends a request with role's token and returns the status, the
// body and the response headers.
func (f *fixture) call(t *testing.T, role, method, path, body string, hdr ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if s := f.tokens[role]; s != "" {
		req.Header.Set("Authorization", "Bearer "+s)
	} else if role != "none" {
		req.Header.Set("Authorization", "Bearer "+role) // a raw (bogus) secret
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

var matrixRoles = []string{"none", "admin", "team-admin", "member", "viewer", "agent"}

// TestRoleMatrix sends every route as every role and checks the status.
func TestRoleMatrix(t *testing.T) {
	f := newFixture(t)
	type want map[string]int
	cases := []struct {
		route, method, path string
		body                func(role string) string
		codes               want
	}{
		{"GET /healthz", "GET", "/healthz", nil, want{"none": 200, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 200}},
		{"GET /readyz", "GET", "/readyz", nil, want{"none": 200, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 200}},
		{"GET /api/v1/openapi.json", "GET", "/api/v1/openapi.json", nil, want{"none": 200, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 200}},
		{"GET /api/v1/offers", "GET", "/api/v1/offers", nil, want{"none": 200, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 200}},
		{"GET /api/v1/offers/{id...}", "GET", "/api/v1/offers/idc/cd/v100x8", nil, want{"none": 200, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 200}},
		{"POST /api/v1/quote", "POST", "/api/v1/quote", func(string) string {
			return `{"offer":"idc/cd/v100x8","mode":"weekly","start":"2026-03-02T00:00:00Z","end":"2026-03-16T00:00:00Z"}`
		}, want{"none": 200, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 200}},
		{"POST /api/v1/teams", "POST", "/api/v1/teams", func(r string) string { return `{"id":"new-` + r + `","name":"n"}` },
			want{"none": 401, "admin": 201, "team-admin": 403, "member": 403, "viewer": 403, "agent": 403}},
		{"GET /api/v1/teams", "GET", "/api/v1/teams", nil, want{"none": 401, "admin": 200, "team-admin": 403, "member": 403, "viewer": 403, "agent": 403}},
		{"POST /api/v1/tokens", "POST", "/api/v1/tokens", func(r string) string { return `{"user":"x-` + r + `","team":"a","role":"member","name":"n"}` },
			want{"none": 401, "admin": 201, "team-admin": 201, "member": 403, "viewer": 403, "agent": 403}},
		{"POST /api/v1/jobs", "POST", "/api/v1/jobs", func(string) string { return `{"team":"a","gpus":1}` },
			want{"none": 401, "admin": 201, "team-admin": 201, "member": 201, "viewer": 403, "agent": 403}},
		{"GET /api/v1/jobs", "GET", "/api/v1/jobs", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/jobs/{id}", "GET", "/api/v1/jobs/ja", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/jobs/{id}", "GET", "/api/v1/jobs/jb", nil, want{"none": 401, "admin": 200, "team-admin": 404, "member": 404, "viewer": 404, "agent": 403}},
		{"POST /api/v1/jobs/{id}/cancel", "POST", "/api/v1/jobs/jb/cancel", nil, want{"none": 401, "admin": 200, "team-admin": 404, "member": 404, "viewer": 403, "agent": 403}},
		{"POST /api/v1/jobs/{id}/cancel", "POST", "/api/v1/jobs/ja/cancel", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 403, "agent": 403}},
		{"GET /api/v1/leases", "GET", "/api/v1/leases", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/events", "GET", "/api/v1/events", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/tokens", "GET", "/api/v1/tokens", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 403, "viewer": 403, "agent": 403}},
		{"POST /api/v1/tokens/{id}/revoke", "POST", "/api/v1/tokens/t-other/revoke", nil, want{"none": 401, "admin": 200, "team-admin": 404, "member": 403, "viewer": 403, "agent": 403}},
		{"GET /api/v1/alerts", "GET", "/api/v1/alerts", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"POST /api/v1/alerts/{id}/ack", "POST", "/api/v1/alerts/1/ack", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 403, "agent": 403}},
		{"POST /api/v1/alerts/{id}/ack", "POST", "/api/v1/alerts/2/ack", nil, want{"none": 401, "admin": 200, "team-admin": 404, "member": 404, "viewer": 403, "agent": 403}},
		{"GET /api/v1/reports/usage", "GET", "/api/v1/reports/usage", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/reports/audit", "GET", "/api/v1/reports/audit", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		// The dashboard's own routes (ui.go).
		{"POST /api/v1/agent/heartbeat", "POST", "/api/v1/agent/heartbeat", func(r string) string { return `{"agent":"n-` + r + `"}` },
			want{"none": 401, "admin": 403, "team-admin": 403, "member": 403, "viewer": 403, "agent": 200}},
		{"POST /api/v1/agent/samples", "POST", "/api/v1/agent/samples", func(string) string { return `{"agent":"ghost","records":[]}` },
			want{"none": 401, "admin": 403, "team-admin": 403, "member": 403, "viewer": 403, "agent": 404}},
		{"POST /api/v1/agent/events", "POST", "/api/v1/agent/events", func(string) string { return `{"agent":"ghost","records":[]}` },
			want{"none": 401, "admin": 403, "team-admin": 403, "member": 403, "viewer": 403, "agent": 404}},
		{"GET /api/v1/agent/commands", "GET", "/api/v1/agent/commands?agent=ghost", nil, want{"none": 401, "admin": 403, "team-admin": 403, "member": 403, "viewer": 403, "agent": 200}},
		{"POST /api/v1/agent/commands/{id}/ack", "POST", "/api/v1/agent/commands/c1/ack", func(string) string { return `{"agent":"ghost"}` },
			want{"none": 401, "admin": 403, "team-admin": 403, "member": 403, "viewer": 403, "agent": 404}},
		{"POST /api/v1/agent/logs", "POST", "/api/v1/agent/logs", func(string) string { return `{"agent":"ghost","run":"r1","offset":0,"data":"aGk="}` },
			want{"none": 401, "admin": 403, "team-admin": 403, "member": 403, "viewer": 403, "agent": 404}},
		{"GET /api/v1/nodes", "GET", "/api/v1/nodes", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/jobs/{id}/logs", "GET", "/api/v1/jobs/ja/logs", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/jobs/{id}/logs", "GET", "/api/v1/jobs/jb/logs?tail=10", nil, want{"none": 401, "admin": 200, "team-admin": 404, "member": 404, "viewer": 404, "agent": 403}},
		{"GET /api/v1/overview", "GET", "/api/v1/overview", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/overview/heatmap", "GET", "/api/v1/overview/heatmap", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/overview/leases", "GET", "/api/v1/overview/leases", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
		{"GET /api/v1/policy", "GET", "/api/v1/policy", nil, want{"none": 401, "admin": 200, "team-admin": 200, "member": 200, "viewer": 200, "agent": 403}},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.route] = true
		for _, role := range matrixRoles {
			t.Run(tc.method+" "+tc.path+" as "+role, func(t *testing.T) {
				body := ""
				if tc.body != nil {
					body = tc.body(role)
				}
				code, b, _ := f.call(t, role, tc.method, tc.path, body)
				if code != tc.codes[role] {
					t.Errorf("got %d, want %d: %s", code, tc.codes[role], b)
				}
				if !documented(f.srv, tc.route, code) {
					t.Errorf("answered %d, which the OpenAPI document does not list for %s", code, tc.route)
				}
				if !json.Valid(b) {
					t.Errorf("not JSON: %s", b)
				}
			})
		}
	}
	s := New(testCatalog(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, r := range s.routes() {
		if !covered[r.Pattern] {
			t.Errorf("route %s not in the role matrix", r.Pattern)
		}
	}
	// A bogus token is a 401 too.
	if code, b, h := f.call(t, "gpf_bogus", "GET", "/api/v1/jobs", ""); code != 401 || h.Get("WWW-Authenticate") == "" {
		t.Errorf("bogus token: %d %s", code, b)
	}
}

// TestTeamIsolation: a member of team a sees nothing of team b.
func TestTeamIsolation(t *testing.T) {
	f := newFixture(t)
	for _, role := range []string{"team-admin", "member", "viewer"} {
		code, b, _ := f.call(t, role, "GET", "/api/v1/jobs", "")
		if code != 200 || strings.Contains(string(b), `"jb"`) || !strings.Contains(string(b), `"ja"`) {
			t.Errorf("%s list: %d %s", role, code, b)
		}
		code, b, _ = f.call(t, role, "GET", "/api/v1/jobs?team=b", "")
		if code != 200 || strings.Contains(string(b), `"jb"`) {
			t.Errorf("%s list team b: %d %s", role, code, b)
		}
		// A missing job and another team's job answer alike.
		_, other, _ := f.call(t, role, "GET", "/api/v1/jobs/jb", "")
		_, missing, _ := f.call(t, role, "GET", "/api/v1/jobs/nope", "")
		if strings.Replace(string(other), "jb", "nope", 1) != string(missing) {
			t.Errorf("%s: another team's job %s differs from a missing one %s", role, other, missing)
		}
	}
	code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"team":"b","gpus":1}`)
	if code != 403 {
		t.Errorf("member submits to team b: %d %s", code, b)
	}
	code, b, _ = f.call(t, "team-admin", "POST", "/api/v1/tokens", `{"user":"z","team":"b","role":"member"}`)
	if code != 403 {
		t.Errorf("team-admin makes a team b token: %d %s", code, b)
	}
	code, b, _ = f.call(t, "team-admin", "POST", "/api/v1/tokens", `{"role":"admin","user":"z"}`)
	if code != 403 {
		t.Errorf("team-admin makes an admin token: %d %s", code, b)
	}
	code, b, _ = f.call(t, "admin", "GET", "/api/v1/jobs", "")
	if code != 200 || !strings.Contains(string(b), `"jb"`) || !strings.Contains(string(b), `"ja"`) {
		t.Errorf("admin list: %d %s", code, b)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	f := newFixture(t)
	body := `{"gpus":2,"tier":"core","est_duration_seconds":3600}`
	var first, second JobView
	code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", body, "Idempotency-Key", "k1")
	if code != 201 || json.Unmarshal(b, &first) != nil || first.Team != "a" || first.State != "pending" || first.User != "u-member" {
		t.Fatalf("first: %d %s", code, b)
	}
	code, b, _ = f.call(t, "member", "POST", "/api/v1/jobs", body, "Idempotency-Key", "k1")
	if code != 200 || json.Unmarshal(b, &second) != nil || second.ID != first.ID {
		t.Fatalf("replay: %d %s (first %s)", code, b, first.ID)
	}
	code, b, _ = f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":3}`, "Idempotency-Key", "k1")
	if code != 409 {
		t.Fatalf("conflict: %d %s", code, b)
	}
	code, _, _ = f.call(t, "member", "POST", "/api/v1/jobs", body, "Idempotency-Key", "k2")
	if code != 201 {
		t.Fatalf("new key: %d", code)
	}
	var e httpapi.ErrorBody
	code, b, _ = f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":3}`, "Idempotency-Key", "k1")
	if json.Unmarshal(b, &e) != nil || code != 409 || e.Error.Field != "Idempotency-Key" ||
		e.Error.Message != fmt.Sprintf(`Idempotency-Key "k1" was used for job %q with a different body`, first.ID) {
		t.Fatalf("conflict names the header: %d %s", code, b)
	}
	code, b, _ = f.call(t, "admin", "POST", "/api/v1/jobs", `{"id":"jb","team":"a","gpus":1}`)
	if json.Unmarshal(b, &e) != nil || code != 409 || e.Error.Field != "id" || e.Error.Message != `job "jb" already exists` {
		t.Fatalf("existing id: %d %s", code, b)
	}
}

// TestJobIDs: a team token cannot choose a job id, so it can neither
// learn that another team's id exists (the answer is the same as for a
// free id) nor take an id first; the server's ids are unique.
func TestJobIDs(t *testing.T) {
	f := newFixture(t)
	_, taken, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"id":"jb","gpus":1}`)
	code, free, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"id":"jz","gpus":1}`)
	if code != 400 || strings.Replace(string(taken), "jb", "jz", 1) != string(free) {
		t.Errorf("another team's id and a free one answer differently:\n%s\n%s", taken, free)
	}
	seen := map[string]bool{}
	for range 20 {
		code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1}`)
		var j JobView
		if code != 201 || json.Unmarshal(b, &j) != nil || core.CheckName("id", j.ID) != nil || !strings.HasPrefix(j.ID, "job-") || seen[j.ID] {
			t.Fatalf("generated id: %d %s", code, b)
		}
		seen[j.ID] = true
	}
}

// TestSubmitAsUser: a team token submits as its own user; an admin may
// name another.
func TestSubmitAsUser(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		role, body string
		code       int
		user       string
	}{
		{"member", `{"gpus":1}`, 201, "u-member"},
		{"member", `{"gpus":1,"user":"u-member"}`, 201, "u-member"},
		{"member", `{"gpus":1,"user":"u-other"}`, 403, ""},
		{"team-admin", `{"gpus":1,"user":"u-member"}`, 403, ""},
		{"admin", `{"gpus":1,"team":"a","user":"carol"}`, 201, "carol"},
		{"admin", `{"gpus":1,"team":"a"}`, 201, "u-admin"},
	} {
		code, b, _ := f.call(t, tc.role, "POST", "/api/v1/jobs", tc.body)
		var j JobView
		var e httpapi.ErrorBody
		switch {
		case code != tc.code:
			t.Errorf("%s %s: %d %s, want %d", tc.role, tc.body, code, b, tc.code)
		case code == 201 && (json.Unmarshal(b, &j) != nil || j.User != tc.user):
			t.Errorf("%s %s: user %q, want %q", tc.role, tc.body, j.User, tc.user)
		case code == 403 && (json.Unmarshal(b, &e) != nil || e.Error.Field != "user"):
			t.Errorf("%s %s: %s, want the field user", tc.role, tc.body, b)
		}
	}
}

// TestStoreErrorsInWords: conflicts and missing rows are answered with
// the field, the value and no database text.
func TestStoreErrorsInWords(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		path, body string
		code       int
		field, msg string
	}{
		{"/api/v1/teams", `{"id":"a","name":"again"}`, 409, "id", `team "a" already exists`},
		{"/api/v1/tokens", `{"user":"zed","team":"zz","role":"member"}`, 404, "team", `team "zz" does not exist`},
		{"/api/v1/jobs", `{"team":"zz","gpus":1}`, 404, "team", `team "zz" does not exist`},
	} {
		code, b, _ := f.call(t, "admin", "POST", tc.path, tc.body)
		var e httpapi.ErrorBody
		if json.Unmarshal(b, &e) != nil || code != tc.code || e.Error.Field != tc.field || e.Error.Message != tc.msg {
			t.Errorf("POST %s %s: %d %s, want %d %s %q", tc.path, tc.body, code, b, tc.code, tc.field, tc.msg)
		}
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, body string
		code       int
		field      string
	}{
		{"no gpus", `{}`, 400, "gpus"},
		{"bad tier", `{"gpus":1,"tier":"gold"}`, 400, "tier"},
		{"bad share", `{"gpus":2,"gpu_milli":500}`, 400, "gpu_milli"},
		{"hash in id", `{"id":"a#1","gpus":1}`, 400, "id"},
		{"negative duration", `{"gpus":1,"est_duration_seconds":-1}`, 400, "est_duration_seconds"},
		{"duration 2^62 s", `{"gpus":1,"est_duration_seconds":4611686018427387904}`, 400, "est_duration_seconds"},
		{"checkpoint 2^62 s", `{"gpus":1,"checkpoint_interval_seconds":4611686018427387904}`, 400, "checkpoint_interval_seconds"},
		{"checkpoint negative", `{"gpus":1,"checkpoint_interval_seconds":-5}`, 400, "checkpoint_interval_seconds"},
		{"wrong type", `{"gpus":"one"}`, 400, "gpus"},
		{"unknown field", `{"gpus":1,"colour":"red"}`, 400, ""},
		{"bad workload", `{"gpus":1,"workload":"serving"}`, 400, "workload"},
		{"bad accelerator", `{"gpus":1,"accelerators":["nvidia","cuda"]}`, 400, "accelerators[1]"},
		{"too large", `{"image":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, 413, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", tc.body)
			var e httpapi.ErrorBody
			if err := json.Unmarshal(b, &e); err != nil || code != tc.code || e.Error.Field != tc.field {
				t.Errorf("got %d %s, want %d field %q", code, b, tc.code, tc.field)
			}
		})
	}
	for path, field := range map[string]string{"/api/v1/jobs?state=nope": "state", "/api/v1/jobs?tier=x": "tier", "/api/v1/jobs?limit=5000": "limit", "/api/v1/jobs?cursor=zz": "cursor", "/api/v1/leases?state=x": "state"} {
		code, b, _ := f.call(t, "admin", "GET", path, "")
		var e httpapi.ErrorBody
		if json.Unmarshal(b, &e) != nil || code != 400 || e.Error.Field != field {
			t.Errorf("%s: %d %s, want 400 field %s", path, code, b, field)
		}
	}
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, WithRateLimit(httpapi.RateLimit{Rate: 1, Burst: 2}))
	for i := range 2 {
		if code, b, _ := f.call(t, "viewer", "GET", "/api/v1/jobs", ""); code != 200 {
			t.Fatalf("request %d: %d %s", i, code, b)
		}
	}
	code, b, h := f.call(t, "viewer", "GET", "/api/v1/jobs", "")
	if code != 429 || h.Get("Retry-After") != "1" {
		t.Fatalf("over the limit: %d %s Retry-After %q", code, b, h.Get("Retry-After"))
	}
	if code, _, _ := f.call(t, "member", "GET", "/api/v1/jobs", ""); code != 200 {
		t.Errorf("another token is limited too: %d", code)
	}
	f.clk.Advance(time.Second)
	if code, b, _ := f.call(t, "viewer", "GET", "/api/v1/jobs", ""); code != 200 {
		t.Errorf("after a second: %d %s", code, b)
	}
	toks, err := f.st.Tokens().ListTokens(context.Background(), store.TokenFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if tok.ID == "t-viewer" && !tok.LastUsed.Equal(t0) {
			t.Errorf("viewer token last used %s, want %s (touched once a minute)", tok.LastUsed, t0)
		}
	}
}

func TestTokensAndAudit(t *testing.T) {
	f := newFixture(t)
	code, b, _ := f.call(t, "team-admin", "POST", "/api/v1/tokens", `{"user":"carol","role":"member","name":"ci"}`)
	var tok TokenView
	if code != 201 || json.Unmarshal(b, &tok) != nil || !strings.HasPrefix(tok.Secret, store.TokenPrefix) || tok.Team != "a" {
		t.Fatalf("create token: %d %s", code, b)
	}
	stored, err := f.st.Tokens().TokenByHash(context.Background(), store.HashToken(tok.Secret), t0)
	if err != nil || stored.ID != tok.ID || stored.User != "carol" {
		t.Fatalf("stored token: %+v %v", stored, err)
	}
	f.tokens["carol"] = tok.Secret
	if code, b, _ := f.call(t, "carol", "POST", "/api/v1/jobs", `{"gpus":1}`); code != 201 {
		t.Errorf("new token submits: %d %s", code, b)
	}
	if code, b, _ := f.call(t, "admin", "POST", "/api/v1/teams", `{"id":"c","name":"team c","quotas":[{"gpu_class":"A100","guaranteed":8000}]}`); code != 201 {
		t.Fatalf("create team: %d %s", code, b)
	}
	if code, b, _ := f.call(t, "admin", "POST", "/api/v1/teams", `{"id":"c"}`); code != 409 {
		t.Errorf("duplicate team: %d %s", code, b)
	}
	code, b, _ = f.call(t, "admin", "GET", "/api/v1/events?kind=audit.team_created", "")
	var ev EventsPage
	if code != 200 || json.Unmarshal(b, &ev) != nil || len(ev.Events) != 1 || ev.Events[0].Attrs["actor"] != "u-admin" || ev.Events[0].Subject != "c" {
		t.Errorf("audit of the team: %d %s", code, b)
	}
	code, b, _ = f.call(t, "admin", "GET", "/api/v1/events?kind=audit.token_created", "")
	if code != 200 || json.Unmarshal(b, &ev) != nil || len(ev.Events) != 1 || ev.Events[0].Attrs["actor"] != "u-team-admin" {
		t.Errorf("audit of the token: %d %s", code, b)
	}
}

func TestPagination(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		if code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1}`); code != 201 {
			t.Fatalf("%d %s", code, b)
		}
	}
	seen := map[string]bool{}
	path := "/api/v1/jobs?limit=2"
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		code, b, _ := f.call(t, "member", "GET", path, "")
		var p JobsPage
		if code != 200 || json.Unmarshal(b, &p) != nil || len(p.Jobs) > 2 {
			t.Fatalf("%d %s", code, b)
		}
		for _, j := range p.Jobs {
			if seen[j.ID] {
				t.Fatalf("job %s twice", j.ID)
			}
			seen[j.ID] = true
		}
		if p.Next == "" {
			break
		}
		path = "/api/v1/jobs?limit=2&cursor=" + p.Next
	}
	if len(seen) != 6 {
		t.Errorf("saw %d jobs, want 6", len(seen))
	}
}

func TestEnsureAdminToken(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/boot.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewManual(t0)
	secret, err := EnsureAdminToken(ctx, st, clk)
	if err != nil || !strings.HasPrefix(secret, store.TokenPrefix) {
		t.Fatalf("first start: %q %v", secret, err)
	}
	if tok, err := st.Tokens().TokenByHash(ctx, store.HashToken(secret), t0); err != nil || tok.Role != store.RoleAdmin {
		t.Fatalf("admin token: %+v %v", tok, err)
	}
	again, err := EnsureAdminToken(ctx, st, clk)
	if err != nil || again != "" {
		t.Fatalf("second start: %q %v", again, err)
	}
}

// TestIDRule: ids that become path segments, keys and CSV cells follow
// core.CheckName everywhere they are chosen: job ids (admin), team ids,
// and the users a token creates.
func TestIDRule(t *testing.T) {
	f := newFixture(t)
	for _, bad := range []string{"a/b", "..", "../a", "a\\nb", "a b", " a", "=cmd|' /C calc'!A0", "a#1"} {
		for _, tc := range []struct{ path, body, field string }{
			{"/api/v1/jobs", `{"id":"` + bad + `","team":"a","gpus":1}`, "id"},
			{"/api/v1/teams", `{"id":"` + bad + `","name":"n"}`, "id"},
			{"/api/v1/tokens", `{"user":"` + bad + `","team":"a","role":"member"}`, "user"},
		} {
			code, b, _ := f.call(t, "admin", "POST", tc.path, tc.body)
			var e httpapi.ErrorBody
			if json.Unmarshal(b, &e) != nil || code != 400 || e.Error.Field != tc.field || !strings.Contains(e.Error.Message, core.NameRule) {
				t.Errorf("POST %s %s: %d %s, want 400 naming %s and the rule", tc.path, tc.body, code, b, tc.field)
			}
		}
	}
}

// TestUnrunnableJobs: a job no offer of the catalog (within the
// provider's capacity) can ever run is a 422 naming the field and what
// is allowed, and is not stored.
func TestUnrunnableJobs(t *testing.T) {
	f := newFixture(t, WithCapacity(func(string) int { return 16 })) // 16 machines of 8 V100s of 32 GiB
	for _, tc := range []struct {
		body, field, allowed string
	}{
		{`{"gpus":1,"models":["Z100"]}`, "models", "GPU models the catalog offers: V100"},
		{`{"gpus":1,"gpu_mem_mib":900000}`, "gpu_mem_mib", "at most 32768 MiB"},
		{`{"gpus":1000}`, "gpus", "at most 128"},
	} {
		code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", tc.body)
		var e httpapi.ErrorBody
		if json.Unmarshal(b, &e) != nil || code != 422 || e.Error.Code != "unrunnable" || e.Error.Field != tc.field || !strings.Contains(e.Error.Message, tc.allowed) {
			t.Errorf("%s: %d %s, want 422 on %s allowing %q", tc.body, code, b, tc.field, tc.allowed)
		}
	}
	if code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":128,"models":["V100"],"gpu_mem_mib":32768}`); code != 201 {
		t.Errorf("the largest runnable job: %d %s", code, b)
	}
	_, b, _ := f.call(t, "member", "GET", "/api/v1/jobs", "")
	var page JobsPage
	if json.Unmarshal(b, &page) != nil || len(page.Jobs) != 2 { // ja and the runnable one
		t.Errorf("stored jobs: %s", b)
	}
}

// TestTeamAdminBadUserName: a team-admin naming a user outside the id
// rule is told so (400), not that the user is of another team (403).
func TestTeamAdminBadUserName(t *testing.T) {
	f := newFixture(t)
	code, b, _ := f.call(t, "team-admin", "POST", "/api/v1/tokens", `{"user":"a b","role":"member"}`)
	var e httpapi.ErrorBody
	if json.Unmarshal(b, &e) != nil || code != 400 || e.Error.Field != "user" || !strings.Contains(e.Error.Message, core.NameRule) {
		t.Errorf("%d %s, want 400 on user quoting the rule", code, b)
	}
	if code, b, _ := f.call(t, "team-admin", "POST", "/api/v1/tokens", `{"user":"u-other","role":"member"}`); code != 403 {
		t.Errorf("a user of team b: %d %s, want 403", code, b)
	}
}

// TestStoreErrorHidesDriverText: a bare conflict or missing row from a
// driver is answered in our words, naming the field, never its text.
func TestStoreErrorHidesDriverText(t *testing.T) {
	s := New(testCatalog(), clock.NewManual(t0), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tc := range []struct {
		err   error
		field string
		code  int
		want  string
	}{
		{fmt.Errorf("create x: %w: constraint failed: UNIQUE constraint failed: x.id (2067)", store.ErrConflict), "id", 409, "id: conflicts with what is stored"},
		{fmt.Errorf("%w: a referenced row does not exist: FOREIGN KEY constraint failed (787)", store.ErrNotFound), "team", 404, "team: refers to something that does not exist"},
		{fmt.Errorf("%w: duplicate key value violates unique constraint", store.ErrConflict), "", 409, "the request conflicts with what is stored"},
		{fmt.Errorf("submit: %w", store.Exists("id", "job", "j1")), "team", 409, `job "j1" already exists`},
	} {
		w := httptest.NewRecorder()
		s.storeError(w, httptest.NewRequest("POST", "/x", nil), tc.err, tc.field)
		var e httpapi.ErrorBody
		if json.Unmarshal(w.Body.Bytes(), &e) != nil || w.Code != tc.code || e.Error.Message != tc.want {
			t.Errorf("%v: %d %s, want %d %q", tc.err, w.Code, w.Body, tc.code, tc.want)
		}
	}
}

// TestSubmitWorkloadAndAccelerators: a job says what it does and what it
// is built for; the view shows the defaults filled in.
func TestSubmitWorkloadAndAccelerators(t *testing.T) {
	f := newFixture(t)
	var v JobView
	code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1,"workload":"inference","accelerators":["aws-inferentia","nvidia"]}`)
	if code != 201 || json.Unmarshal(b, &v) != nil || v.Workload != core.Inference || !slices.Equal(v.Accelerators, []core.Accelerator{core.AWSInferentia, core.NVIDIA}) {
		t.Fatalf("inference job: %d %s", code, b)
	}
	code, b, _ = f.call(t, "member", "GET", "/api/v1/jobs/"+v.ID, "")
	if code != 200 || json.Unmarshal(b, &v) != nil || v.Workload != core.Inference || len(v.Accelerators) != 2 {
		t.Fatalf("get inference job: %d %s", code, b)
	}
	code, b, _ = f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1}`)
	if code != 201 || json.Unmarshal(b, &v) != nil || v.Workload != core.Training || !slices.Equal(v.Accelerators, []core.Accelerator{core.NVIDIA}) {
		t.Fatalf("default job: %d %s", code, b)
	}
	_, raw, _ := f.call(t, "member", "GET", "/api/v1/openapi.json", "")
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	doc := buf.Bytes()
	if !strings.Contains(string(doc), `"workload":{"enum":["training","inference"],"type":"string"}`) ||
		!strings.Contains(string(doc), `"aws-inferentia"`) || !strings.Contains(string(doc), `"slice_milli"`) {
		t.Errorf("OpenAPI lacks workload, accelerators or slice_milli")
	}
}

// TestUnitLimit: a member's job of 100,000 shards is refused by its
// team's unit limit (the default), naming the field, the value and what
// is left; an admin sets a team's limit, and a team shows the one in
// force.
func TestUnitLimit(t *testing.T) {
	f := newFixture(t)
	code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1,"shards":100000}`)
	var e httpapi.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || code != 400 || e.Error.Field != "shards" ||
		!strings.Contains(e.Error.Message, "100000") || !strings.Contains(e.Error.Message, "unit_limit 10000") {
		t.Errorf("100,000 shards: %d %s, want 400 field shards naming the value and the limit", code, b)
	}
	if code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1,"shards":9999}`); code != 201 {
		t.Errorf("9,999 shards beside one unit: %d %s, want 201", code, b)
	}
	for _, tc := range []struct {
		body  string
		code  int
		limit int64
	}{
		{`{"id":"big","name":"big","unit_limit":200000}`, 201, 200_000},
		{`{"id":"dflt","name":"dflt"}`, 201, core.DefaultUnitLimit},
		{`{"id":"neg","name":"neg","unit_limit":-1}`, 400, 0},
		{`{"id":"huge","name":"huge","unit_limit":1000001}`, 400, 0},
	} {
		code, b, _ := f.call(t, "admin", "POST", "/api/v1/teams", tc.body)
		if code != tc.code {
			t.Errorf("create team %s: %d %s, want %d", tc.body, code, b, tc.code)
			continue
		}
		if code != 201 {
			if json.Unmarshal(b, &e) != nil || e.Error.Field != "unit_limit" {
				t.Errorf("create team %s: %s, want field unit_limit", tc.body, b)
			}
			continue
		}
		var v TeamView
		if err := json.Unmarshal(b, &v); err != nil || v.UnitLimit != tc.limit {
			t.Errorf("create team %s: %s, want unit_limit %d", tc.body, b, tc.limit)
		}
	}
}

// TestUnrunnableUnderPolicy: a job is judged against the offers the
// loop may rent under the policy's billing modes, as the loop judges
// it, not against the whole catalog (weekly and monthly V100s here).
func TestUnrunnableUnderPolicy(t *testing.T) {
	p := policy.Default()
	p.BillingModes = []core.BillingMode{core.OnDemand}
	f := newFixture(t, WithPolicy(p))
	code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1}`)
	var e httpapi.ErrorBody
	if json.Unmarshal(b, &e) != nil || code != 422 || e.Error.Code != "unrunnable" {
		t.Errorf("a job no on-demand offer can run: %d %s, want 422 unrunnable", code, b)
	}
	if code, b, _ := newFixture(t).call(t, "member", "POST", "/api/v1/jobs", `{"gpus":1}`); code != 201 {
		t.Errorf("the same job under the default policy: %d %s, want 201", code, b)
	}
}
