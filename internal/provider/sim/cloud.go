package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// ErrUnknownOffer is wrapped by Acquire's error for an offer the catalog
// does not have.
var ErrUnknownOffer = errors.New("sim: unknown offer")

// ErrNoPlan is wrapped by Acquire's error for a billing mode the offer has
// no price plan for.
var ErrNoPlan = errors.New("sim: offer has no plan for the mode")

// ErrTokenConflict is wrapped by Acquire's error when a client token seen
// before comes with a different offer or mode.
var ErrTokenConflict = errors.New("sim: client token reused for a different request")

// ErrEmptyToken is wrapped by Acquire's error for a request without a
// client token: without one a retried call would rent a second machine.
var ErrEmptyToken = errors.New("sim: empty client token")

// Cloud is a simulated provider. It is safe for concurrent use.
//
// The Cloud's world moves only as far as the latest time it has been
// shown: the now of Poll and the clock's time at Acquire, Release and
// List. Each of these first applies every change due by its time
// (a machine becomes ready, fails, gets a reclaim notice or is
// reclaimed, an offer's spot availability changes), so capacity freed by a
// reclaim is free even before Poll reports it. Poll reports each change
// once, in time order, when its now reaches the change.
type Cloud struct {
	mu     sync.Mutex
	clk    clock.Clock
	src    rand.Source
	offers map[string]*offerState
	// machines in creation order; byID and byToken index them.
	machines []*machine
	byID     map[string]*machine
	byToken  map[string]*machine
	queue    eventQueue
	seq      uint64
	// idPrefix starts every machine id: "sim-", or "sim-INCARNATION-".
	idPrefix string
	// defaultReclaimBP is Config.DefaultReclaimBP.
	defaultReclaimBP int64
	// outbox holds applied changes Poll has not reported yet.
	outbox []provider.Event
	now    time.Time
	stats  Stats
}

var _ provider.Provider = (*Cloud)(nil)

// Stats counts what a Cloud has done, for tests and simulator reports.
type Stats struct {
	// Acquired counts machines created; Repeats the Acquire calls answered
	// with a machine already created for their token.
	Acquired int
	Repeats  int
	// CapacityErrors counts Acquire calls refused with
	// provider.ErrCapacity (limit reached or spot withdrawn).
	CapacityErrors int
	Ready          int
	Failed         int
	Notices        int
	Reclaimed      int
	// Released counts machines released while held (not repeats, not
	// machines that had already failed or been reclaimed).
	Released int
	// InUse is the number of machines holding capacity now.
	InUse int
}

type offerState struct {
	offer core.Offer
	cfg   resolved
	inUse int
	// covered: the availability series decides this offer's spot
	// reclaims; available is its current spot availability.
	covered   bool
	available bool
	// limit, while available, is the most spot machines of the offer
	// alive at once (a spot trace's count); 0: no limit.
	limit int
	// spot lists the offer's spot machines that may still be live; ended
	// ones are dropped when the list is walked.
	spot []*machine
}

type machine struct {
	m     provider.Machine
	offer *offerState
	// delay is from launch to ready (or failure); fails decides which.
	delay time.Duration
	fails bool
	// reclaimAfter is the time from ready to a rate-based reclaim
	// notice; negative: none.
	reclaimAfter time.Duration
	notice       time.Duration
	holds        bool
	// acked: the caller released the machine after it had failed or been
	// reclaimed, so List no longer reports it.
	acked bool
}

// New returns a Cloud renting cfg's offers. It fails on an invalid
// config, and on an availability series that names an offer the catalog
// does not have.
func New(cfg Config) (*Cloud, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sim: config: %w", err)
	}
	c := &Cloud{
		clk:      cfg.Clock,
		src:      cfg.Source,
		offers:   make(map[string]*offerState, len(cfg.Offers)),
		byID:     map[string]*machine{},
		byToken:  map[string]*machine{},
		idPrefix: "sim-",

		defaultReclaimBP: cfg.DefaultReclaimBP,
	}
	if cfg.Incarnation != "" {
		c.idPrefix = "sim-" + cfg.Incarnation + "-"
	}
	order := make([]*offerState, 0, len(cfg.Offers))
	for i := range cfg.Offers {
		o := cfg.Offers[i]
		o.Plans = slices.Clone(o.Plans)
		off := &offerState{
			offer:     o,
			cfg:       resolve(cfg.ByOffer[o.ID], cfg.ByProvider[o.Provider], cfg.Default),
			available: true,
		}
		c.offers[o.ID] = off
		order = append(order, off)
	}
	if cfg.Availability != nil {
		start := cfg.SeriesStart
		if start.IsZero() {
			start = c.clk.Now()
		}
		if err := c.schedule(cfg.Availability, start, order); err != nil {
			return nil, fmt.Errorf("sim: availability series: %w", err)
		}
	}
	return c, nil
}

// schedule turns a series into availability changes per offer, one event
// per change (a series repeating the same value every step adds nothing).
func (c *Cloud) schedule(a *Availability, start time.Time, order []*offerState) error {
	for _, st := range a.Steps {
		if st.Offer == AllOffers {
			for _, off := range order {
				off.covered = true
			}
			continue
		}
		off, ok := c.offers[st.Offer]
		if !ok {
			return &SeriesError{File: a.File, Line: st.Line, Field: "offer", Value: st.Offer, Problem: "unknown offer",
				Allowed: fmt.Sprintf("* or the id of one of the %d offers", len(order))}
		}
		off.covered = true
	}
	type avail struct {
		ok    bool
		limit int
	}
	cur := make(map[*offerState]avail, len(order))
	for _, off := range order {
		cur[off] = avail{ok: true}
	}
	next := make(map[*offerState]avail, len(order))
	for i := 0; i < len(a.Steps); {
		at := a.Steps[i].at(start)
		for k, v := range cur {
			next[k] = v
		}
		for ; i < len(a.Steps) && a.Steps[i].at(start).Equal(at); i++ {
			st := a.Steps[i]
			v := avail{ok: st.Available}
			if st.Available {
				v.limit = st.Limit
			}
			if st.Offer == AllOffers {
				for _, off := range order {
					next[off] = v
				}
			} else {
				next[c.offers[st.Offer]] = v
			}
		}
		for _, off := range order {
			if next[off] != cur[off] {
				c.push(event{at: at, kind: evAvail, offer: off, available: next[off].ok, limit: next[off].limit})
				cur[off] = next[off]
			}
		}
	}
	return nil
}

// Acquire rents a machine of req.OfferID in req.Mode, launched at the
// clock's time, or returns the machine already rented for req.ClientToken.
// The machine is provisioning; Poll reports when it is ready or failed.
func (c *Cloud) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	if err := ctx.Err(); err != nil {
		return provider.Machine{}, fmt.Errorf("sim: acquire: %w", err)
	}
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)

	// what is the context every error names; a func, as most calls succeed.
	what := func() string { return fmt.Sprintf("acquire %s (%s), token %q", req.OfferID, req.Mode, req.ClientToken) }
	if req.ClientToken == "" {
		return provider.Machine{}, fmt.Errorf("%s: %w", what(), ErrEmptyToken)
	}
	if m, ok := c.byToken[req.ClientToken]; ok {
		if m.m.OfferID != req.OfferID || m.m.Mode != req.Mode {
			return provider.Machine{}, fmt.Errorf("%s: the token rented %s (%s) as %s: %w", what(), m.m.OfferID, m.m.Mode, m.m.ProviderID, ErrTokenConflict)
		}
		c.stats.Repeats++
		return m.m, nil
	}
	off, ok := c.offers[req.OfferID]
	if !ok {
		return provider.Machine{}, fmt.Errorf("%s: the catalog has %d offers: %w", what(), len(c.offers), ErrUnknownOffer)
	}
	plan, ok := off.offer.Plan(req.Mode)
	if !ok {
		modes := make([]string, 0, len(off.offer.Plans))
		for _, m := range off.offer.Modes() {
			modes = append(modes, string(m))
		}
		return provider.Machine{}, fmt.Errorf("%s: the offer has %s: %w", what(), strings.Join(modes, ", "), ErrNoPlan)
	}
	if off.cfg.capacity > 0 && off.inUse >= off.cfg.capacity {
		c.stats.CapacityErrors++
		return provider.Machine{}, fmt.Errorf("%s: %d of %d machines in use: %w", what(), off.inUse, off.cfg.capacity, provider.ErrCapacity)
	}
	spot := req.Mode == core.Spot
	if spot && !off.available {
		c.stats.CapacityErrors++
		return provider.Machine{}, fmt.Errorf("%s: spot capacity withdrawn (availability series): %w", what(), provider.ErrCapacity)
	}
	if spot && off.limit > 0 && off.liveSpot() >= off.limit {
		c.stats.CapacityErrors++
		return provider.Machine{}, fmt.Errorf("%s: %d spot machines obtainable, all held (availability series): %w", what(), off.limit, provider.ErrCapacity)
	}

	n := uint64(len(c.machines) + 1)
	// Each machine draws from its own stream, seeded by one draw from the
	// Cloud's source: what one machine draws never shifts another's.
	r := rand.New(rand.NewPCG(c.src.Uint64(), n))
	m := &machine{
		m: provider.Machine{
			ProviderID:  fmt.Sprintf("%s%06d", c.idPrefix, n),
			ClientToken: req.ClientToken,
			OfferID:     req.OfferID,
			Mode:        req.Mode,
			State:       provider.Provisioning,
			LaunchedAt:  now,
		},
		offer:        off,
		delay:        off.cfg.delay.draw(r),
		fails:        r.Int64N(10000) < off.cfg.failureBP,
		reclaimAfter: -1,
		holds:        true,
	}
	exp := r.ExpFloat64() // drawn for every machine, used by rate-reclaimed ones
	if spot {
		m.notice = noticeFor(off.cfg, plan)
		switch {
		case off.covered:
		case plan.Reclaim != nil:
			m.reclaimAfter = reclaimAfter(plan.Reclaim.MonthlyRateBP, exp)
		case c.defaultReclaimBP > 0:
			m.reclaimAfter = reclaimAfter(c.defaultReclaimBP, exp)
		}
		off.spot = append(off.spot, m)
	}
	c.machines = append(c.machines, m)
	c.byID[m.m.ProviderID] = m
	c.byToken[req.ClientToken] = m
	off.inUse++
	c.stats.Acquired++
	c.stats.InUse++
	kind := evReady
	if m.fails {
		kind = evFail
	}
	c.push(event{at: now.Add(m.delay), kind: kind, m: m})
	return m.m, nil
}

func noticeFor(cfg resolved, plan *core.PricePlan) time.Duration {
	switch {
	case cfg.notice != nil:
		return *cfg.notice
	case plan.Reclaim != nil:
		return time.Duration(plan.Reclaim.NoticeSeconds) * time.Second
	}
	return DefaultNotice
}

// monthSeconds is core's month, 730 hours: the period MonthlyRateBP is
// the reclaim probability over.
var monthSeconds = float64(core.Month.Seconds())

// reclaimAfter turns a draw from the standard exponential distribution
// into a time to reclaim notice, in whole seconds, for a Poisson process
// that reclaims a machine within a month with probability rateBP/10000:
// its rate is -ln(1-p) per month. It returns -1 for never.
func reclaimAfter(rateBP int64, exp float64) time.Duration {
	switch {
	case rateBP <= 0:
		return -1
	case rateBP >= 10000:
		return 0
	}
	perSecond := -math.Log1p(-float64(rateBP)/10000) / monthSeconds
	secs := math.Round(exp / perSecond)
	const never = 100 * 366 * 24 * 3600 // past any simulation
	if secs > never {
		return -1
	}
	return time.Duration(secs) * time.Second
}

// Release gives a machine back at the clock's time and frees its
// capacity. Releasing a released machine does nothing; releasing one that
// has failed or been reclaimed acknowledges it, and List stops reporting
// it.
func (c *Cloud) Release(ctx context.Context, providerID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim: release: %w", err)
	}
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	m, ok := c.byID[providerID]
	if !ok {
		return fmt.Errorf("release %q: %w", providerID, provider.ErrUnknownMachine)
	}
	switch m.m.State {
	case provider.Released:
	case provider.Failed, provider.Reclaimed:
		m.acked = true
	default:
		m.m.State = provider.Released
		m.m.EndedAt = now
		if now.Before(m.m.LaunchedAt) {
			m.m.EndedAt = m.m.LaunchedAt
		}
		c.free(m)
		c.stats.Released++
	}
	return nil
}

// List returns every machine not released, in the order they were
// acquired: provisioning, ready and reclaiming ones, and failed and
// reclaimed ones until they are released (acknowledged), so that a
// restarted server learns of ends it missed.
func (c *Cloud) List(ctx context.Context) ([]provider.Machine, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim: list: %w", err)
	}
	now := c.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	out := []provider.Machine{}
	for _, m := range c.machines {
		if m.m.State != provider.Released && !m.acked {
			out = append(out, m.m)
		}
	}
	return out, nil
}

// Poll returns, in time order, the changes due by now that it has not
// returned before: a machine became ready, failed, got a reclaim notice
// (State Reclaiming, with ReclaimAt) or was reclaimed. Each event's
// Machine is the machine as it was right after the change.
func (c *Cloud) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim: poll: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	// The outbox is in time order unless the clock went back between
	// calls; a stable sort keeps equal times in the order they happened.
	slices.SortStableFunc(c.outbox, func(a, b provider.Event) int { return a.At.Compare(b.At) })
	i := 0
	for i < len(c.outbox) && !c.outbox[i].At.After(now) {
		i++
	}
	out := slices.Clone(c.outbox[:i])
	c.outbox = slices.Delete(c.outbox, 0, i)
	return out, nil
}

// NextEventAt returns the time of the next change the Cloud will make or
// has made without Poll reporting it yet: a machine event, or a change of
// spot availability (which Poll does not report, but which changes what
// Acquire may rent). A discrete-event simulator jumps there. It returns
// false when nothing is scheduled.
func (c *Cloud) NextEventAt() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	found := false
	for _, e := range c.outbox {
		if !found || e.At.Before(next) {
			next, found = e.At, true
		}
	}
	for len(c.queue) > 0 && !c.queue[0].live() {
		c.queue.pop()
	}
	if len(c.queue) > 0 && (!found || c.queue[0].at.Before(next)) {
		next, found = c.queue[0].at, true
	}
	return next, found
}

// Machines returns every machine the Cloud has created, released ones
// included, in the order they were acquired, as of the latest time it
// has been shown.
func (c *Cloud) Machines() []provider.Machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]provider.Machine, len(c.machines))
	for i, m := range c.machines {
		out[i] = m.m
	}
	return out
}

// Stats returns the Cloud's counters.
func (c *Cloud) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Capacity returns the most machines of an offer that may be held at
// once (its Settings' Capacity); 0 for no limit or an unknown offer.
func (c *Cloud) Capacity(offerID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if off, ok := c.offers[offerID]; ok {
		return off.cfg.capacity
	}
	return 0
}

// InUse returns how many machines of an offer hold capacity now.
func (c *Cloud) InUse(offerID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if off, ok := c.offers[offerID]; ok {
		return off.inUse
	}
	return 0
}

// Available reports whether spot machines of an offer may be rented now,
// as far as the availability series goes; it is false for an unknown
// offer.
func (c *Cloud) Available(offerID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	off, ok := c.offers[offerID]
	return ok && off.available
}

// advance applies every scheduled change due by t, in time order.
func (c *Cloud) advance(t time.Time) {
	if t.After(c.now) {
		c.now = t
	}
	for len(c.queue) > 0 && !c.queue[0].at.After(t) {
		e := c.queue.pop()
		if e.live() {
			c.apply(e)
		}
	}
}

func (c *Cloud) apply(e event) {
	m := e.m
	switch e.kind {
	case evReady:
		m.m.State = provider.Ready
		m.m.ReadyAt = e.at
		c.stats.Ready++
		c.emit(e.at, m)
		if m.reclaimAfter >= 0 {
			c.push(event{at: e.at.Add(m.reclaimAfter), kind: evNotice, m: m})
		}
	case evFail:
		m.m.State = provider.Failed
		m.m.EndedAt = e.at
		c.free(m)
		c.stats.Failed++
		c.emit(e.at, m)
	case evNotice:
		c.notify(m, e.at)
	case evReclaim:
		m.m.State = provider.Reclaimed
		m.m.EndedAt = e.at
		c.free(m)
		c.stats.Reclaimed++
		c.emit(e.at, m)
	case evAvail:
		off := e.offer
		off.available, off.limit = e.available, e.limit
		kept := off.spot[:0]
		alive := 0
		for _, sm := range off.spot {
			switch sm.m.State {
			case provider.Provisioning, provider.Ready:
				// Past the count obtainable, the newest machines go
				// first: the oldest keep their places.
				if alive++; !e.available || e.limit > 0 && alive > e.limit {
					c.notify(sm, e.at)
				}
				kept = append(kept, sm)
			case provider.Reclaiming:
				kept = append(kept, sm)
			}
		}
		clear(off.spot[len(kept):])
		off.spot = kept
	}
}

// liveSpot counts the offer's spot machines provisioning or ready.
func (off *offerState) liveSpot() int {
	n := 0
	for _, sm := range off.spot {
		if sm.m.State == provider.Provisioning || sm.m.State == provider.Ready {
			n++
		}
	}
	return n
}

// notify gives m its reclaim notice at t. A machine still provisioning
// gets one too and never becomes ready.
func (c *Cloud) notify(m *machine, t time.Time) {
	m.m.State = provider.Reclaiming
	m.m.ReclaimAt = t.Add(m.notice)
	c.stats.Notices++
	c.emit(t, m)
	c.push(event{at: m.m.ReclaimAt, kind: evReclaim, m: m})
}

func (c *Cloud) free(m *machine) {
	if m.holds {
		m.holds = false
		m.offer.inUse--
		c.stats.InUse--
	}
}

func (c *Cloud) emit(at time.Time, m *machine) {
	c.outbox = append(c.outbox, provider.Event{At: at, Machine: m.m})
}

func (c *Cloud) push(e event) {
	c.seq++
	e.seq = c.seq
	c.queue.push(e)
}
