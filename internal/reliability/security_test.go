package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/reltest"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestEveryRouteEveryRole is the endpoint × role matrix: every route of
// the served OpenAPI document under every role and without a token. A
// protected route answers 401 without a token and 403 to a role it does
// not list; a role it lists gets past authorization (any status but 401
// and 403); a public route never asks for a token.
func TestEveryRouteEveryRole(t *testing.T) { backends(t, everyRouteEveryRole) }

func everyRouteEveryRole(t *testing.T, f *fixture) {
	ops := f.operations(t)
	requests := 0
	for _, op := range ops {
		path := fill(op.path, "ja")
		var body []byte
		if op.request != nil {
			body = []byte(`{}`)
		}
		for _, role := range append([]store.Role{""}, store.Roles...) {
			name := string(role)
			if name == "" {
				name = "none"
			}
			code, _, resp := f.do(t, op.method, path, f.tokens[role], body)
			requests++
			var want string
			switch {
			case op.roles == nil:
				if code == http.StatusUnauthorized || code == http.StatusForbidden {
					want = "not 401/403 (public route)"
				}
			case role == "":
				if code != http.StatusUnauthorized {
					want = "401"
				}
			case !slices.Contains(op.roles, role):
				if code != http.StatusForbidden {
					want = "403"
				}
			default:
				if code == http.StatusUnauthorized || code == http.StatusForbidden {
					want = "past authorization (not 401/403)"
				}
			}
			if want != "" {
				t.Errorf("%s %s as %s: %d, want %s: %s", op.method, path, name, code, want, resp)
			}
		}
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "every route of the OpenAPI document under every role and with no token",
		Amount: fmt.Sprintf("%d routes × %d callers = %d requests", len(ops), len(store.Roles)+1, requests),
		Held:   "401 without a token, 403 for a role the route does not list, past authorization for every role it lists"})
}

// hostile are inputs meant to break out of a query, a path or a field.
var hostile = []string{
	`' OR '1'='1`,
	`'; DROP TABLE jobs; --`,
	`" OR ""="`,
	`1 UNION SELECT hash FROM tokens --`,
	`../../../../../../etc/passwd`,
	`..%2f..%2f..%2fetc%2fpasswd`,
	`/etc/passwd`,
	"a\x00b",
	`%00`,
	`${jndi:ldap://x}`,
	`<script>alert(1)</script>`,
	strings.Repeat("A", 10_000),
	`-1`,
	`99999999999999999999999999`,
	`NaN`,
	`ジョブ`,
}

// snapshot is what must survive the hostile requests unchanged.
func snapshot(t *testing.T, st store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, id := range []string{"ja", "jb"} {
		j, err := st.Jobs().GetJob(ctx, id)
		if err != nil {
			t.Fatalf("job %s after hostile input: %v", id, err)
		}
		fmt.Fprintf(&b, "%+v\n", j)
	}
	toks, err := st.Tokens().ListTokens(ctx, store.TokenFilter{})
	if err != nil {
		t.Fatalf("tokens after hostile input: %v", err)
	}
	for _, tok := range toks {
		if strings.HasPrefix(tok.ID, "t-") {
			fmt.Fprintf(&b, "%s %s %s %x %v\n", tok.ID, tok.Role, tok.Team, tok.Hash, tok.Revoked)
		}
	}
	for _, id := range []string{"a", "b"} {
		team, err := st.Teams().GetTeam(ctx, id)
		if err != nil {
			t.Fatalf("team %s after hostile input: %v", id, err)
		}
		fmt.Fprintf(&b, "%+v\n", team)
	}
	return b.String()
}

// bodyFor builds a request body from an OpenAPI object schema with every
// string field set to v (and numbers to -1), the shape a handler accepts
// so that v reaches validation and the store.
func bodyFor(schema map[string]any, v string) []byte {
	obj := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		switch ps["type"] {
		case "string":
			obj[name] = v
		case "integer", "number":
			obj[name] = -1
		case "boolean":
			obj[name] = true
		}
	}
	b, _ := json.Marshal(obj)
	return b
}

// TestHostileInputOnEveryParameter sends SQL injection, path traversal
// and malformed values in every query parameter, every path parameter
// and every string field of every request body of every route, as the
// admin (the widest reach). Nothing may answer 5xx or anything but JSON,
// no file content may leak, and the jobs, tokens and teams stored
// before are all there, unchanged.
func TestHostileInputOnEveryParameter(t *testing.T) { backends(t, hostileInputOnEveryParameter) }

func hostileInputOnEveryParameter(t *testing.T, f *fixture) {
	before := snapshot(t, f.st)
	ops := f.operations(t)
	requests := 0
	check := func(method, path string, body []byte, code int, ctype string, resp []byte) {
		t.Helper()
		requests++
		if code >= 500 {
			t.Errorf("%s %s %.200s: %d: %.300s", method, path, body, code, resp)
		}
		if !strings.HasPrefix(ctype, "application/json") && strings.HasPrefix(path, "/api/") {
			t.Errorf("%s %s: content type %q", method, path, ctype)
		}
		if bytes.Contains(resp, []byte("root:x:0:0")) {
			t.Errorf("%s %s: leaked /etc/passwd", method, path)
		}
	}
	for _, op := range ops {
		secret := f.tokens[store.RoleAdmin]
		if op.roles != nil && !slices.Contains(op.roles, store.RoleAdmin) {
			secret = f.tokens[op.roles[0]]
		}
		for _, v := range hostile {
			var body []byte
			if op.request != nil {
				body = bodyFor(op.request, v)
			}
			if strings.Contains(op.path, "{") {
				p := fill(op.path, url.PathEscape(v))
				code, ctype, resp := f.do(t, op.method, p, secret, body)
				check(op.method, p, body, code, ctype, resp)
			}
			for _, q := range op.query {
				p := fill(op.path, "ja") + "?" + url.Values{q: {v}}.Encode()
				code, ctype, resp := f.do(t, op.method, p, secret, body)
				check(op.method, p, body, code, ctype, resp)
			}
			if op.request != nil {
				p := fill(op.path, "ja")
				code, ctype, resp := f.do(t, op.method, p, secret, body)
				check(op.method, p, body, code, ctype, resp)
			}
		}
		if op.request != nil {
			p := fill(op.path, "ja")
			for _, body := range []string{`[]`, `"x"`, `{"a":`, strings.Repeat("[", 10_000), `{"team":{"$ne":null}}`, `null`} {
				code, ctype, resp := f.do(t, op.method, p, secret, []byte(body))
				check(op.method, p, []byte(body), code, ctype, resp)
			}
		}
	}
	// Raw traversal attempts on paths that might reach the disk.
	for _, p := range []string{"/ui/../../../../etc/passwd", "/ui/..%2f..%2f..%2f..%2fetc%2fpasswd", "/%2e%2e/%2e%2e/etc/passwd", "/api/v1/jobs/..%2f..%2f..%2fetc%2fpasswd/logs", "/static/../../etc/passwd"} {
		code, _, resp := f.do(t, "GET", p, f.tokens[store.RoleAdmin], nil)
		requests++
		if code >= 500 || bytes.Contains(resp, []byte("root:x:0:0")) {
			t.Errorf("GET %s: %d %.200s", p, code, resp)
		}
	}
	if after := snapshot(t, f.st); after != before {
		t.Errorf("stored data changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "SQL injection, path traversal and malformed values in every query, path and body field of every route",
		Amount: fmt.Sprintf("%d routes, %d hostile values, %d requests", len(ops), len(hostile), requests),
		Held:   "no 5xx, JSON errors only, no file content leaked, the stored jobs, tokens and teams unchanged"})
}

// TestBodyLimitOnEveryWriteRoute: a body over httpapi.MaxBodyBytes is a 413
// on every route that reads one.
func TestBodyLimitOnEveryWriteRoute(t *testing.T) {
	f := newFixture(t)
	big := []byte(`{"name":"` + strings.Repeat("x", 2<<20) + `"}`)
	n := 0
	for _, op := range f.operations(t) {
		if op.request == nil {
			continue
		}
		secret := f.tokens[store.RoleAdmin]
		if op.roles != nil && !slices.Contains(op.roles, store.RoleAdmin) {
			secret = f.tokens[op.roles[0]]
		}
		code, _, resp := f.do(t, op.method, fill(op.path, "ja"), secret, big)
		n++
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with a 2 MiB body: %d, want 413: %.200s", op.method, op.path, code, resp)
		}
	}
	if n == 0 {
		t.Fatal("no route takes a body")
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "a 2 MiB body to every route that reads one",
		Amount: fmt.Sprintf("%d routes", n), Held: "413 on each"})
}

// TestSecretsNeitherLoggedNorStoredInClear creates tokens through the API,
// uses them (in the header, and in a query string where they do not
// belong), uses wrong ones, and then looks for every secret in the
// server's debug log, in the responses that should not carry it and in
// the raw bytes of the database files. The log must hold a line for
// every request: a search of an empty log proves nothing.
func TestSecretsNeitherLoggedNorStoredInClear(t *testing.T) {
	f := newFixture(t)
	requests := 0
	do := func(method, path, secret string, body []byte) (int, string, []byte) {
		requests++
		return f.do(t, method, path, secret, body)
	}
	secrets := []string{}
	for role := range f.tokens {
		secrets = append(secrets, f.tokens[role])
	}
	for i, role := range []string{"member", "viewer", "team-admin"} {
		body := fmt.Sprintf(`{"user":"user%d","team":"a","role":%q,"name":"t%d"}`, i, role, i)
		code, _, resp := do("POST", "/api/v1/tokens", f.tokens[store.RoleAdmin], []byte(body))
		if code != http.StatusCreated {
			t.Fatalf("create token: %d %s", code, resp)
		}
		var tok struct{ Secret string }
		if err := json.Unmarshal(resp, &tok); err != nil || tok.Secret == "" {
			t.Fatalf("create token: %s", resp)
		}
		secrets = append(secrets, tok.Secret)
		if code, _, resp := do("GET", "/api/v1/jobs", tok.Secret, nil); code != http.StatusOK {
			t.Fatalf("use token: %d %s", code, resp)
		}
		// A secret pasted into a query string is not logged either.
		if code, _, resp := do("GET", "/api/v1/jobs?token="+tok.Secret, tok.Secret, nil); code != http.StatusOK {
			t.Fatalf("use token with a query: %d %s", code, resp)
		}
	}
	wrong := store.TokenPrefix + "this-is-not-a-token-but-looks-like-one"
	secrets = append(secrets, wrong)
	code, _, resp := do("GET", "/api/v1/jobs", wrong, nil)
	if code != http.StatusUnauthorized || bytes.Contains(resp, []byte(wrong)) {
		t.Fatalf("wrong token: %d %s", code, resp)
	}
	// Listing tokens, if the route exists, shows no secret either.
	if code, _, resp := do("GET", "/api/v1/tokens", f.tokens[store.RoleAdmin], nil); code == http.StatusOK {
		for _, s := range secrets {
			if bytes.Contains(resp, []byte(s)) {
				t.Errorf("token listing shows a secret")
			}
		}
	}
	// The files while the server runs (the WAL holds the recent writes)
	// and after it closed (the WAL checkpointed into the main file).
	var files [][]byte
	read := func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if b, err := os.ReadFile(f.dbPath + suffix); err == nil {
				files = append(files, b)
			}
		}
	}
	read()
	f.ts.Close()
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	read()
	logs := f.logs.String()
	if len(files) == 0 {
		t.Fatal("no database file to inspect")
	}
	// The log is the server's: a debug line per request, the refused
	// ones and those authenticated (named by token id) among them.
	var logged, refused, named int
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var e struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
			Token  string `json:"token"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "api: request" {
			continue
		}
		logged++
		if e.Status == http.StatusUnauthorized {
			refused++
		}
		if e.Token != "" {
			named++
		}
	}
	if logged < requests || refused == 0 || named == 0 {
		t.Fatalf("the debug log has %d request lines (%d refused, %d naming their token) for %d requests, in %d bytes; want one per request",
			logged, refused, named, requests, len(logs))
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a token secret is in the log")
		}
		for _, b := range files {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("a token secret is in the database file in clear")
			}
		}
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "tokens created, used (also in a query string) and guessed; the server's debug log, responses and raw database files searched for every secret",
		Amount: fmt.Sprintf("%d secrets, %d requests, %d log lines of them (%d bytes), %d database files", len(secrets), requests, logged, len(logs), len(files)),
		Held:   "no secret in the log, in any response but its creation, or in the database in clear"})
}

// TestCrossOriginPostsRefusedOnEveryWriteRoute sends every POST route of
// the OpenAPI document what a page of another origin can send without a
// CORS preflight — a urlencoded form, multipart, text/plain carrying
// JSON, an untyped body — with the route's own token, and a form type on
// an empty body: each is a 415 naming Content-Type, and nothing stored
// changes.
func TestCrossOriginPostsRefusedOnEveryWriteRoute(t *testing.T) {
	f := newFixture(t)
	before := snapshot(t, f.st)
	forms := []struct{ ctype, body string }{
		{"application/x-www-form-urlencoded", `name=x&team=a&gpus=1`},
		{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"gpus\"\r\n\r\n1\r\n--b--\r\n"},
		{"text/plain", `{"id":"c","name":"c","gpus":1,"user":"eve","role":"admin","offer":"x"}`},
		{"", `{"id":"c","name":"c","gpus":1,"user":"eve","role":"admin","offer":"x"}`},
		{"application/x-www-form-urlencoded", ``},
	}
	routes, requests := 0, 0
	for _, op := range f.operations(t) {
		if op.method != http.MethodPost {
			continue
		}
		routes++
		secret := f.tokens[store.RoleAdmin]
		if op.roles != nil && !slices.Contains(op.roles, store.RoleAdmin) {
			secret = f.tokens[op.roles[0]]
		}
		for _, form := range forms {
			req, err := http.NewRequest(op.method, f.ts.URL+fill(op.path, "ja"), strings.NewReader(form.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+secret)
			if form.ctype != "" {
				req.Header.Set("Content-Type", form.ctype)
			}
			resp, err := f.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Error struct{ Code, Field string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			requests++
			if resp.StatusCode != http.StatusUnsupportedMediaType || e.Error.Field != "Content-Type" {
				t.Errorf("%s %s as %q with %d bytes: %d %+v, want 415 naming Content-Type", op.method, op.path, form.ctype, len(form.body), resp.StatusCode, e.Error)
			}
		}
	}
	if routes == 0 {
		t.Fatal("no POST route")
	}
	if after := snapshot(t, f.st); after != before {
		t.Errorf("stored data changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "what another origin's page can post without a preflight (form, multipart, text/plain, untyped) to every POST route, with a valid token",
		Amount: fmt.Sprintf("%d routes, %d requests", routes, requests), Held: "415 naming Content-Type on each, nothing stored changed"})
}

// TestTokenWithWhitespaceRefused sends every protected route the admin's
// secret with whitespace that survives HTTP/1.1 header parsing (a doubled
// space after Bearer, a space inside): each is a 401, never a match.
func TestTokenWithWhitespaceRefused(t *testing.T) {
	f := newFixture(t)
	secret := f.tokens[store.RoleAdmin]
	variants := []string{" " + secret, "\t" + secret, secret[:6] + " " + secret[6:]}
	routes, requests := 0, 0
	for _, op := range f.operations(t) {
		if op.roles == nil {
			continue
		}
		routes++
		for _, v := range variants {
			var body []byte
			if op.request != nil {
				body = []byte(`{}`)
			}
			code, _, resp := f.do(t, op.method, fill(op.path, "ja"), v, body)
			requests++
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s with Bearer %q: %d, want 401: %.200s", op.method, op.path, v[:min(len(v), 10)]+"…", code, resp)
			}
		}
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "the admin's token with whitespace before or inside it on every protected route",
		Amount: fmt.Sprintf("%d routes × %d variants = %d requests", routes, len(variants), requests), Held: "401 on each"})
}
