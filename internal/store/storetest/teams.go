package storetest

import (
	"errors"
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
	testLeaseTokens(t, s)
}

var errRolledBack = errors.New("rolled back")

// testLeaseTokens: join tokens and agent credentials, bound to a lease
// and claimed by one agent.
func testLeaseTokens(t *testing.T, s store.Store) {
	c := ctx(t)
	join := store.Token{ID: "j1", Hash: store.HashToken("join-1"), Role: store.RoleAgent, Name: "join L1", Created: at(0), Expires: at(600), Kind: store.TokenJoin, Lease: "L1"}
	ok(t, s.Tokens().CreateToken(c, join), "create join token")
	join2 := join
	join2.ID, join2.Hash = "j2", store.HashToken("join-2")
	ok(t, s.Tokens().CreateToken(c, join2), "create a second join token")
	cred := store.Token{ID: "a1", Hash: store.HashToken("cred-1"), Role: store.RoleAgent, Name: "agent n1", Created: at(1), Kind: store.TokenAgent, Lease: "L1", Agent: "n1"}
	ok(t, s.Tokens().CreateToken(c, cred), "create agent credential")
	other := store.Token{ID: "j3", Hash: store.HashToken("join-3"), Role: store.RoleAgent, Name: "join L2", Created: at(0), Expires: at(600), Kind: store.TokenJoin, Lease: "L2"}
	ok(t, s.Tokens().CreateToken(c, other), "create join token of L2")

	got, err := s.Tokens().TokenByHash(c, store.HashToken("join-1"), at(10))
	ok(t, err, "join token by hash")
	diff(t, "join token", join, got)
	got, err = s.Tokens().GetToken(c, "a1")
	ok(t, err, "get credential")
	diff(t, "credential", cred, got)
	_, err = s.Tokens().GetToken(c, "nope")
	wantErr(t, err, store.ErrNotFound, "get missing token")

	// A token read once (a store may keep it) reads as written after
	// every write: its claim, its lease's revocation in a transaction.
	bound, err := s.Tokens().ClaimToken(c, "j1", "n1")
	ok(t, err, "claim")
	got, err = s.Tokens().TokenByHash(c, store.HashToken("join-1"), at(10))
	ok(t, err, "join token by hash after its claim")
	if got.Agent != "n1" {
		t.Errorf("join token read after its claim names agent %q, want n1", got.Agent)
	}
	_, err = s.Tokens().TokenByHash(c, store.HashToken("cred-1"), at(10))
	ok(t, err, "credential by hash")
	ok(t, s.Tx(c, func(tx store.Tx) error {
		_, err := tx.Tokens().RevokeLeaseTokens(c, "L1", []string{"j1", "j2"}, at(15))
		return err
	}), "revoke a1 in a transaction")
	_, err = s.Tokens().TokenByHash(c, store.HashToken("cred-1"), at(16))
	wantErr(t, err, store.ErrNotFound, "credential revoked in a transaction")
	_, err = s.Tokens().TokenByHash(c, store.HashToken("join-3"), at(10))
	ok(t, err, "L2's join token by hash")
	ok(t, s.Tx(c, func(tx store.Tx) error { return tx.Tokens().RevokeToken(c, "j3", at(16)) }), "revoke j3 in a transaction")
	_, err = s.Tokens().TokenByHash(c, store.HashToken("join-3"), at(17))
	wantErr(t, err, store.ErrNotFound, "join token revoked in a transaction")
	if err := s.Tx(c, func(tx store.Tx) error {
		if err := tx.Tokens().RevokeToken(c, "j2", at(16)); err != nil {
			return err
		}
		return errRolledBack
	}); !errors.Is(err, errRolledBack) {
		t.Errorf("a transaction that fails: %v, want %v", err, errRolledBack)
	}
	_, err = s.Tokens().TokenByHash(c, store.HashToken("join-2"), at(17))
	ok(t, err, "join token whose revocation rolled back")
	bound2, err := s.Tokens().ClaimToken(c, "j1", "n2")
	ok(t, err, "claim again")
	if bound != "n1" || bound2 != "n1" {
		t.Errorf("ClaimToken: %q then %q, want n1 both times (the first claim holds)", bound, bound2)
	}
	_, err = s.Tokens().ClaimToken(c, "nope", "n1")
	wantErr(t, err, store.ErrNotFound, "claim missing")

	n, err := s.Tokens().RevokeLeaseTokens(c, "L1", []string{"j1"}, at(20))
	ok(t, err, "revoke L1's tokens but j1")
	if n != 1 {
		t.Errorf("RevokeLeaseTokens: %d revoked, want 1 (j2; a1 was before)", n)
	}
	for id, revoked := range map[string]bool{"j1": false, "j2": true, "a1": true, "j3": true} {
		tk, err := s.Tokens().GetToken(c, id)
		ok(t, err, "get "+id)
		if !tk.Revoked.IsZero() != revoked {
			t.Errorf("token %s revoked at %v, want revoked %v", id, tk.Revoked, revoked)
		}
	}
	n, err = s.Tokens().RevokeLeaseTokens(c, "L1", nil, at(30))
	ok(t, err, "revoke the rest of L1's")
	if n != 1 {
		t.Errorf("RevokeLeaseTokens: %d revoked, want 1 (j1)", n)
	}

	for _, bad := range []struct {
		field string
		tok   store.Token
	}{
		{"expires", store.Token{ID: "b1", Hash: store.HashToken("b1"), Role: store.RoleAgent, Created: at(0), Kind: store.TokenJoin, Lease: "L1"}},
		{"lease", store.Token{ID: "b2", Hash: store.HashToken("b2"), Role: store.RoleAgent, Created: at(0), Expires: at(9), Kind: store.TokenJoin}},
		{"agent", store.Token{ID: "b3", Hash: store.HashToken("b3"), Role: store.RoleAgent, Created: at(0), Kind: store.TokenAgent, Lease: "L1"}},
		{"kind", store.Token{ID: "b4", Hash: store.HashToken("b4"), Role: store.RoleAgent, Created: at(0), Kind: "other"}},
		{"lease", store.Token{ID: "b5", Hash: store.HashToken("b5"), Role: store.RoleAgent, Created: at(0), Lease: "L1"}},
	} {
		wantField(t, s.Tokens().CreateToken(c, bad.tok), bad.field, "-", "bad "+bad.field)
	}

	// An agent keeps the credential it joined with; TouchAgent matches
	// only that one.
	a := store.Agent{ID: "n1", LeaseID: "L1", LastSeen: at(40), TokenID: "a1"}
	_, created, err := s.Agents().SaveHeartbeat(c, a)
	ok(t, err, "join n1")
	if _, hit, err := s.Agents().TouchAgent(c, store.Agent{ID: "n1", LastSeen: at(41), TokenID: "t2"}); err != nil || hit {
		t.Errorf("TouchAgent with another token: hit %v, err %v; want no match", hit, err)
	}
	if _, hit, err := s.Agents().TouchAgent(c, store.Agent{ID: "n1", LastSeen: at(42), TokenID: "a1"}); err != nil || !hit {
		t.Errorf("TouchAgent with its token: hit %v, err %v; want a match", hit, err)
	}
	prev, _, err := s.Agents().SaveHeartbeat(c, store.Agent{ID: "n1", LastSeen: at(43)})
	ok(t, err, "heartbeat without a token id")
	got2, err := s.Agents().GetAgent(c, "n1")
	ok(t, err, "get n1")
	if !created || prev.TokenID != "a1" || got2.TokenID != "a1" {
		t.Errorf("agent token: created %v, before %q, after %q; want a1 kept", created, prev.TokenID, got2.TokenID)
	}
	_, _, err = s.Agents().SaveHeartbeat(c, store.Agent{ID: "n1", LastSeen: at(44), TokenID: "t2"})
	ok(t, err, "rebind n1")
	if got2, _ = s.Agents().GetAgent(c, "n1"); got2.TokenID != "t2" {
		t.Errorf("rebound agent's token %q, want t2", got2.TokenID)
	}
}
