package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TokenInfoView is a token as listings show it: never the secret (the
// store has only its hash), but its public prefix, owner, scope and
// times, so that a team-admin can tell which token to revoke.
type TokenInfoView struct {
	ID       string    `json:"id"`
	Prefix   string    `json:"prefix,omitempty"`
	User     string    `json:"user,omitempty"`
	Team     string    `json:"team,omitempty"`
	Role     string    `json:"role"`
	Name     string    `json:"name"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	LastUsed time.Time `json:"last_used"`
	Revoked  time.Time `json:"revoked"`
	// Active is false once revoked or expired.
	Active bool `json:"active"`
	// Kind, Lease and Agent say what an agent token is for: a lease's
	// join token ("join", claimed by Agent once used) or an agent's own
	// credential ("agent"); empty for a shared token.
	Kind  string `json:"kind,omitempty"`
	Lease string `json:"lease,omitempty"`
	Agent string `json:"agent,omitempty"`
}

// NewTokenInfoView renders t as of now.
func NewTokenInfoView(t *store.Token, now time.Time) TokenInfoView {
	return TokenInfoView{ID: t.ID, Prefix: t.Prefix, User: t.User, Team: t.Team, Role: string(t.Role), Name: t.Name,
		Created: t.Created.UTC(), Expires: t.Expires.UTC(), LastUsed: t.LastUsed.UTC(), Revoked: t.Revoked.UTC(), Active: t.Active(now),
		Kind: string(t.Kind), Lease: t.Lease, Agent: t.Agent}
}

// TokensPage is the response of GET /api/v1/tokens.
type TokensPage struct {
	Tokens []TokenInfoView `json:"tokens"`
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
	f := store.TokenFilter{Team: q.Get("team"), User: q.Get("user")}
	if p.Role != store.RoleAdmin {
		if f.Team != "" && f.Team != p.Team {
			httpapi.WriteJSON(w, http.StatusOK, TokensPage{Tokens: []TokenInfoView{}})
			return
		}
		f.Team = p.Team
	}
	toks, err := s.store.Tokens().ListTokens(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	now := s.clock.Now()
	out := TokensPage{Tokens: []TokenInfoView{}}
	for i := range toks {
		if q.Get("active") == "true" && !toks[i].Active(now) {
			continue
		}
		out.Tokens = append(out.Tokens, NewTokenInfoView(&toks[i], now))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// visibleToken returns the token with id if p may manage it: an admin
// any, a team-admin its team's; another team's token is a 404 exactly as
// a missing one.
func (s *Server) visibleToken(w http.ResponseWriter, r *http.Request) (store.Token, bool) {
	id := r.PathValue("id")
	p, _ := httpapi.PrincipalFrom(r.Context())
	f := store.TokenFilter{}
	if p.Role != store.RoleAdmin {
		f.Team = p.Team
	}
	toks, err := s.store.Tokens().ListTokens(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "id")
		return store.Token{}, false
	}
	for _, t := range toks {
		if t.ID == id {
			return t, true
		}
	}
	httpapi.WriteError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("token %q not found", id))
	return store.Token{}, false
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	t, ok := s.visibleToken(w, r)
	if !ok {
		return
	}
	now := s.clock.Now()
	err := s.store.Tx(r.Context(), func(tx store.Tx) error {
		if err := tx.Tokens().RevokeToken(r.Context(), t.ID, now); err != nil {
			return err
		}
		if !t.Revoked.IsZero() {
			return nil // already revoked: nothing new to audit
		}
		return audit(r, tx, now, "audit.token_revoked", t.ID, "token revoked through the API",
			map[string]string{"team": t.Team, "token_role": string(t.Role), "token_user": t.User})
	})
	if errors.Is(err, store.ErrNotFound) {
		httpapi.WriteError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("token %q not found", t.ID))
		return
	}
	if err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	if t.Revoked.IsZero() {
		t.Revoked = now
	}
	httpapi.WriteJSON(w, http.StatusOK, NewTokenInfoView(&t, now))
}

// AdminUser is the user id of the admin that EnsureAdminToken creates.
const AdminUser = "admin"

// EnsureAdminToken makes sure an active admin token exists. On first start
// (none exists) it creates the admin user and a token and returns the
// token's secret, to be shown once; otherwise it returns "".
func EnsureAdminToken(ctx context.Context, st store.Store, clk clock.Clock) (string, error) {
	now := clk.Now()
	toks, err := st.Tokens().ListTokens(ctx, store.TokenFilter{})
	if err != nil {
		return "", fmt.Errorf("ensure admin token: %w", err)
	}
	for _, t := range toks {
		if t.Role == store.RoleAdmin && t.Active(now) {
			return "", nil
		}
	}
	secret, hash, err := store.NewToken()
	if err != nil {
		return "", fmt.Errorf("ensure admin token: %w", err)
	}
	id, err := httpapi.NewID("tok")
	if err != nil {
		return "", fmt.Errorf("ensure admin token: %w", err)
	}
	err = st.Tx(ctx, func(tx store.Tx) error {
		if _, err := tx.Users().GetUser(ctx, AdminUser); errors.Is(err, store.ErrNotFound) {
			if err := tx.Users().CreateUser(ctx, store.User{ID: AdminUser, Name: "admin", Role: store.RoleAdmin, Created: now}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if err := tx.Tokens().CreateToken(ctx, store.Token{ID: id, Hash: hash, User: AdminUser, Role: store.RoleAdmin, Name: "bootstrap admin", Prefix: store.SecretPrefix(secret), Created: now}); err != nil {
			return err
		}
		_, err := tx.Events().AppendEvents(ctx, core.Event{At: now, Kind: "audit.token_created", Subject: id,
			Reason: "first start: no admin token in the store", Attrs: map[string]string{"actor": "gpufleet", "role": string(store.RoleAdmin)}})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("ensure admin token: %w", err)
	}
	return secret, nil
}

// MintAgentToken stores a new agent token named name and returns its id
// and secret. The secret is never stored or printed: the caller hands it
// to the agents it starts (serve's hosted agents) and revokes the token
// when they stop.
func MintAgentToken(ctx context.Context, st store.Store, clk clock.Clock, name, reason string) (id, secret string, err error) {
	now := clk.Now()
	secret, hash, err := store.NewToken()
	if err != nil {
		return "", "", fmt.Errorf("mint agent token: %w", err)
	}
	if id, err = httpapi.NewID("tok"); err != nil {
		return "", "", fmt.Errorf("mint agent token: %w", err)
	}
	err = st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.Tokens().CreateToken(ctx, store.Token{ID: id, Hash: hash, Role: store.RoleAgent, Name: name, Prefix: store.SecretPrefix(secret), Created: now}); err != nil {
			return err
		}
		_, err := tx.Events().AppendEvents(ctx, core.Event{At: now, Kind: "audit.token_created", Subject: id,
			Reason: reason, Attrs: map[string]string{"actor": "gpufleet", "role": string(store.RoleAgent)}})
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("mint agent token: %w", err)
	}
	return id, secret, nil
}
