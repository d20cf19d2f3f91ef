package sqlstore

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

func TestTokenCache(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	tok := store.Token{ID: "t1", Hash: store.HashToken("s1"), Role: store.RoleAdmin, Created: now, Expires: now.Add(time.Hour)}
	var c tokenCache

	_, hit, gen := c.get(tok.Hash, now)
	if hit {
		t.Fatal("hit in an empty cache")
	}
	c.put(tok, gen, time.Now())
	if got, hit, _ := c.get(tok.Hash, now); !hit || got != tok {
		t.Fatalf("after put: %+v, hit %v", got, hit)
	}
	// Expiry is checked on every hit.
	if _, hit, _ := c.get(tok.Hash, now.Add(time.Hour)); hit {
		t.Error("an expired token answered from the cache")
	}
	// A read that a write overtook is not kept: the reader saw the
	// generation before the write committed.
	_, _, gen = c.get(store.HashToken("s2"), now)
	c.invalidate()
	if _, hit, _ := c.get(tok.Hash, now); hit {
		t.Error("a token answered after invalidate")
	}
	stale := store.Token{ID: "t2", Hash: store.HashToken("s2"), Role: store.RoleAdmin, Created: now}
	c.put(stale, gen, time.Now())
	if _, hit, _ := c.get(stale.Hash, now); hit {
		t.Error("a read from before a write was kept")
	}
	// An entry older than the TTL is read again.
	_, _, gen = c.get(tok.Hash, now)
	c.put(tok, gen, time.Now().Add(-TokenCacheTTL))
	if _, hit, _ := c.get(tok.Hash, now); hit {
		t.Error("an entry past the TTL answered")
	}
}
