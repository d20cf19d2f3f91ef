package sim

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// t0 is the start of every test's clock.
var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

const (
	gpuOffer = "aws/r/gpu1"   // on-demand and spot (25% a month, 120 s notice)
	idcOffer = "idc/r/v100x8" // daily and monthly terms
	bareSpot = "aws/r/bare"   // spot without a reclaim model
)

// testOffers is a small catalog with the shapes the Cloud cares about.
func testOffers() []core.Offer {
	hourly := func(mode core.BillingMode, price core.Micros) core.PricePlan {
		return core.PricePlan{Mode: mode, Price: price, Per: core.Hour, Granularity: 1}
	}
	spot := hourly(core.Spot, 400_000)
	spot.Reclaim = &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}
	return []core.Offer{
		{ID: gpuOffer, Provider: "aws", Region: "r", InstanceType: "gpu1", GPUModel: "NVIDIA A10G", GPUs: 1, Currency: "USD",
			Plans: []core.PricePlan{hourly(core.OnDemand, 1_000_000), spot}},
		{ID: idcOffer, Provider: "idc", Region: "r", InstanceType: "v100x8", GPUModel: "NVIDIA Tesla V100", GPUs: 8, Currency: "USD",
			Plans: []core.PricePlan{
				{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: 86400, Term: 86400},
				{Mode: core.Monthly, Price: 2_000_000_000, Per: core.Month, Granularity: 730 * 3600, Term: 730 * 3600},
			}},
		{ID: bareSpot, Provider: "aws", Region: "r", InstanceType: "bare", GPUModel: "NVIDIA T4", GPUs: 1, Currency: "USD",
			Plans: []core.PricePlan{hourly(core.Spot, 200_000)}},
	}
}

// tester is what the helpers need of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

// world is a Cloud on a manual clock, with helpers that fail the test on
// unexpected errors.
type world struct {
	t     tester
	clk   *clock.Manual
	cloud *Cloud
}

// newWorld builds a Cloud from cfg, filling in the test catalog, a seeded
// source and a manual clock at t0 where cfg leaves them empty.
func newWorld(t tester, seed uint64, cfg Config) *world {
	t.Helper()
	clk := clock.NewManual(t0)
	if cfg.Offers == nil {
		cfg.Offers = testOffers()
	}
	if cfg.Source == nil {
		cfg.Source = rand.NewPCG(seed, 0)
	}
	if cfg.Clock == nil {
		cfg.Clock = clk
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &world{t: t, clk: clk, cloud: c}
}

func (w *world) acquire(token, offer string, mode core.BillingMode) provider.Machine {
	w.t.Helper()
	m, err := w.cloud.Acquire(context.Background(), provider.AcquireRequest{ClientToken: token, OfferID: offer, Mode: mode})
	if err != nil {
		w.t.Fatalf("Acquire(%s, %s, %s): %v", token, offer, mode, err)
	}
	return m
}

func (w *world) release(id string) {
	w.t.Helper()
	if err := w.cloud.Release(context.Background(), id); err != nil {
		w.t.Fatalf("Release(%s): %v", id, err)
	}
}

// at moves the clock to t0+d.
func (w *world) at(d time.Duration) { w.clk.Set(t0.Add(d)) }

// poll polls at the clock's time and returns the events as short lines.
func (w *world) poll() []string {
	w.t.Helper()
	evs, err := w.cloud.Poll(context.Background(), w.clk.Now())
	if err != nil {
		w.t.Fatalf("Poll: %v", err)
	}
	return lines(evs)
}

func (w *world) list() []provider.Machine {
	w.t.Helper()
	ms, err := w.cloud.List(context.Background())
	if err != nil {
		w.t.Fatalf("List: %v", err)
	}
	return ms
}

// lines renders events as "+90s sim-000001 ready".
func lines(evs []provider.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, line(e))
	}
	return out
}

func line(e provider.Event) string {
	s := "+" + e.At.Sub(t0).String() + " " + e.Machine.ProviderID + " " + string(e.Machine.State)
	if e.Machine.State == provider.Reclaiming {
		s += " at +" + e.Machine.ReclaimAt.Sub(t0).String()
	}
	return s
}

func ids(ms []provider.Machine) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(m.ProviderID + ":" + string(m.State))
	}
	return b.String()
}

func dur(d time.Duration) *time.Duration { return &d }
