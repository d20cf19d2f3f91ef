package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/store"
)

// bootRecorder records the bootstraps Acquire is given, and fails the
// first fail calls as an unreachable provider would.
type bootRecorder struct {
	provider.Provider
	mu   sync.Mutex
	fail int
	reqs []provider.AcquireRequest
}

func (b *bootRecorder) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	fail := b.fail > 0
	b.fail--
	b.mu.Unlock()
	if fail {
		return provider.Machine{}, errors.New("provider unreachable")
	}
	return b.Provider.Acquire(ctx, req)
}

// TestJoinTokenBootstrap: with a public URL, each acquired lease's
// Acquire carries a join token for it: a retry carries the same one, a
// restarted loop a new one (the earlier one still good, in case the
// provider had launched for it), and the lease's end revokes them.
func TestJoinTokenBootstrap(t *testing.T) {
	w := newWorld(t)
	rec := &bootRecorder{fail: 2}
	w.configure = func(c *Config) {
		rec.Provider = w.cloud
		c.Provider, c.PublicURL, c.BinaryURL = rec, "http://10.0.0.1:8080", "http://10.0.0.1:8080/gpufleet"
	}
	w.restart()
	ctx := context.Background()
	w.submit("j1", core.TierCore, 30*time.Minute)
	for i := 0; len(rec.reqs) < 2; i++ { // two failed acquires
		if i > 100 {
			t.Fatal("no acquire in 100 ticks")
		}
		w.run(DefaultTick)
	}
	w.restart()
	rec.fail = 1
	w.run(2 * DefaultTick) // one more failure, then the machine
	if len(rec.reqs) != 4 {
		t.Fatalf("%d acquires, want 4 (3 failed, 1 answered)", len(rec.reqs))
	}
	lease := w.leases()[0]
	secrets := map[string]bool{}
	for i, r := range rec.reqs {
		b := r.Bootstrap
		if b.ServerURL != "http://10.0.0.1:8080" || b.LeaseID != lease.ID || b.JoinToken == "" || b.BinaryURL == "" || b.Expires.IsZero() {
			t.Fatalf("acquire %d: bootstrap %+v", i, b)
		}
		tok, err := w.st.Tokens().TokenByHash(ctx, store.HashToken(b.JoinToken), w.clk.Now())
		if err != nil || tok.Kind != store.TokenJoin || tok.Lease != lease.ID || tok.Role != store.RoleAgent || !tok.Expires.Equal(b.Expires) {
			t.Fatalf("acquire %d: join token %+v, %v", i, tok, err)
		}
		if want := w.clk.Now().Add(DefaultBootTimeout + DefaultJoinMargin); tok.Expires.After(want) {
			t.Errorf("join token expires %v, after %v", tok.Expires, want)
		}
		secrets[b.JoinToken] = true
	}
	if rec.reqs[0].Bootstrap.JoinToken != rec.reqs[1].Bootstrap.JoinToken || rec.reqs[2].Bootstrap.JoinToken != rec.reqs[3].Bootstrap.JoinToken || len(secrets) != 2 {
		t.Errorf("join tokens: %d distinct, want one before the restart and one after", len(secrets))
	}
	// The lease ends: its join tokens stop working.
	w.run(2 * time.Hour)
	if l := w.leaseByID(lease.ID); !l.State.Final() {
		t.Fatalf("lease %s still %s", l.ID, l.State)
	}
	for s := range secrets {
		if _, err := w.st.Tokens().TokenByHash(ctx, store.HashToken(s), w.clk.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a join token of the ended lease: %v, want not found", err)
		}
	}

	// Without a public URL (the simulator) no token is made.
	w.configure = nil
	w.restart()
	w.submit("j2", core.TierCore, 30*time.Minute)
	n := len(rec.reqs)
	w.run(3 * DefaultTick)
	if len(rec.reqs) != n {
		t.Errorf("the recorder was called without being the provider")
	}
	toks, err := w.st.Tokens().ListTokens(ctx, store.TokenFilter{})
	if err != nil || len(toks) != 2 {
		t.Errorf("tokens: %d, %v; want the 2 join tokens only", len(toks), err)
	}
}
