package storetest

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func testTeams(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	a, b := team("a"), team("b")
	b.Quotas = nil
	ok(t, s.Teams().CreateTeam(c, b), "create b")
	ok(t, s.Teams().CreateTeam(c, a), "create a")

	got, err := s.Teams().GetTeam(c, "a")
	ok(t, err, "get a")
	diff(t, "team a", a, got)

	list, err := s.Teams().ListTeams(c)
	ok(t, err, "list")
	diff(t, "teams", []core.Team{a, b}, list)

	wantErr(t, s.Teams().CreateTeam(c, team("a")), store.ErrConflict, "create a twice")
	_, err = s.Teams().GetTeam(c, "nope")
	wantErr(t, err, store.ErrNotFound, "get missing")
	wantErr(t, s.Teams().UpdateTeam(c, team("nope")), store.ErrNotFound, "update missing")

	// Update replaces everything, quotas included (order kept).
	a.Name, a.Cohort, a.Weight, a.MonthlyBudget = "Renamed", "prod", 5, 0
	a.Quotas = []core.Quota{{GPUClass: "L4", Guaranteed: 500, BorrowLimit: 0, LendLimit: 0}, {GPUClass: "H100", Guaranteed: 1000, BorrowLimit: 2000, LendLimit: -1}}
	ok(t, s.Teams().UpdateTeam(c, a), "update a")
	got, err = s.Teams().GetTeam(c, "a")
	ok(t, err, "get a after update")
	diff(t, "updated team", a, got)

	a.Quotas = nil
	ok(t, s.Teams().UpdateTeam(c, a), "clear quotas")
	got, err = s.Teams().GetTeam(c, "a")
	ok(t, err, "get a after clearing")
	diff(t, "team without quotas", a, got)
}

func testUsers(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml", "web")
	admin := store.User{ID: "root", Name: "Root", Email: "root@example.com", Role: store.RoleAdmin, Created: at(0)}
	alice := store.User{ID: "alice", Team: "ml", Name: "Alice", Email: "alice@example.com", Role: store.RoleMember, Created: at(1)}
	bob := store.User{ID: "bob", Team: "web", Name: "Bob", Role: store.RoleViewer, Created: at(2)}
	carol := store.User{ID: "carol", Team: "ml", Name: "Carol", Role: store.RoleTeamAdmin, Created: at(3)}
	for _, u := range []store.User{admin, alice, bob, carol} {
		ok(t, s.Users().CreateUser(c, u), "create "+u.ID)
	}
	got, err := s.Users().GetUser(c, "alice")
	ok(t, err, "get alice")
	diff(t, "alice", alice, got)

	ml, err := s.Users().ListUsers(c, "ml")
	ok(t, err, "list ml")
	diff(t, "ml users", []store.User{alice, carol}, ml)
	all, err := s.Users().ListUsers(c, "")
	ok(t, err, "list all")
	diff(t, "all users", []store.User{alice, bob, carol, admin}, all)

	wantErr(t, s.Users().CreateUser(c, alice), store.ErrConflict, "create alice twice")
	wantErr(t, s.Users().CreateUser(c, store.User{ID: "dan", Team: "nope", Role: store.RoleMember, Created: at(4)}), store.ErrNotFound, "unknown team")
	_, err = s.Users().GetUser(c, "nope")
	wantErr(t, err, store.ErrNotFound, "get missing")

	alice.Team, alice.Role, alice.Disabled = "web", store.RoleViewer, at(10)
	ok(t, s.Users().UpdateUser(c, store.User{ID: alice.ID, Team: alice.Team, Name: alice.Name, Email: alice.Email, Role: alice.Role, Disabled: alice.Disabled}), "update alice")
	got, err = s.Users().GetUser(c, "alice")
	ok(t, err, "get alice after update")
	diff(t, "updated alice (created kept)", alice, got)
	wantErr(t, s.Users().UpdateUser(c, store.User{ID: "nope", Role: store.RoleAdmin}), store.ErrNotFound, "update missing")
	wantErr(t, s.Users().UpdateUser(c, store.User{ID: "bob", Team: "nope", Role: store.RoleViewer}), store.ErrNotFound, "update to unknown team")
}

func testTokens(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	ok(t, s.Users().CreateUser(c, store.User{ID: "alice", Team: "ml", Name: "Alice", Role: store.RoleMember, Created: at(0)}), "create alice")

	secret, hash, err := store.NewToken()
	ok(t, err, "new token")
	if len(secret) < 40 || secret[:len(store.TokenPrefix)] != store.TokenPrefix {
		t.Errorf("secret %q: want %q and 256 random bits", secret, store.TokenPrefix)
	}
	if store.HashToken(secret) != hash {
		t.Error("HashToken(secret) differs from NewToken's hash")
	}
	other, _, _ := store.NewToken()
	if other == secret {
		t.Error("two tokens alike")
	}

	if p := store.SecretPrefix(secret); len(p) != store.PrefixLen || p != secret[:store.PrefixLen] {
		t.Errorf("SecretPrefix(%q) = %q", secret, p)
	}
	tok := store.Token{ID: "t1", Hash: hash, User: "alice", Team: "ml", Role: store.RoleMember, Name: "laptop", Prefix: store.SecretPrefix(secret), Created: at(0), Expires: at(60)}
	ok(t, s.Tokens().CreateToken(c, tok), "create t1")
	agent := store.Token{ID: "t2", Hash: store.HashToken("agent-secret"), Role: store.RoleAgent, Name: "node agents", Created: at(0)}
	ok(t, s.Tokens().CreateToken(c, agent), "create agent token")

	got, err := s.Tokens().TokenByHash(c, store.HashToken(secret), at(30))
	ok(t, err, "token by hash")
	diff(t, "token", tok, got)
	_, err = s.Tokens().TokenByHash(c, store.HashToken(secret), at(60))
	wantErr(t, err, store.ErrNotFound, "expired token")
	_, err = s.Tokens().TokenByHash(c, store.HashToken("wrong"), at(30))
	wantErr(t, err, store.ErrNotFound, "unknown secret")

	wantErr(t, s.Tokens().CreateToken(c, store.Token{ID: "t3", Hash: hash, User: "alice", Team: "ml", Role: store.RoleMember, Created: at(0)}), store.ErrConflict, "same hash twice")
	wantErr(t, s.Tokens().CreateToken(c, store.Token{ID: "t1", Hash: store.HashToken("x"), User: "alice", Team: "ml", Role: store.RoleMember, Created: at(0)}), store.ErrConflict, "same id twice")
	wantErr(t, s.Tokens().CreateToken(c, store.Token{ID: "t4", Hash: store.HashToken("y"), User: "nobody", Role: store.RoleAdmin, Created: at(0)}), store.ErrNotFound, "unknown user")

	ok(t, s.Tokens().TouchToken(c, "t1", at(5)), "touch")
	ok(t, s.Tokens().TouchToken(c, "t1", at(3)), "touch earlier (ignored)")
	ok(t, s.Tokens().RevokeToken(c, "t1", at(7)), "revoke")
	ok(t, s.Tokens().RevokeToken(c, "t1", at(9)), "revoke again")
	_, err = s.Tokens().TokenByHash(c, store.HashToken(secret), at(8))
	wantErr(t, err, store.ErrNotFound, "revoked token")
	wantErr(t, s.Tokens().RevokeToken(c, "nope", at(7)), store.ErrNotFound, "revoke missing")
	wantErr(t, s.Tokens().TouchToken(c, "nope", at(7)), store.ErrNotFound, "touch missing")

	tok.LastUsed, tok.Revoked = at(5), at(7)
	list, err := s.Tokens().ListTokens(c, store.TokenFilter{User: "alice"})
	ok(t, err, "list alice's tokens")
	diff(t, "alice's tokens", []store.Token{tok}, list)
	list, err = s.Tokens().ListTokens(c, store.TokenFilter{})
	ok(t, err, "list all tokens")
	diff(t, "all tokens", []store.Token{tok, agent}, list)
	list, err = s.Tokens().ListTokens(c, store.TokenFilter{Team: "ml"})
	ok(t, err, "list team ml's tokens")
	diff(t, "team ml's tokens", []store.Token{tok}, list)
	wantField(t, s.Tokens().CreateToken(c, store.Token{ID: "t5", Hash: store.HashToken("z"), Role: store.RoleAgent, Prefix: secret, Created: at(0)}), "prefix", "-", "a whole secret as prefix")

	fresh := tok
	fresh.Revoked = time.Time{}
	if !agent.Active(at(1000)) || tok.Active(at(6)) || !fresh.Active(at(59)) || fresh.Active(at(60)) {
		t.Error("Token.Active: want active unless revoked or expired")
	}
}
