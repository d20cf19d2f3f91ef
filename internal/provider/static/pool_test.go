package static

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

const dgx = "own/dc1/dgx"

func newPool(t testing.TB) (*Pool, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(t0)
	p, err := New(Config{Clock: clk, Groups: []Group{{Offer: dgx, Count: 2}, {Offer: "own/dc1/t4", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

func acquire(t *testing.T, p *Pool, token string) provider.Machine {
	t.Helper()
	m, err := p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: token, OfferID: dgx, Mode: core.Monthly})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPool(t *testing.T) {
	ctx := context.Background()
	p, clk := newPool(t)
	a := acquire(t, p, "lease-a")
	want := provider.Machine{ProviderID: dgx + "#1@1", ClientToken: "lease-a", OfferID: dgx, Mode: core.Monthly,
		State: provider.Ready, LaunchedAt: t0, ReadyAt: t0}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Acquire (-want +got):\n%s", diff)
	}
	if again := acquire(t, p, "lease-a"); again != a {
		t.Errorf("same token: %+v, want %+v", again, a)
	}
	clk.Set(t0.Add(time.Minute))
	b := acquire(t, p, "lease-b")
	if _, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "lease-c", OfferID: dgx, Mode: core.Monthly}); !errors.Is(err, provider.ErrCapacity) {
		t.Fatalf("third acquire of two machines = %v, want ErrCapacity", err)
	}
	evs, _ := p.Poll(ctx, t0.Add(30*time.Second))
	if len(evs) != 1 || evs[0].Machine.ProviderID != a.ProviderID || evs[0].Machine.State != provider.Ready {
		t.Errorf("poll at +30s = %+v, want a's ready event only", evs)
	}
	evs, _ = p.Poll(ctx, clk.Now())
	if len(evs) != 1 || evs[0].Machine.ProviderID != b.ProviderID {
		t.Errorf("poll at +1m = %+v, want b's ready event", evs)
	}

	clk.Set(t0.Add(time.Hour))
	if err := p.Release(ctx, a.ProviderID); err != nil {
		t.Fatal(err)
	}
	c := acquire(t, p, "lease-c") // machine 1 again, as a new lease
	if c.ProviderID != dgx+"#1@2" {
		t.Errorf("reused machine = %s, want %s#1@2", c.ProviderID, dgx)
	}
	// A retried release of the old lease must not free the new one.
	if err := p.Release(ctx, a.ProviderID); err != nil {
		t.Fatal(err)
	}
	if n := p.Free(dgx); n != 0 {
		t.Errorf("Free = %d after a stale release, want 0", n)
	}
	ms, _ := p.List(ctx)
	var got []string
	for _, m := range ms {
		got = append(got, m.ProviderID+" "+m.ClientToken)
	}
	if diff := cmp.Diff([]string{dgx + "#2@1 lease-b", dgx + "#1@2 lease-c"}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if old := acquire(t, p, "lease-a"); old.State != provider.Released || !old.EndedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("old token: %s ended %v, want released at +1h", old.State, old.EndedAt)
	}
}

func TestPoolErrors(t *testing.T) {
	tests := []struct {
		name string
		req  provider.AcquireRequest
		is   error
		msg  string
	}{
		{"unknown offer", provider.AcquireRequest{ClientToken: "x", OfferID: "own/dc2/dgx", Mode: core.Monthly}, ErrUnknownOffer, "the pool has machines of 2 offers"},
		{"empty token", provider.AcquireRequest{OfferID: dgx, Mode: core.Monthly}, ErrEmptyToken, "empty client token"},
		{"token conflict", provider.AcquireRequest{ClientToken: "held", OfferID: dgx, Mode: core.Daily}, ErrTokenConflict, "the token leased own/dc1/dgx (monthly) as own/dc1/dgx#1@1"},
		{"bad mode", provider.AcquireRequest{ClientToken: "x", OfferID: dgx, Mode: "hourly"}, nil, `mode: invalid value "hourly"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newPool(t)
			acquire(t, p, "held")
			_, err := p.Acquire(context.Background(), tc.req)
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Acquire = %v, want %v saying %q", err, tc.is, tc.msg)
			}
		})
	}
	p, _ := newPool(t)
	if err := p.Release(context.Background(), "nope"); !errors.Is(err, provider.ErrUnknownMachine) {
		t.Errorf("Release(unknown) = %v", err)
	}
	for _, cfg := range []Config{
		{},
		{Clock: clock.NewManual(t0), Groups: []Group{{Offer: "", Count: 1}}},
		{Clock: clock.NewManual(t0), Groups: []Group{{Offer: "a", Count: 0}}},
		{Clock: clock.NewManual(t0), Groups: []Group{{Offer: "a", Count: 1}, {Offer: "a", Count: 2}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestPoolProperty: free plus leased is the group's size, no machine is
// held by two leases, and every lease is released or listed.
func TestPoolProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := clock.NewManual(t0)
		p, err := New(Config{Clock: clk, Groups: []Group{{Offer: dgx, Count: rapid.IntRange(1, 4).Draw(t, "count")}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var ids []string
		released := map[string]bool{}
		for range rapid.IntRange(1, 50).Draw(t, "ops") {
			clk.Set(clk.Now().Add(time.Minute))
			if rapid.Bool().Draw(t, "acquire") {
				token := "t" + strconv.Itoa(rapid.IntRange(0, 10).Draw(t, "token"))
				m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: token, OfferID: dgx, Mode: core.Monthly})
				if err != nil && !errors.Is(err, provider.ErrCapacity) {
					t.Fatal(err)
				}
				if err == nil && !slices.Contains(ids, m.ProviderID) {
					ids = append(ids, m.ProviderID)
				}
			} else if len(ids) > 0 {
				id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "release")]
				if err := p.Release(ctx, id); err != nil {
					t.Fatal(err)
				}
				released[id] = true
			}
			ms, _ := p.List(ctx)
			machines := map[string]bool{}
			listed := map[string]bool{}
			for _, m := range ms {
				name, _, _ := strings.Cut(m.ProviderID, "@")
				if machines[name] {
					t.Fatalf("machine %s held by two leases", name)
				}
				machines[name] = true
				listed[m.ProviderID] = true
			}
			if len(ms)+p.Free(dgx) != len(p.offers[dgx].holder) {
				t.Fatalf("%d listed + %d free != %d machines", len(ms), p.Free(dgx), len(p.offers[dgx].holder))
			}
			for _, id := range ids {
				if listed[id] == released[id] {
					t.Fatalf("lease %s: listed %v, released %v", id, listed[id], released[id])
				}
			}
		}
	})
}
