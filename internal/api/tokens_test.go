package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func tokenIDs(t *testing.T, b []byte) []string {
	t.Helper()
	var p TokensPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	var ids []string
	for _, tok := range p.Tokens {
		ids = append(ids, tok.ID)
	}
	return ids
}

// TestTokenListAndRevoke: listings never carry a secret, a team-admin
// sees and revokes its own team's tokens only, and a revoked token is a
// 401 on its very next request.
func TestTokenListAndRevoke(t *testing.T) {
	f := newFixture(t)
	code, b, _ := f.call(t, "admin", "GET", "/api/v1/tokens", "")
	if got := strings.Join(tokenIDs(t, b), ","); code != 200 || got != "t-admin,t-agent,t-member,t-other,t-team-admin,t-viewer" {
		t.Errorf("admin list: %d %s", code, got)
	}
	for secret := range strings.SplitSeq(strings.Join(mapValues(f.tokens), " "), " ") {
		if secret != "" && strings.Contains(string(b), secret) {
			t.Fatalf("a listing carries a secret: %s", b)
		}
	}
	if strings.Contains(string(b), `"secret"`) || strings.Contains(string(b), `"hash"`) || !strings.Contains(string(b), `"prefix": "`+store.SecretPrefix(f.tokens["other"])+`"`) {
		t.Errorf("admin list fields: %s", b)
	}
	code, b, _ = f.call(t, "team-admin", "GET", "/api/v1/tokens", "")
	if got := strings.Join(tokenIDs(t, b), ","); code != 200 || got != "t-member,t-team-admin,t-viewer" {
		t.Errorf("team-admin list: %d %s", code, got)
	}
	code, b, _ = f.call(t, "team-admin", "GET", "/api/v1/tokens?team=b", "")
	if code != 200 || len(tokenIDs(t, b)) != 0 {
		t.Errorf("team-admin lists team b: %d %s", code, b)
	}

	// Another team's token and a missing one answer alike.
	_, other, _ := f.call(t, "team-admin", "POST", "/api/v1/tokens/t-other/revoke", "")
	_, missing, _ := f.call(t, "team-admin", "POST", "/api/v1/tokens/nope/revoke", "")
	if strings.Replace(string(other), "t-other", "nope", 1) != string(missing) {
		t.Errorf("another team's token %s differs from a missing one %s", other, missing)
	}
	if code, b, _ := f.call(t, "other", "GET", "/api/v1/jobs", ""); code != 200 {
		t.Fatalf("team b's token after a team-admin of a tried to revoke it: %d %s", code, b)
	}

	if code, b, _ := f.call(t, "member", "GET", "/api/v1/jobs", ""); code != 200 {
		t.Fatalf("member before revocation: %d %s", code, b)
	}
	f.clk.Advance(90e9)
	code, b, _ = f.call(t, "team-admin", "POST", "/api/v1/tokens/t-member/revoke", "")
	var v TokenInfoView
	if code != 200 || json.Unmarshal(b, &v) != nil || v.Active || !v.Revoked.Equal(t0.Add(90e9)) {
		t.Fatalf("revoke: %d %s", code, b)
	}
	if code, b, _ := f.call(t, "member", "GET", "/api/v1/jobs", ""); code != 401 {
		t.Errorf("revoked token: %d %s, want 401", code, b)
	}
	if code, _, _ := f.call(t, "team-admin", "POST", "/api/v1/tokens/t-member/revoke", ""); code != 200 {
		t.Errorf("revoke twice: %d", code)
	}
	code, b, _ = f.call(t, "team-admin", "GET", "/api/v1/tokens?active=true", "")
	if got := strings.Join(tokenIDs(t, b), ","); code != 200 || got != "t-team-admin,t-viewer" {
		t.Errorf("active tokens after revocation: %d %s", code, got)
	}
	// Audited once, with the actor, and in team a's own trail.
	code, b, _ = f.call(t, "team-admin", "GET", "/api/v1/events?kind=audit.token_revoked", "")
	var ev EventsPage
	if code != 200 || json.Unmarshal(b, &ev) != nil || len(ev.Events) != 1 || ev.Events[0].Subject != "t-member" || ev.Events[0].Attrs["actor"] != "u-team-admin" {
		t.Errorf("audit of the revocation: %d %s", code, b)
	}
	if toks, err := f.st.Tokens().ListTokens(context.Background(), store.TokenFilter{User: "u-member"}); err != nil || toks[0].Revoked.IsZero() {
		t.Errorf("stored token: %+v %v", toks, err)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestEventsByTeam: team roles read their own team's trail and nothing of
// another team's or of the fleet's.
func TestEventsByTeam(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.Events().AppendEvents(ctx,
		core.Event{At: t0, Kind: "place", Subject: "ja", Reason: "best fit on L1"},
		core.Event{At: t0, Kind: "place", Subject: "jb", Reason: "best fit on L2"},
		core.Event{At: t0, Kind: "acquire", Subject: "L1", Reason: "demand"}); err != nil {
		t.Fatal(err)
	}
	if code, b, _ := f.call(t, "admin", "POST", "/api/v1/jobs/jb/cancel", ""); code != 200 {
		t.Fatalf("cancel jb: %d %s", code, b)
	}
	if code, b, _ := f.call(t, "member", "POST", "/api/v1/jobs/ja/cancel", ""); code != 200 {
		t.Fatalf("cancel ja: %d %s", code, b)
	}
	subjects := func(role, query string) string {
		t.Helper()
		code, b, _ := f.call(t, role, "GET", "/api/v1/events"+query, "")
		var p EventsPage
		if code != 200 || json.Unmarshal(b, &p) != nil {
			t.Fatalf("%s events: %d %s", role, code, b)
		}
		var out []string
		for _, e := range p.Events {
			out = append(out, e.Kind+":"+e.Subject)
		}
		return strings.Join(out, ",")
	}
	for _, role := range []string{"team-admin", "member", "viewer"} {
		if got := subjects(role, ""); got != "place:ja,job.cancel_requested:ja" {
			t.Errorf("%s sees %s", role, got)
		}
		if got := subjects(role, "?team=b"); got != "" {
			t.Errorf("%s asks for team b and sees %s", role, got)
		}
	}
	if got := subjects("other", ""); got != "place:jb,job.cancel_requested:jb" {
		t.Errorf("team b's member sees %s", got)
	}
	if got := subjects("admin", "?team=b"); got != "place:jb,job.cancel_requested:jb" {
		t.Errorf("admin filters team b: %s", got)
	}
	if got := subjects("admin", "?kind=acquire"); got != "acquire:L1" {
		t.Errorf("admin sees fleet events: %s", got)
	}
}
