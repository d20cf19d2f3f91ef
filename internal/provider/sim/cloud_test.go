package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

func TestLifecycle(t *testing.T) {
	w := newWorld(t, 1, Config{Default: Settings{Delay: Fixed(90 * time.Second)}})
	m := w.acquire("lease-1", gpuOffer, core.OnDemand)
	want := provider.Machine{ProviderID: "sim-000001", ClientToken: "lease-1", OfferID: gpuOffer, Mode: core.OnDemand,
		State: provider.Provisioning, LaunchedAt: t0}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Fatalf("Acquire (-want +got):\n%s", diff)
	}
	if at, ok := w.cloud.NextEventAt(); !ok || !at.Equal(t0.Add(90*time.Second)) {
		t.Errorf("NextEventAt = %v, %v; want +90s", at, ok)
	}
	w.at(89 * time.Second)
	if got := w.poll(); len(got) != 0 {
		t.Errorf("poll at +89s = %v, want nothing", got)
	}
	w.at(5 * time.Minute)
	if diff := cmp.Diff([]string{"+1m30s sim-000001 ready"}, w.poll()); diff != "" {
		t.Errorf("poll at +5m (-want +got):\n%s", diff)
	}
	if got := w.poll(); len(got) != 0 {
		t.Errorf("second poll = %v, want nothing: events come once", got)
	}
	if _, ok := w.cloud.NextEventAt(); ok {
		t.Error("NextEventAt found an event for an on-demand machine that is ready")
	}
	want.State, want.ReadyAt = provider.Ready, t0.Add(90*time.Second)
	if diff := cmp.Diff([]provider.Machine{want}, w.list()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if n := w.cloud.InUse(gpuOffer); n != 1 {
		t.Errorf("InUse = %d, want 1", n)
	}
	w.at(time.Hour)
	w.release(m.ProviderID)
	w.release(m.ProviderID) // idempotent
	if got := w.list(); len(got) != 0 {
		t.Errorf("List after release = %s, want nothing", ids(got))
	}
	want.State, want.EndedAt = provider.Released, t0.Add(time.Hour)
	if diff := cmp.Diff([]provider.Machine{want}, w.cloud.Machines()); diff != "" {
		t.Errorf("Machines (-want +got):\n%s", diff)
	}
	wantStats := Stats{Acquired: 1, Ready: 1, Released: 1}
	if diff := cmp.Diff(wantStats, w.cloud.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if err := w.cloud.Release(context.Background(), "sim-999999"); !errors.Is(err, provider.ErrUnknownMachine) {
		t.Errorf("Release(unknown) = %v, want ErrUnknownMachine", err)
	}
}

func TestAcquireIdempotent(t *testing.T) {
	w := newWorld(t, 1, Config{Default: Settings{Capacity: 1, Delay: Uniform(10*time.Second, time.Minute)}})
	a := w.acquire("tok", gpuOffer, core.Spot)
	w.at(time.Minute)
	b := w.acquire("tok", gpuOffer, core.Spot) // a retry after a lost reply
	if a.ProviderID != b.ProviderID {
		t.Fatalf("same token gave %s and %s", a.ProviderID, b.ProviderID)
	}
	if n := w.cloud.InUse(gpuOffer); n != 1 {
		t.Errorf("InUse = %d after a repeated acquire, want 1", n)
	}
	w.release(a.ProviderID)
	if c := w.acquire("tok", gpuOffer, core.Spot); c.ProviderID != a.ProviderID || c.State != provider.Released {
		t.Errorf("acquire after release = %s %s, want %s released", c.ProviderID, c.State, a.ProviderID)
	}
	if n := w.cloud.InUse(gpuOffer); n != 0 {
		t.Errorf("InUse = %d, want 0: a repeat must not rent again", n)
	}
	w.acquire("other", gpuOffer, core.Spot) // the freed capacity is usable
	if s := w.cloud.Stats(); s.Acquired != 2 || s.Repeats != 2 {
		t.Errorf("Stats = %+v, want 2 acquired, 2 repeats", s)
	}
}

func TestAcquireErrors(t *testing.T) {
	series := "time,offer,available\n0," + gpuOffer + ",0\n"
	tests := []struct {
		name  string
		setup func(w *world)
		req   provider.AcquireRequest
		is    error
		msg   string
	}{
		{name: "unknown offer", req: provider.AcquireRequest{ClientToken: "t", OfferID: "aws/r/nope", Mode: core.OnDemand},
			is: ErrUnknownOffer, msg: `acquire aws/r/nope (on-demand), token "t": the catalog has 3 offers: sim: unknown offer`},
		{name: "mode the offer lacks", req: provider.AcquireRequest{ClientToken: "t", OfferID: idcOffer, Mode: core.Spot},
			is: ErrNoPlan, msg: "the offer has daily, monthly: sim: offer has no plan"},
		{name: "empty token", req: provider.AcquireRequest{OfferID: gpuOffer, Mode: core.OnDemand}, is: ErrEmptyToken},
		{name: "token reused for another offer",
			setup: func(w *world) { w.acquire("t", gpuOffer, core.OnDemand) },
			req:   provider.AcquireRequest{ClientToken: "t", OfferID: idcOffer, Mode: core.Daily},
			is:    ErrTokenConflict, msg: "the token rented aws/r/gpu1 (on-demand) as sim-000001"},
		{name: "capacity",
			setup: func(w *world) { w.acquire("a", idcOffer, core.Daily); w.acquire("b", idcOffer, core.Monthly) },
			req:   provider.AcquireRequest{ClientToken: "c", OfferID: idcOffer, Mode: core.Daily},
			is:    provider.ErrCapacity, msg: "2 of 2 machines in use: provider: no capacity"},
		{name: "spot withdrawn", req: provider.AcquireRequest{ClientToken: "t", OfferID: gpuOffer, Mode: core.Spot},
			is: provider.ErrCapacity, msg: "spot capacity withdrawn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAvailability("a.csv", strings.NewReader(series))
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(t, 1, Config{ByProvider: map[string]Settings{"idc": {Capacity: 2}}, Availability: a})
			if tc.setup != nil {
				tc.setup(w)
			}
			before := w.cloud.Stats().Acquired
			_, err = w.cloud.Acquire(context.Background(), tc.req)
			if !errors.Is(err, tc.is) {
				t.Fatalf("Acquire = %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if got := w.cloud.Stats().Acquired; got != before {
				t.Errorf("a refused Acquire created a machine")
			}
		})
	}
	// The spot refusal is about spot only.
	a, _ := ParseAvailability("a.csv", strings.NewReader(series))
	w := newWorld(t, 1, Config{Availability: a})
	w.acquire("od", gpuOffer, core.OnDemand)
}

func TestFailure(t *testing.T) {
	w := newWorld(t, 1, Config{
		Default: Settings{Delay: Fixed(time.Minute), Capacity: 1},
		ByOffer: map[string]Settings{gpuOffer: {FailureBP: new(int64(10000))}},
	})
	m := w.acquire("a", gpuOffer, core.OnDemand)
	w.at(time.Minute)
	if diff := cmp.Diff([]string{"+1m0s sim-000001 failed"}, w.poll()); diff != "" {
		t.Errorf("poll (-want +got):\n%s", diff)
	}
	if got := ids(w.list()); got != "sim-000001:failed" {
		t.Errorf("List = %s, want the failed machine until it is released", got)
	}
	w.acquire("b", gpuOffer, core.OnDemand) // failure freed the capacity
	w.release(m.ProviderID)                 // acknowledges
	if got := ids(w.list()); got != "sim-000002:provisioning" {
		t.Errorf("List = %s, want only sim-000002", got)
	}
	if got := w.cloud.Machines()[0]; got.State != provider.Failed || !got.EndedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("released failed machine = %s ended %v, want failed at +1m", got.State, got.EndedAt)
	}
	// FailureBP 0 at the offer overrides the provider's 100%.
	w = newWorld(t, 1, Config{
		ByProvider: map[string]Settings{"aws": {FailureBP: new(int64(10000))}},
		ByOffer:    map[string]Settings{gpuOffer: {FailureBP: new(int64(0))}},
	})
	w.acquire("a", gpuOffer, core.OnDemand)
	w.acquire("b", bareSpot, core.Spot)
	if diff := cmp.Diff([]string{"+0s sim-000001 ready", "+0s sim-000002 failed"}, w.poll()); diff != "" {
		t.Errorf("poll (-want +got):\n%s", diff)
	}
}

func TestRateReclaim(t *testing.T) {
	offers := testOffers()
	offers[0].Plans[1].Reclaim.MonthlyRateBP = 10000 // reclaimed as soon as ready
	w := newWorld(t, 1, Config{Offers: offers, Default: Settings{Delay: Fixed(30 * time.Second)}})
	a := w.acquire("a", gpuOffer, core.Spot)
	w.acquire("b", gpuOffer, core.OnDemand)
	w.at(time.Hour)
	want := []string{
		"+30s sim-000001 ready",
		"+30s sim-000002 ready", // scheduled before the notice: ties go in scheduling order
		"+30s sim-000001 reclaiming at +2m30s",
		"+2m30s sim-000001 reclaimed",
	}
	if diff := cmp.Diff(want, w.poll()); diff != "" {
		t.Errorf("poll (-want +got):\n%s", diff)
	}
	if n := w.cloud.InUse(gpuOffer); n != 1 {
		t.Errorf("InUse = %d, want 1 after the reclaim", n)
	}
	w.release(a.ProviderID) // acknowledging a reclaimed machine is fine
	if got := ids(w.list()); got != "sim-000002:ready" {
		t.Errorf("List = %s", got)
	}

	// A per-provider notice overrides the plan's; releasing under notice
	// cancels the reclaim.
	w = newWorld(t, 1, Config{Offers: offers, ByProvider: map[string]Settings{"aws": {Notice: dur(30 * time.Second)}}})
	b := w.acquire("a", gpuOffer, core.Spot)
	w.acquire("b", bareSpot, core.Spot) // no reclaim model: never reclaimed by rate
	w.at(time.Second)
	if diff := cmp.Diff([]string{"+0s sim-000001 ready", "+0s sim-000001 reclaiming at +30s", "+0s sim-000002 ready"}, w.poll()); diff != "" {
		t.Errorf("poll (-want +got):\n%s", diff)
	}
	w.release(b.ProviderID)
	w.at(time.Hour)
	if got := w.poll(); len(got) != 0 {
		t.Errorf("poll after releasing under notice = %v, want nothing", got)
	}
	if _, ok := w.cloud.NextEventAt(); ok {
		t.Error("NextEventAt reports the cancelled reclaim")
	}
}

// TestReclaimFrequency measures the rate model over 2,000 machine-months
// at 25% a month. The seed is fixed, so the counts are exact; the bands
// are about four standard deviations wide, so any sound seed passes.
func TestReclaimFrequency(t *testing.T) {
	const n = 2000
	month := core.Month.Duration()
	w := newWorld(t, 7, Config{})
	for i := range n {
		w.acquire("m"+itoa(i), gpuOffer, core.Spot)
	}
	w.at(month)
	w.poll()
	s := w.cloud.Stats()
	// Binomial(2000, 0.25): mean 500, sd 19.4.
	if s.Notices < 422 || s.Notices > 578 {
		t.Errorf("%d of %d machines got a notice within a month, want 500 ± 78", s.Notices, n)
	}
	t.Logf("one month, %d machines: %d notices, %d reclaimed", n, s.Notices, s.Reclaimed)

	// Kept running (each reclaimed machine replaced), the notices per
	// machine-month approach the Poisson rate -ln(0.75) = 0.2877.
	w = newWorld(t, 8, Config{})
	const fleet, months = 100, 20
	for i := range fleet {
		w.acquire("f"+itoa(i), gpuOffer, core.Spot)
	}
	notices, next := 0, fleet
	for {
		at, ok := w.cloud.NextEventAt()
		if !ok || at.After(t0.Add(months*month)) {
			break
		}
		w.clk.Set(at)
		evs, _ := w.cloud.Poll(context.Background(), at)
		for _, e := range evs {
			switch e.Machine.State {
			case provider.Reclaiming:
				notices++
			case provider.Reclaimed:
				w.acquire("f"+itoa(next), gpuOffer, core.Spot)
				next++
			}
		}
	}
	// Exposure is fleet×months less the few minutes of notices: 2,000
	// machine-months, expect 575 ± 4·24.
	if notices < 479 || notices > 671 {
		t.Errorf("%d notices over %d machine-months, want about 575", notices, fleet*months)
	}
	t.Logf("%d machine-months: %d notices (%.4f a month)", fleet*months, notices, float64(notices)/(fleet*months))
}

func TestReclaimAfter(t *testing.T) {
	if got := reclaimAfter(0, 1); got != -1 {
		t.Errorf("rate 0: %v, want never", got)
	}
	if got := reclaimAfter(10000, 1); got != 0 {
		t.Errorf("rate 100%%: %v, want at once", got)
	}
	// The median of Exp(1) is ln 2: at 50% a month the median time is
	// one month exactly.
	if got, want := reclaimAfter(5000, 0.6931471805599453), core.Month.Duration(); got != want {
		t.Errorf("rate 50%%, median draw: %v, want %v", got, want)
	}
	if got := reclaimAfter(1, 1e6); got != -1 {
		t.Errorf("a draw past a century: %v, want never", got)
	}
}

func TestDelayDraws(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const n = 20000
	draw := func(d Delay) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = d.draw(r)
		}
		return out
	}
	if got := draw(Fixed(42 * time.Second))[0]; got != 42*time.Second {
		t.Errorf("fixed: %v", got)
	}
	var sum time.Duration
	for _, d := range draw(Uniform(time.Minute, 3*time.Minute)) {
		if d < time.Minute || d > 3*time.Minute || d%time.Second != 0 {
			t.Fatalf("uniform draw %v outside [1m, 3m] or not whole seconds", d)
		}
		sum += d
	}
	if mean := sum / n; mean < 118*time.Second || mean > 122*time.Second {
		t.Errorf("uniform mean %v, want 2m", mean)
	}
	ds := draw(LogNormal(2*time.Minute, 5*time.Minute))
	sum = 0
	over := 0
	for _, d := range ds {
		sum += d
		if d > 5*time.Minute {
			over++
		}
	}
	if mean := sum / n; mean < 115*time.Second || mean > 125*time.Second {
		t.Errorf("lognormal mean %v, want 2m", mean)
	}
	if share := float64(over) / n; share < 0.04 || share > 0.06 {
		t.Errorf("lognormal: %.3f of draws over p95, want 0.05", share)
	}
	if got := draw(LogNormal(time.Minute, time.Minute))[0]; got != time.Minute {
		t.Errorf("lognormal with p95 = mean: %v, want the mean", got)
	}
}

func TestConfigErrors(t *testing.T) {
	base := func() Config {
		return Config{Offers: testOffers(), Source: rand.NewPCG(1, 1), Clock: clock.NewManual(t0)}
	}
	tests := []struct {
		name string
		edit func(c *Config)
		msg  string
	}{
		{"no source", func(c *Config) { c.Source = nil }, "source: invalid value \"nil\""},
		{"no clock", func(c *Config) { c.Clock = nil }, "clock: invalid value"},
		{"duplicate offer", func(c *Config) { c.Offers = append(c.Offers, c.Offers[0]) }, `offers[3].id: invalid value "aws/r/gpu1": want a unique offer id`},
		{"unknown provider", func(c *Config) { c.ByProvider = map[string]Settings{"gcp": {}} }, `by_provider: invalid value "gcp": want a provider of an offer: aws, idc`},
		{"unknown offer", func(c *Config) { c.ByOffer = map[string]Settings{"x": {}} }, `by_offer: invalid value "x"`},
		{"failure", func(c *Config) { c.Default.FailureBP = new(int64(10001)) }, "default.failure_bp: invalid value \"10001\": want basis points 0..10000"},
		{"capacity", func(c *Config) { c.ByOffer = map[string]Settings{idcOffer: {Capacity: -1}} }, "by_offer[idc/r/v100x8].capacity"},
		{"notice", func(c *Config) { c.Default.Notice = dur(-time.Second) }, "default.notice"},
		{"uniform", func(c *Config) { c.Default.Delay = Uniform(time.Minute, time.Second) }, `default.delay: uniform: invalid value "1m0s..1s": want 0 <= min <= max`},
		{"fixed", func(c *Config) { c.Default.Delay = Fixed(-1) }, "default.delay: fixed"},
		{"lognormal mean", func(c *Config) { c.Default.Delay = LogNormal(0, time.Minute) }, "lognormal.mean"},
		{"lognormal p95 low", func(c *Config) { c.Default.Delay = LogNormal(time.Minute, time.Second) }, "lognormal.p95: invalid value \"1s\": want mean..3.87×mean (1m0s..3m52s)"},
		{"lognormal p95 high", func(c *Config) { c.Default.Delay = LogNormal(time.Minute, 4*time.Minute) }, "lognormal.p95"},
		{"incarnation case", func(c *Config) { c.Incarnation = "A1" }, `incarnation: invalid value "A1": want at most 16 lowercase letters and digits`},
		{"incarnation dash", func(c *Config) { c.Incarnation = "a-1" }, `incarnation: invalid value "a-1"`},
		{"incarnation long", func(c *Config) { c.Incarnation = strings.Repeat("a", 17) }, `incarnation: invalid value "aaaaaaaaaaaaaaaaa"`},
		{"series offer", func(c *Config) {
			c.Availability = &Availability{File: "a.csv", Steps: []Step{{Relative: true, Offer: "aws/r/gpu2", Line: 4}}}
		}, `sim: availability series: a.csv:4: offer: unknown offer "aws/r/gpu2": want * or the id of one of the 3 offers`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			_, err := New(c)
			if err == nil {
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// TestIncarnation: two Clouds of one seed that differ in incarnation
// (a server's process before and after a restart) name no machine alike,
// and draw alike: the incarnation changes ids and nothing else.
func TestIncarnation(t *testing.T) {
	run := func(inc string) (ids []string, evs []string) {
		w := newWorld(t, 7, Config{Incarnation: inc, Default: Settings{Delay: Uniform(time.Second, time.Minute), FailureBP: new(int64(2000))}})
		for i := range 20 {
			ids = append(ids, w.acquire("lease-"+strconv.Itoa(i), gpuOffer, core.OnDemand).ProviderID)
		}
		w.at(time.Hour)
		for _, e := range w.poll() {
			evs = append(evs, strings.Replace(e, "sim-"+inc+"-", "sim-", 1))
		}
		return ids, evs
	}
	before, beforeEvs := run("m1")
	after, afterEvs := run("m2")
	if before[0] != "sim-m1-000001" || after[0] != "sim-m2-000001" {
		t.Errorf("first ids %s and %s, want sim-m1-000001 and sim-m2-000001", before[0], after[0])
	}
	seen := map[string]bool{}
	for _, id := range before {
		seen[id] = true
	}
	for _, id := range after {
		if seen[id] {
			t.Errorf("machine id %s in both incarnations", id)
		}
	}
	if diff := cmp.Diff(beforeEvs, afterEvs); diff != "" {
		t.Errorf("the incarnation changed what the Cloud drew (-m1 +m2, ids unprefixed):\n%s", diff)
	}
	plain, plainEvs := run("")
	if plain[0] != "sim-000001" {
		t.Errorf("first id without an incarnation %s, want sim-000001", plain[0])
	}
	if diff := cmp.Diff(beforeEvs, plainEvs); diff != "" {
		t.Errorf("events with and without an incarnation differ (-m1 +none):\n%s", diff)
	}
}

func TestDemoConfig(t *testing.T) {
	clk := clock.NewManual(t0)
	c, err := New(DemoConfig(testOffers(), rand.NewPCG(1, 2), clk))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "x", OfferID: gpuOffer, Mode: core.Spot}); err != nil {
		t.Fatal(err)
	}
	at, ok := c.NextEventAt()
	if !ok || at.Sub(t0) < 10*time.Second || at.Sub(t0) > 15*time.Minute {
		t.Errorf("demo delay: next event at +%v, want a few minutes", at.Sub(t0))
	}
}

func TestDelayString(t *testing.T) {
	for d, want := range map[Delay]string{
		{}:                                   "unset",
		Fixed(time.Second):                   "fixed 1s",
		Uniform(time.Second, time.Minute):    "uniform 1s..1m0s",
		LogNormal(time.Minute, time.Hour/20): "lognormal mean 1m0s p95 3m0s",
	} {
		if got := d.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// TestConcurrent exercises the mutex under -race: the live server calls
// the Cloud from HTTP handlers and the loop at once.
func TestConcurrent(t *testing.T) {
	w := newWorld(t, 1, Config{Default: Settings{Capacity: 50, Delay: Uniform(0, time.Minute)}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			ctx := context.Background()
			for i := range 50 {
				m, err := w.cloud.Acquire(ctx, provider.AcquireRequest{ClientToken: itoa(g) + "-" + itoa(i), OfferID: gpuOffer, Mode: core.Spot})
				if err != nil && !errors.Is(err, provider.ErrCapacity) {
					t.Error(err)
					return
				}
				if _, err := w.cloud.Poll(ctx, t0.Add(time.Duration(i)*time.Second)); err != nil {
					t.Error(err)
				}
				if _, err := w.cloud.List(ctx); err != nil {
					t.Error(err)
				}
				w.cloud.NextEventAt()
				if err == nil && i%2 == 0 {
					if err := w.cloud.Release(ctx, m.ProviderID); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := w.cloud.InUse(gpuOffer); n > 50 {
		t.Errorf("InUse %d over capacity 50", n)
	}
}

func TestContextCancelled(t *testing.T) {
	w := newWorld(t, 1, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.cloud.Acquire(ctx, provider.AcquireRequest{ClientToken: "a", OfferID: gpuOffer, Mode: core.Spot}); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire = %v", err)
	}
	if err := w.cloud.Release(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Release = %v", err)
	}
	if _, err := w.cloud.List(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v", err)
	}
	if _, err := w.cloud.Poll(ctx, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll = %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// BenchmarkMonth runs a fleet of 5,000 spot machines for a simulated
// month, event to event, replacing every reclaimed machine, as the
// discrete-event simulator drives the Cloud.
func BenchmarkMonth(b *testing.B) {
	offers := testOffers()
	offers[0].Plans[1].Reclaim.MonthlyRateBP = 5000
	for b.Loop() {
		w := newWorld(b, 1, Config{Offers: offers, Default: Settings{Delay: LogNormal(2*time.Minute, 5*time.Minute)}})
		ctx := context.Background()
		next := 0
		acquire := func() {
			w.acquire("m"+itoa(next), gpuOffer, core.Spot)
			next++
		}
		for range 5000 {
			acquire()
		}
		end := t0.Add(core.Month.Duration())
		for {
			at, ok := w.cloud.NextEventAt()
			if !ok || at.After(end) {
				break
			}
			w.clk.Set(at)
			evs, _ := w.cloud.Poll(ctx, at)
			for _, e := range evs {
				if e.Machine.State == provider.Reclaimed {
					acquire()
				}
			}
		}
	}
}
