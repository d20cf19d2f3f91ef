package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Join tokens. Each lease the loop acquires from a provider gets a
// one-time join token for its machine's agent (provider.Bootstrap): the
// agent joins with it as that lease's machine and gets a credential of
// its own (internal/agentapi agentJoin); the token then joins nothing else.
// The store keeps only its hash, so the secret lives in this loop's
// memory while the lease waits for its provider: a retried Acquire (the
// provider failed, the next tick asks again) carries the same token
// while it has more than half its life left, a fresh one after that or
// after a restart. A token handed out before stays good until it
// expires, so a machine a provider launched for an earlier call (it
// answers the retry with that machine) still joins. When a lease ends,
// its join tokens and its agent's credential are revoked.

// DefaultJoinMargin is how much longer than the boot timeout a join
// token lives when AgentConfig.JoinTTL is zero: the machine's
// provisioning comes before the boot timeout's count starts.
const DefaultJoinMargin = 20 * time.Minute

// joinSecret is a join token the loop minted and has not yet seen used.
type joinSecret struct {
	secret  string
	expires time.Time
}

// bootstrap returns what lease le's machine joins with: nothing when the
// loop has no public URL (the simulator, tests) or the lease is a joined
// machine's (its agent is there already).
func (l *Loop) bootstrap(ctx context.Context, le *engine.Lease, now time.Time) (provider.Bootstrap, error) {
	if l.cfg.PublicURL == "" || engine.IsJoinedLease(le.ClientToken) {
		return provider.Bootstrap{}, nil
	}
	b := provider.Bootstrap{ServerURL: l.cfg.PublicURL, LeaseID: le.ID, BinaryURL: l.cfg.BinaryURL}
	ttl := l.agentConfig().JoinTTL
	if j, ok := l.joins[le.ID]; ok && j.expires.Sub(now) > ttl/2 {
		b.JoinToken, b.Expires = j.secret, j.expires
		return b, nil
	}
	secret, hash, err := store.NewToken()
	if err != nil {
		return b, err
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return b, err
	}
	id := "join-" + hex.EncodeToString(r[:])
	expires := now.Add(ttl)
	err = l.cfg.Store.Tx(ctx, func(tx store.Tx) error {
		if err := tx.Tokens().CreateToken(ctx, store.Token{ID: id, Hash: hash, Role: store.RoleAgent, Name: "join token of lease " + le.ID,
			Prefix: store.SecretPrefix(secret), Created: now, Expires: expires, Kind: store.TokenJoin, Lease: le.ID}); err != nil {
			return err
		}
		_, err := tx.Events().AppendEvents(ctx, core.Event{At: now, Kind: "audit.token_created", Subject: id,
			Reason: fmt.Sprintf("lease %s acquired: its machine's agent joins once with this token, until %s", le.ID, expires.UTC().Format(time.RFC3339)),
			Attrs:  map[string]string{"actor": "gpufleet", "role": string(store.RoleAgent), "lease": le.ID}})
		return err
	})
	if err != nil {
		return b, fmt.Errorf("join token of lease %s: %w", le.ID, err)
	}
	l.joins[le.ID] = joinSecret{secret: secret, expires: expires}
	b.JoinToken, b.Expires = secret, expires
	return b, nil
}

// revokeEnded revokes the join tokens and agent credentials of the
// leases in ended, in tx.
func revokeEnded(ctx context.Context, tx store.Tx, ended []string, now time.Time) error {
	for _, id := range ended {
		if _, err := tx.Tokens().RevokeLeaseTokens(ctx, id, nil, now); err != nil {
			return err
		}
	}
	return nil
}
