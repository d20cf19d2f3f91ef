package sqlstore

import (
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

// TokenCacheTTL is how long a token read by its hash is answered from
// memory. Every request carries a token, so without the cache each one
// costs a query. A write to tokens through this store (revoke, claim,
// the revocation of a lease's tokens) clears the cache once it commits;
// where other processes write the same database (SetTokenNotify), their
// writes clear it when their notice arrives, and the cache is off while
// no notice can arrive. The TTL bounds what a lost notice could cost.
const TokenCacheTTL = 10 * time.Second

// tokenCacheMax bounds the entries: past it the cache starts empty.
const tokenCacheMax = 100_000

// tokenCache holds active tokens by hash. A read that races a write is
// not kept: put takes the generation seen before the query, and every
// write moves the generation on after its commit.
type tokenCache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[store.TokenHash]cachedToken
	// off: other processes write the database and none of their notices
	// can arrive now (SetTokenNotify, TokensWatched).
	off bool
}

type cachedToken struct {
	tok store.Token
	at  time.Time // when it was read, on this process's clock
}

// get returns the token with hash when it was read within the TTL and is
// still active at now (its expiry is checked on every hit), and the
// generation a put of a fresh read must carry.
func (c *tokenCache) get(hash store.TokenHash, now time.Time) (store.Token, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || c.off || time.Since(e.at) >= TokenCacheTTL || !e.tok.Active(now) {
		return store.Token{}, false, c.gen
	}
	return e.tok, true, c.gen
}

// put keeps t, read at generation gen, unless a write has committed
// since.
func (c *tokenCache) put(t store.Token, gen uint64, read time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || c.off {
		return
	}
	if c.entries == nil || len(c.entries) >= tokenCacheMax {
		c.entries = map[store.TokenHash]cachedToken{}
	}
	c.entries[t.Hash] = cachedToken{tok: t, at: read}
}

// invalidate forgets every token: a write to tokens has committed (or
// may have).
func (c *tokenCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}

// SetTokenNotify makes the store tell other processes of its token
// writes: sql runs in each transaction that revokes or claims a token
// (PostgreSQL: a pg_notify, delivered when it commits). The token cache
// is off from now until TokensWatched(true).
func (s *Store) SetTokenNotify(sql string) {
	s.tokenNotify = sql
	s.TokensWatched(false)
}

// TokensWatched says whether the notices of other processes' token
// writes arrive (TokensChanged): the cache is on only while they do.
func (s *Store) TokensWatched(on bool) {
	c := &s.tokens
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
	c.off = !on
}

// TokensChanged is another process's notice that it wrote tokens.
func (s *Store) TokensChanged() { s.tokens.invalidate() }

// TokenCacheOn reports whether tokens are answered from the cache now.
func (s *Store) TokenCacheOn() bool {
	s.tokens.mu.Lock()
	defer s.tokens.mu.Unlock()
	return !s.tokens.off
}
