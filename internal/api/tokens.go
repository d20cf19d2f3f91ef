package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

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
	p, _ := PrincipalFrom(r.Context())
	f := store.TokenFilter{Team: q.Get("team"), User: q.Get("user")}
	if p.Role != store.RoleAdmin {
		if f.Team != "" && f.Team != p.Team {
			writeJSON(w, http.StatusOK, TokensPage{Tokens: []TokenInfoView{}})
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
	writeJSON(w, http.StatusOK, out)
}

// visibleToken returns the token with id if p may manage it: an admin
// any, a team-admin its team's; another team's token is a 404 exactly as
// a missing one.
func (s *Server) visibleToken(w http.ResponseWriter, r *http.Request) (store.Token, bool) {
	id := r.PathValue("id")
	p, _ := PrincipalFrom(r.Context())
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
	writeError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("token %q not found", id))
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
		writeError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("token %q not found", t.ID))
		return
	}
	if err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	if t.Revoked.IsZero() {
		t.Revoked = now
	}
	writeJSON(w, http.StatusOK, NewTokenInfoView(&t, now))
}
