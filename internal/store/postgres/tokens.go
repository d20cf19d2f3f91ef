package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
)

// tokenChannel is the LISTEN/NOTIFY channel on which the replicas of one
// schema tell each other of token writes: a name per schema, since
// notices are database-wide.
func tokenChannel(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("gpufleet_tokens_%016x", h.Sum64())
}

// watchTokens keeps a connection of its own LISTENing on the token
// channel and clears the store's token cache on each notice, so that a
// token revoked through any replica stops working on this one within a
// notice's delivery. While it is not listening (connecting, or after
// its connection broke) the cache is off. It returns when ctx ends.
func (s *Store) watchTokens(ctx context.Context, cfg *pgx.ConnConfig, channel string) {
	wait := 100 * time.Millisecond
	for {
		listened, err := s.listenTokens(ctx, cfg, channel)
		s.TokensWatched(false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			wait = 100 * time.Millisecond // a break, not a server still down
		}
		s.log(fmt.Sprintf("token notices: %v; the token cache is off until the channel is back (retry in %s)", err, wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// listenTokens connects, LISTENs, turns the cache on and waits for
// notices until the connection fails or ctx ends; listened says it got
// as far as listening.
func (s *Store) listenTokens(ctx context.Context, cfg *pgx.ConnConfig, channel string) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(c)
	}()
	if _, err := conn.Exec(ctx, `LISTEN "`+channel+`"`); err != nil {
		return false, err
	}
	s.TokensWatched(true)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		s.TokensChanged()
	}
}
