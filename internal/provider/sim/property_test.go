package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// op is one call in a generated script; scripts are data so that one can
// be replayed on two Clouds.
type op struct {
	kind    string // acquire, release, advance, list
	token   int
	offer   int
	mode    core.BillingMode
	machine int
	dt      time.Duration
	poll    bool
}

type scenario struct {
	seed   uint64
	cfg    Config
	notice map[string]time.Duration // per offer, for checking notices
	caps   map[string]int
	ops    []op
}

var propOffers = []string{gpuOffer, idcOffer, bareSpot}

func genScenario(t *rapid.T) scenario {
	offers := testOffers()
	// A high rate so that reclaims happen within a generated script.
	offers[0].Plans[1].Reclaim.MonthlyRateBP = rapid.SampledFrom([]int64{0, 2500, 9900, 10000}).Draw(t, "rate")
	delays := []Delay{{}, Fixed(0), Fixed(time.Minute), Uniform(0, 10*time.Minute), LogNormal(2*time.Minute, 5*time.Minute)}
	settings := func(label string) Settings {
		s := Settings{
			Delay:    delays[rapid.IntRange(0, len(delays)-1).Draw(t, label+"delay")],
			Capacity: rapid.IntRange(0, 3).Draw(t, label+"capacity"),
		}
		if rapid.Bool().Draw(t, label+"setfail") {
			s.FailureBP = new(rapid.SampledFrom([]int64{0, 3000, 10000}).Draw(t, label+"fail"))
		}
		if rapid.Bool().Draw(t, label+"setnotice") {
			s.Notice = dur(time.Duration(rapid.IntRange(0, 600).Draw(t, label+"notice")) * time.Second)
		}
		return s
	}
	sc := scenario{
		seed: rapid.Uint64().Draw(t, "seed"),
		cfg: Config{
			Offers:     offers,
			Default:    settings("default."),
			ByProvider: map[string]Settings{"aws": settings("aws.")},
			ByOffer:    map[string]Settings{gpuOffer: settings("gpu.")},
		},
	}
	if rapid.Bool().Draw(t, "series") {
		a := &Availability{File: "gen"}
		var off time.Duration
		for i := range rapid.IntRange(1, 8).Draw(t, "steps") {
			off += time.Duration(rapid.IntRange(0, 7200).Draw(t, "stepdt")) * time.Second
			a.Steps = append(a.Steps, Step{Relative: true, Offset: off, Line: i + 2,
				Offer:     rapid.SampledFrom([]string{AllOffers, gpuOffer, bareSpot}).Draw(t, "stepoffer"),
				Available: rapid.Bool().Draw(t, "avail")})
		}
		sc.cfg.Availability = a
	}
	sc.notice, sc.caps = map[string]time.Duration{}, map[string]int{}
	for _, o := range offers {
		r := resolve(sc.cfg.ByOffer[o.ID], sc.cfg.ByProvider[o.Provider], sc.cfg.Default)
		sc.caps[o.ID] = r.capacity
		if p, ok := o.Plan(core.Spot); ok {
			sc.notice[o.ID] = noticeFor(r, p)
		}
	}
	n := rapid.IntRange(1, 60).Draw(t, "ops")
	for range n {
		o := op{kind: rapid.SampledFrom([]string{"acquire", "acquire", "release", "advance", "advance", "list"}).Draw(t, "kind")}
		switch o.kind {
		case "acquire":
			o.token = rapid.IntRange(0, 15).Draw(t, "token")
			o.offer = rapid.IntRange(0, len(propOffers)-1).Draw(t, "offer")
			o.mode = rapid.SampledFrom(core.BillingModes).Draw(t, "mode")
		case "release":
			o.machine = rapid.IntRange(0, 20).Draw(t, "machine")
		case "advance":
			o.dt = time.Duration(rapid.IntRange(0, 3*3600).Draw(t, "dt")) * time.Second
			o.poll = rapid.IntRange(0, 3).Draw(t, "poll") > 0
		}
		sc.ops = append(sc.ops, o)
	}
	return sc
}

// run plays sc on a fresh Cloud, checking the invariants after every call,
// and returns the log of calls and events.
func run(t *rapid.T, sc scenario) []string {
	w := newWorld(t, sc.seed, sc.cfg)
	ctx := context.Background()
	var log []string
	var acquired []string              // provider IDs, in order
	released := map[string]time.Time{} // by us, when first
	seen := map[string]bool{}          // "id state" reported by Poll
	noticed := map[string]time.Time{}  // id → ReclaimAt announced
	lastAt := time.Time{}

	check := func() {
		held := map[string]int{}
		for _, m := range w.cloud.Machines() {
			switch m.State {
			case provider.Provisioning, provider.Ready, provider.Reclaiming:
				held[m.OfferID]++
			}
		}
		for _, id := range propOffers {
			if got := w.cloud.InUse(id); got != held[id] {
				t.Fatalf("InUse(%s) = %d, but %d machines hold capacity", id, got, held[id])
			}
			if c := sc.caps[id]; c > 0 && held[id] > c {
				t.Fatalf("%s: %d machines held, capacity %d", id, held[id], c)
			}
		}
		listed := map[string]provider.State{}
		for _, m := range w.list() {
			listed[m.ProviderID] = m.State
		}
		for _, id := range acquired {
			if _, ok := listed[id]; !ok && released[id].IsZero() {
				t.Fatalf("machine %s forgotten: not released by us, not listed", id)
			}
			if _, ok := listed[id]; ok && !released[id].IsZero() {
				t.Fatalf("machine %s released but listed as %s", id, listed[id])
			}
		}
	}
	for _, o := range sc.ops {
		switch o.kind {
		case "acquire":
			token := "t" + strconv.Itoa(o.token)
			m, err := w.cloud.Acquire(ctx, provider.AcquireRequest{ClientToken: token, OfferID: propOffers[o.offer], Mode: o.mode})
			if err != nil {
				switch {
				case errors.Is(err, provider.ErrCapacity), errors.Is(err, ErrNoPlan), errors.Is(err, ErrTokenConflict):
				default:
					t.Fatalf("Acquire: unexpected error %v", err)
				}
				log = append(log, fmt.Sprintf("acquire %s %s %s: %v", token, propOffers[o.offer], o.mode, err))
				break
			}
			if m.ClientToken != token {
				t.Fatalf("Acquire(%s) returned %s's machine", token, m.ClientToken)
			}
			if !slices.Contains(acquired, m.ProviderID) {
				acquired = append(acquired, m.ProviderID)
			}
			log = append(log, fmt.Sprintf("acquire %s -> %s %s", token, m.ProviderID, m.State))
		case "release":
			if len(acquired) == 0 {
				continue
			}
			id := acquired[o.machine%len(acquired)]
			if err := w.cloud.Release(ctx, id); err != nil {
				t.Fatalf("Release(%s): %v", id, err)
			}
			if _, ok := released[id]; !ok {
				released[id] = w.clk.Now()
			}
			log = append(log, "release "+id)
		case "advance":
			w.clk.Set(w.clk.Now().Add(o.dt))
			if !o.poll {
				continue
			}
			now := w.clk.Now()
			evs, err := w.cloud.Poll(ctx, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				id, st := e.Machine.ProviderID, e.Machine.State
				if e.At.After(now) || e.At.Before(lastAt) {
					t.Fatalf("event %s at %v: polled at %v, previous event at %v", line(e), e.At, now, lastAt)
				}
				lastAt = e.At
				key := id + " " + string(st)
				if seen[key] {
					t.Fatalf("event %s reported twice", key)
				}
				seen[key] = true
				switch st {
				case provider.Reclaiming:
					if e.Machine.Mode != core.Spot {
						t.Fatalf("reclaim notice for a %s machine", e.Machine.Mode)
					}
					if got, want := e.Machine.ReclaimAt.Sub(e.At), sc.notice[e.Machine.OfferID]; got != want {
						t.Fatalf("%s: notice %v before the reclaim, want %v", id, got, want)
					}
					noticed[id] = e.Machine.ReclaimAt
				case provider.Reclaimed:
					if at, ok := noticed[id]; !ok || !at.Equal(e.At) || !e.Machine.EndedAt.Equal(e.At) {
						t.Fatalf("%s reclaimed at %v without its notice (announced %v, %v)", id, e.At, at, ok)
					}
				case provider.Ready:
					if !e.Machine.ReadyAt.Equal(e.At) {
						t.Fatalf("%s ready event at %v, ReadyAt %v", id, e.At, e.Machine.ReadyAt)
					}
				case provider.Failed:
					if seen[id+" ready"] {
						t.Fatalf("%s failed after it was ready", id)
					}
				default:
					t.Fatalf("event with state %s", st)
				}
				if r, ok := released[id]; ok && e.At.After(r) {
					t.Fatalf("event %s at %v for a machine released at %v", key, e.At, r)
				}
				log = append(log, line(e))
			}
		case "list":
			log = append(log, "list "+ids(w.list()))
		}
		check()
	}
	return log
}

// TestPropertyInvariants: capacity is never exceeded, no machine is
// forgotten, events come once and in order, notices come NoticeSeconds
// before their reclaim.
func TestPropertyInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { run(t, genScenario(t)) })
}

// TestPropertyDeterministic: the same seed and the same calls give the
// same events.
func TestPropertyDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario(t)
		a, b := run(t, sc), run(t, sc)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("two runs of one script differ (-first +second):\n%s", diff)
		}
	})
}
