package static

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// ErrUnknownOffer is wrapped by Acquire's error for an offer the pool has
// no machines of.
var ErrUnknownOffer = errors.New("static: unknown offer")

// ErrTokenConflict is wrapped by Acquire's error when a client token seen
// before comes with a different offer or mode.
var ErrTokenConflict = errors.New("static: client token reused for a different request")

// ErrEmptyToken is wrapped by Acquire's error for a request without a
// client token.
var ErrEmptyToken = errors.New("static: empty client token")

// Group declares Count identical machines of one offer.
type Group struct {
	Offer string
	Count int
}

// Config is a pool's machines and its clock.
type Config struct {
	Groups []Group
	// Clock gives Acquire and Release their times.
	Clock clock.Clock
}

// maxCount bounds a group: a fleet, not a typo.
const maxCount = 1_000_000

// Pool is a static provider. It is safe for concurrent use.
type Pool struct {
	mu     sync.Mutex
	clk    clock.Clock
	offers map[string]*group
	// leases in acquisition order; byID and byToken index them.
	leases  []*lease
	byID    map[string]*lease
	byToken map[string]*lease
	outbox  []provider.Event
}

var _ provider.Provider = (*Pool)(nil)

type group struct {
	offer string
	// holder[i] is the lease holding machine i+1, nil when free.
	holder []*lease
	// leased[i] counts machine i+1's leases so far.
	leased []int
	free   int
}

type lease struct {
	m     provider.Machine
	g     *group
	index int
}

// New returns a pool of cfg's machines, all free.
func New(cfg Config) (*Pool, error) {
	if cfg.Clock == nil {
		return nil, fmt.Errorf("static: config: %w", &core.FieldError{Field: "clock", Value: "nil", Allowed: "a clock.Clock"})
	}
	p := &Pool{clk: cfg.Clock, offers: map[string]*group{}, byID: map[string]*lease{}, byToken: map[string]*lease{}}
	for i, g := range cfg.Groups {
		path := fmt.Sprintf("groups[%d]", i)
		switch {
		case g.Offer == "":
			return nil, fmt.Errorf("static: config: %w", &core.FieldError{Field: path + ".offer", Value: "", Allowed: "an offer id"})
		case p.offers[g.Offer] != nil:
			return nil, fmt.Errorf("static: config: %w", &core.FieldError{Field: path + ".offer", Value: g.Offer, Allowed: "each offer in one group"})
		case g.Count < 1 || g.Count > maxCount:
			return nil, fmt.Errorf("static: config: %w", &core.FieldError{Field: path + ".count", Value: fmt.Sprint(g.Count), Allowed: fmt.Sprintf("machines 1..%d", maxCount)})
		}
		p.offers[g.Offer] = &group{offer: g.Offer, holder: make([]*lease, g.Count), leased: make([]int, g.Count), free: g.Count}
	}
	return p, nil
}

// Acquire hands out the free machine of req.OfferID with the lowest
// number, ready at once (Poll reports its ready event too), or returns
// the lease already made for req.ClientToken. With no machine free it
// fails with provider.ErrCapacity. Any valid billing mode is accepted:
// what an owned machine costs is the catalog's business.
func (p *Pool) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	if err := ctx.Err(); err != nil {
		return provider.Machine{}, fmt.Errorf("static: acquire: %w", err)
	}
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	what := func() string { return fmt.Sprintf("acquire %s (%s), token %q", req.OfferID, req.Mode, req.ClientToken) }
	if req.ClientToken == "" {
		return provider.Machine{}, fmt.Errorf("%s: %w", what(), ErrEmptyToken)
	}
	if l, ok := p.byToken[req.ClientToken]; ok {
		if l.m.OfferID != req.OfferID || l.m.Mode != req.Mode {
			return provider.Machine{}, fmt.Errorf("%s: the token leased %s (%s) as %s: %w", what(), l.m.OfferID, l.m.Mode, l.m.ProviderID, ErrTokenConflict)
		}
		return l.m, nil
	}
	if !slices.Contains(core.BillingModes, req.Mode) {
		return provider.Machine{}, fmt.Errorf("%s: %w", what(), &core.FieldError{Field: "mode", Value: string(req.Mode), Allowed: "one of on-demand, spot, daily, weekly, monthly"})
	}
	g, ok := p.offers[req.OfferID]
	if !ok {
		return provider.Machine{}, fmt.Errorf("%s: the pool has machines of %d offers: %w", what(), len(p.offers), ErrUnknownOffer)
	}
	if g.free == 0 {
		return provider.Machine{}, fmt.Errorf("%s: all %d machines leased: %w", what(), len(g.holder), provider.ErrCapacity)
	}
	i := slices.Index(g.holder, nil)
	g.leased[i]++
	l := &lease{g: g, index: i, m: provider.Machine{
		ProviderID:  fmt.Sprintf("%s#%d@%d", g.offer, i+1, g.leased[i]),
		ClientToken: req.ClientToken,
		OfferID:     req.OfferID,
		Mode:        req.Mode,
		State:       provider.Ready,
		LaunchedAt:  now,
		ReadyAt:     now,
	}}
	g.holder[i] = l
	g.free--
	p.leases = append(p.leases, l)
	p.byID[l.m.ProviderID] = l
	p.byToken[req.ClientToken] = l
	p.outbox = append(p.outbox, provider.Event{At: now, Machine: l.m})
	return l.m, nil
}

// Release ends a lease at the clock's time and returns its machine to the
// pool; releasing a released lease does nothing.
func (p *Pool) Release(ctx context.Context, providerID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("static: release: %w", err)
	}
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.byID[providerID]
	if !ok {
		return fmt.Errorf("release %q: %w", providerID, provider.ErrUnknownMachine)
	}
	if l.m.State == provider.Released {
		return nil
	}
	l.m.State, l.m.EndedAt = provider.Released, now
	if now.Before(l.m.LaunchedAt) {
		l.m.EndedAt = l.m.LaunchedAt
	}
	l.g.holder[l.index] = nil
	l.g.free++
	return nil
}

// List returns the leases not released, in acquisition order.
func (p *Pool) List(ctx context.Context) ([]provider.Machine, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("static: list: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []provider.Machine{}
	for _, l := range p.leases {
		if l.m.State != provider.Released {
			out = append(out, l.m)
		}
	}
	return out, nil
}

// Poll returns the ready events due by now not returned before, in time
// order. Nothing else ever happens to an owned machine.
func (p *Pool) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("static: poll: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.SortStableFunc(p.outbox, func(a, b provider.Event) int { return a.At.Compare(b.At) })
	i := 0
	for i < len(p.outbox) && !p.outbox[i].At.After(now) {
		i++
	}
	out := slices.Clone(p.outbox[:i])
	p.outbox = slices.Delete(p.outbox, 0, i)
	return out, nil
}

// Free returns how many machines of an offer are free now.
func (p *Pool) Free(offerID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.offers[offerID]; ok {
		return g.free
	}
	return 0
}
