package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Role is what a user or a token may do.
type Role string

// The roles. An admin runs the whole fleet; a team-admin manages one team
// (its users, tokens, quotas' use); a member submits and cancels the
// team's jobs; a viewer only reads the team's data; an agent is a node
// agent joining, heartbeating and reporting samples.
const (
	RoleAdmin     Role = "admin"
	RoleTeamAdmin Role = "team-admin"
	RoleMember    Role = "member"
	RoleViewer    Role = "viewer"
	RoleAgent     Role = "agent"
)

// Roles lists every role, most powerful first.
var Roles = []Role{RoleAdmin, RoleTeamAdmin, RoleMember, RoleViewer, RoleAgent}

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", &core.FieldError{Field: "role", Value: s, Allowed: "one of admin, team-admin, member, viewer, agent"}
}

// TeamScoped reports whether r acts within one team and so needs one.
func (r Role) TeamScoped() bool {
	return r == RoleTeamAdmin || r == RoleMember || r == RoleViewer
}

// User is a person (or a service) that holds tokens.
type User struct {
	ID string
	// Team is empty for admins and agents, required for the other roles.
	Team    string
	Name    string
	Email   string
	Role    Role
	Created time.Time
	// Disabled is when the user was disabled; zero while active.
	Disabled time.Time
}

// Users keeps users.
type Users interface {
	// CreateUser stores a new user; an existing id is ErrConflict, an
	// unknown team ErrNotFound.
	CreateUser(ctx context.Context, u User) error
	// GetUser returns the user with id.
	GetUser(ctx context.Context, id string) (User, error)
	// ListUsers returns the users of team ordered by id; an empty team
	// lists every user.
	ListUsers(ctx context.Context, team string) ([]User, error)
	// UpdateUser replaces the user's team, name, email, role and
	// disabled time with u's; Created is kept.
	UpdateUser(ctx context.Context, u User) error
}

// ValidateUser reports the first problem with u's identity, team, role
// and text fields.
func ValidateUser(u *User) error {
	if err := CheckID("id", u.ID); err != nil {
		return err
	}
	if err := checkRoleTeam(u.Role, u.Team); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"name", u.Name}, {"email", u.Email}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// ValidateNewUser reports the first problem with a user about to be
// created: ValidateUser's, an id outside core.CheckName's rule (existing
// users keep theirs), and no creation time.
func ValidateNewUser(u *User) error {
	if err := ValidateUser(u); err != nil {
		return err
	}
	if err := core.CheckName("id", u.ID); err != nil {
		return err
	}
	if u.Created.IsZero() {
		return &core.FieldError{Field: "created", Value: "", Allowed: "the creation time"}
	}
	return nil
}

func checkRoleTeam(r Role, team string) error {
	if _, err := ParseRole(string(r)); err != nil {
		return &core.FieldError{Field: "role", Value: string(r), Allowed: "one of admin, team-admin, member, viewer, agent"}
	}
	if r.TeamScoped() && team == "" {
		return &core.FieldError{Field: "team", Value: "", Allowed: fmt.Sprintf("a team for role %s", r)}
	}
	return CheckOptionalID("team", team)
}

// TokenHash is the SHA-256 of a token's secret: the store never sees the
// secret itself.
type TokenHash [sha256.Size]byte

// HashToken returns the hash under which secret is stored.
func HashToken(secret string) TokenHash { return sha256.Sum256([]byte(secret)) }

// TokenPrefix starts every token secret, so that a leaked one is easy to
// recognise (and to scan for).
const TokenPrefix = "gpf_"

// NewToken returns a fresh random secret (256 bits, shown to its owner
// once) and the hash to store.
func NewToken() (secret string, hash TokenHash, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", TokenHash{}, fmt.Errorf("new token: %w", err)
	}
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, HashToken(secret), nil
}

// PrefixLen is how much of a secret SecretPrefix keeps: "gpf_" and six
// characters (36 of the secret's 256 bits).
const PrefixLen = len(TokenPrefix) + 6

// SecretPrefix returns the public start of secret.
func SecretPrefix(secret string) string {
	if len(secret) <= PrefixLen {
		return ""
	}
	return secret[:PrefixLen]
}

// Token is an API credential. It carries its own role and team, which may
// be narrower than its user's; agent tokens have no user.
type Token struct {
	ID   string
	Hash TokenHash
	// User is the owner, empty for agent tokens.
	User string
	Team string
	Role Role
	Name string
	// Prefix is the start of the secret (SecretPrefix), shown in
	// listings so that a token can be recognised without the secret.
	Prefix string
	// Created is when it was made; Expires when it stops working (zero:
	// never); Revoked when it was revoked (zero: not revoked); LastUsed
	// the last TouchToken.
	Created, Expires, Revoked, LastUsed time.Time
	// Kind tells an agent token's use: TokenShared (an admin's, for the
	// agents started by hand), TokenJoin (one lease's one-time join
	// token) or TokenAgent (one agent's own credential). Other roles'
	// tokens are TokenShared.
	Kind TokenKind
	// Lease is the lease a join token or an agent credential is for.
	Lease string
	// Agent is the agent id a join token was claimed by (empty while
	// unused), or the one agent an agent credential speaks for.
	Agent string
}

// TokenKind is what an agent token is for.
type TokenKind string

// The token kinds.
const (
	// TokenShared is an ordinary token; as an agent token it may join
	// agents of any id, each of which is then bound to it.
	TokenShared TokenKind = ""
	// TokenJoin is minted for one lease when it is acquired: it only
	// joins (a heartbeat), once, as that lease's machine, and expires
	// soon.
	TokenJoin TokenKind = "join"
	// TokenAgent is the credential an agent gets for a join token: it
	// speaks for its one agent id.
	TokenAgent TokenKind = "agent"
)

// Active reports whether t may be used at now.
func (t *Token) Active(now time.Time) bool {
	return t.Revoked.IsZero() && (t.Expires.IsZero() || now.Before(t.Expires))
}

// TokenFilter selects tokens; empty fields match everything.
type TokenFilter struct {
	User string
	Team string
}

// Tokens keeps API tokens by the hash of their secret.
type Tokens interface {
	// CreateToken stores a new token; an existing id or hash is
	// ErrConflict, an unknown user or team ErrNotFound.
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns the token with hash that is active at now;
	// unknown, revoked and expired tokens alike are ErrNotFound.
	TokenByHash(ctx context.Context, hash TokenHash, now time.Time) (Token, error)
	// ListTokens returns the tokens f selects, revoked ones included,
	// ordered by id.
	ListTokens(ctx context.Context, f TokenFilter) ([]Token, error)
	// RevokeToken revokes the token with id at at; revoking twice keeps
	// the first time.
	RevokeToken(ctx context.Context, id string, at time.Time) error
	// TouchToken records that the token was used at at (it only moves
	// forward).
	TouchToken(ctx context.Context, id string, at time.Time) error
	// GetToken returns the token with id, active or not.
	GetToken(ctx context.Context, id string) (Token, error)
	// ClaimToken binds the token with id to agent when it is bound to
	// none; it returns the agent the token is bound to afterwards (agent,
	// or the one that claimed it first).
	ClaimToken(ctx context.Context, id, agent string) (string, error)
	// RevokeLeaseTokens revokes, at at, the active join tokens and agent
	// credentials of lease but those in keep, and returns how many.
	RevokeLeaseTokens(ctx context.Context, lease string, keep []string, at time.Time) (int, error)
}

// ValidateToken reports the first problem with t.
func ValidateToken(t *Token) error {
	if err := CheckID("id", t.ID); err != nil {
		return err
	}
	if t.Hash == (TokenHash{}) {
		return &core.FieldError{Field: "hash", Value: "", Allowed: "the SHA-256 of the secret (HashToken)"}
	}
	if err := CheckOptionalID("user", t.User); err != nil {
		return err
	}
	if err := checkRoleTeam(t.Role, t.Team); err != nil {
		return err
	}
	if t.Role != RoleAgent && t.User == "" {
		return &core.FieldError{Field: "user", Value: "", Allowed: fmt.Sprintf("a user for role %s (only agent tokens have none)", t.Role)}
	}
	if err := CheckText("name", t.Name); err != nil {
		return err
	}
	if len(t.Prefix) > PrefixLen {
		return &core.FieldError{Field: "prefix", Value: abbrev(t.Prefix), Allowed: fmt.Sprintf("at most %d bytes (SecretPrefix)", PrefixLen)}
	}
	if err := CheckText("prefix", t.Prefix); err != nil {
		return err
	}
	if t.Created.IsZero() {
		return &core.FieldError{Field: "created", Value: "", Allowed: "the creation time"}
	}
	switch t.Kind {
	case TokenShared:
		if t.Lease != "" || t.Agent != "" {
			return &core.FieldError{Field: "lease", Value: abbrev(t.Lease + t.Agent), Allowed: "none for a shared token (only join tokens and agent credentials have a lease and an agent)"}
		}
	case TokenJoin, TokenAgent:
		if t.Role != RoleAgent {
			return &core.FieldError{Field: "role", Value: string(t.Role), Allowed: "agent for a " + string(t.Kind) + " token"}
		}
		if err := CheckID("lease", t.Lease); err != nil {
			return err
		}
		if t.Kind == TokenJoin && t.Expires.IsZero() {
			return &core.FieldError{Field: "expires", Value: "", Allowed: "an expiry time for a join token"}
		}
		if t.Kind == TokenAgent {
			if err := CheckID("agent", t.Agent); err != nil {
				return err
			}
		} else if err := CheckOptionalID("agent", t.Agent); err != nil {
			return err
		}
	default:
		return &core.FieldError{Field: "kind", Value: abbrev(string(t.Kind)), Allowed: "empty (shared), join or agent"}
	}
	if !t.Expires.IsZero() && !t.Expires.After(t.Created) {
		return &core.FieldError{Field: "expires", Value: t.Expires.UTC().Format(time.RFC3339), Allowed: "after the creation time, or zero for never"}
	}
	return nil
}
