package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/policy"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func testOffers() []core.Offer {
	hour, month := int64(3600), core.Month.Seconds()
	return []core.Offer{
		{ID: "a100x8", Provider: "cloud", GPUModel: "A100", GPUs: 8, GPUMemMiB: 40960, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 24_000_000, Per: core.Hour, Granularity: 1, MinCharge: 60},
			{Mode: core.Spot, Price: 9_000_000, Per: core.Hour, Granularity: 1, MinCharge: 60, Reclaim: &core.ReclaimModel{Bucket: "5-10%", MonthlyRateBP: 750, NoticeSeconds: 120}},
			{Mode: core.Monthly, Price: 10_000_000_000, Per: core.Month, Granularity: month, Term: month},
		}},
		{ID: "a100x1", Provider: "cloud", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 3_200_000, Per: core.Hour, Granularity: hour},
			{Mode: core.Monthly, Price: 1_400_000_000, Per: core.Month, Granularity: month, Term: month},
		}},
	}
}

// burstyWorkload: a steady trickle plus a daily burst, mixed tiers and
// sizes, three days.
func burstyWorkload(seed uint64) *Workload {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := &Workload{Actual: map[string]time.Duration{}}
	tiers := []core.Tier{core.TierCore, core.TierRegular, core.TierOffline}
	for i := 0; i < 300; i++ {
		day := rng.IntN(3)
		at := t0.Add(time.Duration(day)*24*time.Hour + time.Duration(rng.IntN(24*60))*time.Minute)
		if rng.IntN(3) == 0 {
			at = t0.Add(time.Duration(day)*24*time.Hour + 14*time.Hour + time.Duration(rng.IntN(60))*time.Minute)
		}
		d := time.Duration(10+rng.IntN(300)) * time.Minute
		j := &core.Job{ID: fmt.Sprintf("j%03d", i), Team: fmt.Sprintf("team%d", rng.IntN(3)), Tier: tiers[rng.IntN(3)], Submit: at, EstDuration: d,
			Request: core.Request{GPUs: []int{1, 1, 1, 2, 4, 8}[rng.IntN(6)], MilliPerGPU: core.WholeGPU}, Interruptible: rng.IntN(2) == 0, CheckpointInterval: 15 * time.Minute}
		if j.Request.GPUs == 1 && rng.IntN(3) == 0 {
			j.Request.MilliPerGPU = core.Milli(250 * (1 + rng.IntN(3)))
		}
		w.Jobs = append(w.Jobs, j)
		w.Actual[j.ID] = d
	}
	return w
}

func testConfig(w *Workload) Config {
	return Config{Workload: w, Offers: testOffers(), Seed: 7, Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute)}}}
}

func TestPoliciesSideBySide(t *testing.T) {
	w := burstyWorkload(1)
	bound, err := PriceBound(w, testOffers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]*Result{}
	for _, name := range policy.PresetNames {
		p, _ := policy.Preset(name)
		r, err := Run(context.Background(), testConfig(w), p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		results[name] = r
		t.Logf("%-12s cost %12s  paid %8.1f GPU-h  alloc %8.1f GPU-h  idle %5.1f%%  wait p95 %6ds  core p95 %6ds  preempt %d  reclaims %d  lost %.1f GPU-h  leases %d  steps %d",
			name, r.Cost, float64(r.PaidMilliSec)/3.6e6, float64(r.AllocatedMilliSec)/3.6e6, float64(r.IdleShareBP())/100, r.Waits.P95, r.WaitsByTier[core.TierCore].P95, r.Preemptions, r.Reclaims, float64(r.LostMilliSec)/3.6e6, r.Leases, r.Steps)
		if r.Unfinished != 0 {
			t.Errorf("%s: %d units unfinished", name, r.Unfinished)
		}
		if r.Cost < bound {
			t.Errorf("%s: cost %s below the lower bound %s", name, r.Cost, bound)
		}
		if r.AllocatedMilliSec > r.PaidMilliSec {
			t.Errorf("%s: allocated %d > paid %d milli-GPU-seconds", name, r.AllocatedMilliSec, r.PaidMilliSec)
		}
	}
	t.Logf("price lower bound %s", bound)
	g := results["gpufleet"]
	for _, name := range []string{"static-peak", "reactive", "autostop"} {
		if g.Cost >= results[name].Cost {
			t.Errorf("gpufleet cost %s not below %s's %s", g.Cost, name, results[name].Cost)
		}
	}
}

func TestDeterministicPerSeed(t *testing.T) {
	w := burstyWorkload(2)
	p, _ := policy.Preset("gpufleet")
	a, err := Run(context.Background(), testConfig(w), p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(context.Background(), testConfig(w), p)
	a.waits, b.waits = nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs with seed 7 differ: cost %s vs %s", a.Cost, b.Cost)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, _ := policy.Preset("gpufleet")
	if _, err := Run(ctx, testConfig(burstyWorkload(3)), p); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A lease the bill cannot price fails the run, naming it, instead of
// counting as free.
func TestUnpricedLeaseIsAnError(t *testing.T) {
	o := testOffers()[0]
	r := newResult(policy.Default(), nil)
	l := &engine.Lease{Lease: core.Lease{ID: "L7", OfferID: o.ID, Mode: o.Plans[0].Mode, Start: t0, End: t0.Add(-time.Hour)}, Offer: &o, Plan: &o.Plans[0]}
	r.addLease(l)
	if r.err == nil || !strings.Contains(r.err.Error(), "L7") || r.Cost != 0 || r.Leases != 0 {
		t.Fatalf("err %v, cost %s, leases %d: want an error naming L7 and nothing billed", r.err, r.Cost, r.Leases)
	}
	l.End = t0.Add(time.Hour)
	r2 := newResult(policy.Default(), nil)
	r2.addLease(l)
	if r2.err != nil || r2.Cost <= 0 {
		t.Fatalf("a valid lease: err %v, cost %s", r2.err, r2.Cost)
	}
}

// The waiting-time CDF: nearest-rank percentiles, 0 the shortest wait and
// 100 the longest.
func TestWaitPercentiles(t *testing.T) {
	ws := make([]int64, 200)
	for i := range ws {
		ws[i] = int64(200 - i) // 200 .. 1, unsorted
	}
	w := summarize(ws)
	if len(w.Percentiles) != 101 || w.Percentiles[0] != 1 || w.Percentiles[100] != 200 || w.Percentiles[50] != 100 || w.Percentiles[95] != w.P95 || w.P95 != 190 {
		t.Fatalf("percentiles %v (p95 %d)", w.Percentiles, w.P95)
	}
	for k := 1; k <= 100; k++ {
		if w.Percentiles[k] < w.Percentiles[k-1] {
			t.Fatalf("not a CDF: p%d %d < p%d %d", k, w.Percentiles[k], k-1, w.Percentiles[k-1])
		}
	}
}

// The lease log is the bill itself, lease by lease: as many records as
// leases, costs summing to the cost (by mode too), each lease billed at
// least the time it was held (a reclaimed spot lease exactly that), and
// the work on each adding up to the run's allocated GPU-time, no lease
// holding more than it paid for.
func TestLeaseRecordsAddUpToTheBill(t *testing.T) {
	w := burstyWorkload(4)
	for _, name := range policy.PresetNames {
		p, _ := policy.Preset(name)
		var recs []LeaseRecord
		cfg := testConfig(w)
		cfg.Leases = func(l LeaseRecord) { recs = append(recs, l) }
		r, err := Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(recs) != r.Leases || len(recs) == 0 {
			t.Fatalf("%s: %d records for %d leases", name, len(recs), r.Leases)
		}
		var sum core.Micros
		var alloc int64
		byMode := map[core.BillingMode]core.Micros{}
		seen := map[string]bool{}
		for _, l := range recs {
			sum += l.Cost
			byMode[l.Mode] += l.Cost
			if seen[l.ID] {
				t.Errorf("%s: lease %s priced twice", name, l.ID)
			}
			seen[l.ID] = true
			held := l.End.Sub(l.Start)
			if held < 0 || l.Billed < held.Truncate(time.Second) || l.Reclaimed && l.Billed != held.Round(time.Second) {
				t.Errorf("%s: lease %s held %s, billed %s (reclaimed %v)", name, l.ID, held, l.Billed, l.Reclaimed)
			}
			if l.GPUs <= 0 || l.Offer == "" {
				t.Errorf("%s: lease %s: %d GPUs of offer %q", name, l.ID, l.GPUs, l.Offer)
			}
			alloc += l.AllocatedMilliSec
			if paid := int64(l.GPUs) * int64(core.WholeGPU) * int64(l.Billed/time.Second); l.AllocatedMilliSec < 0 || l.AllocatedMilliSec > paid {
				t.Errorf("%s: lease %s: %d milli-GPU-seconds allocated, %d paid", name, l.ID, l.AllocatedMilliSec, paid)
			}
		}
		if sum != r.Cost {
			t.Errorf("%s: records sum to %s, the bill is %s", name, sum, r.Cost)
		}
		if r.PaidArriving <= 0 || r.PaidArriving > r.PaidMilliSec || r.AllocatedArriving > r.AllocatedMilliSec || r.AllocatedArriving > r.PaidArriving {
			t.Errorf("%s: before the last submission %d milli-GPU-seconds paid and %d allocated; in all %d and %d", name, r.PaidArriving, r.AllocatedArriving, r.PaidMilliSec, r.AllocatedMilliSec)
		}
		if alloc != r.AllocatedMilliSec || alloc == 0 {
			t.Errorf("%s: leases' allocated time sums to %d milli-GPU-seconds, the run's is %d", name, alloc, r.AllocatedMilliSec)
		}
		for m, c := range r.CostByMode {
			if byMode[m] != c {
				t.Errorf("%s: %s records sum to %s, the bill says %s", name, m, byMode[m], c)
			}
		}
	}
}

// The idle share before the last submission counts the paid and the
// allocated time up to it: a day's term rented for an hour's job at t0
// and holding a minute's job submitted three hours later has paid from
// its start to then, and held the hour's job.
func TestIdleShareArriving(t *testing.T) {
	day := int64(24 * 3600)
	offers := []core.Offer{{ID: "v100x1", Provider: "idc", GPUModel: "V100", GPUs: 1, GPUMemMiB: 32768, Currency: "USD", Plans: []core.PricePlan{
		{Mode: core.Daily, Price: 10_000_000, Per: core.Day, Granularity: day, Term: day},
	}}}
	last := t0.Add(3 * time.Hour)
	w := &Workload{Actual: map[string]time.Duration{"a": time.Hour, "b": time.Minute}, Jobs: []*core.Job{
		{ID: "a", Team: "t", Tier: core.TierCore, Submit: t0, EstDuration: time.Hour, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}},
		{ID: "b", Team: "t", Tier: core.TierCore, Submit: last, EstDuration: time.Minute, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}},
	}}
	cfg := testConfig(w)
	cfg.Offers = offers
	p, _ := policy.Preset("gpufleet")
	r, recs := runRecords(t, cfg, p)
	if len(recs) != 1 || recs[0].Mode != core.Daily || !recs[0].Start.Before(last) {
		t.Fatalf("leases %+v, want one daily term started before %s", recs, last)
	}
	if r.LastSubmit != last {
		t.Errorf("last submission %s, want %s", r.LastSubmit, last)
	}
	if want := int64(core.WholeGPU) * int64(last.Sub(recs[0].Start)/time.Second); r.PaidArriving != want {
		t.Errorf("paid before the last submission %d milli-GPU-seconds, want %d (from %s)", r.PaidArriving, want, recs[0].Start)
	}
	if want := int64(core.WholeGPU) * 3600; r.AllocatedArriving != want {
		t.Errorf("allocated before the last submission %d milli-GPU-seconds, want %d", r.AllocatedArriving, want)
	}
	if r.PaidMilliSec != int64(core.WholeGPU)*day || r.AllocatedMilliSec != int64(core.WholeGPU)*(3600+60) {
		t.Errorf("paid %d and allocated %d milli-GPU-seconds in all", r.PaidMilliSec, r.AllocatedMilliSec)
	}
	if a, all := r.IdleShareArrivingBP(), r.IdleShareBP(); a >= all || a <= 0 {
		t.Errorf("idle share %d bp before the last submission, %d bp in all", a, all)
	}
}

// A replay steps just after each busy committed machine's boundary, so a
// machine whose core job runs on for nine days renews on a week there
// even when nothing else happens, and on days again at the week's end:
// the lease record lists its terms, and its cost (80 + 500 + 3 × 80) is
// the bill, split by mode as its terms were billed.
func TestRenewalInAReplay(t *testing.T) {
	day := int64(24 * 3600)
	offers := []core.Offer{{ID: "v100x8", Provider: "idc", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "USD", Plans: []core.PricePlan{
		{Mode: core.Daily, Price: 80_000_000, Per: core.Day, Granularity: day, Term: day},
		{Mode: core.Weekly, Price: 500_000_000, Per: core.Week, Granularity: 7 * day, Term: 7 * day},
	}}}
	run := 10 * 24 * time.Hour
	w := &Workload{Actual: map[string]time.Duration{"long": run}, Jobs: []*core.Job{
		{ID: "long", Team: "t", Tier: core.TierCore, Submit: t0, EstDuration: run, Request: core.Request{GPUs: 8, MilliPerGPU: core.WholeGPU}},
	}}
	cfg := testConfig(w)
	cfg.Offers = offers
	p, _ := policy.Preset("gpufleet")
	r, recs := runRecords(t, cfg, p)
	if len(recs) != 1 {
		t.Fatalf("%d leases, want 1", len(recs))
	}
	l := recs[0]
	s := l.Start
	want := []core.Term{{Mode: core.Daily, Start: s}, {Mode: core.Weekly, Start: s.Add(24 * time.Hour)}, {Mode: core.Daily, Start: s.Add(8 * 24 * time.Hour)}}
	if len(l.Terms) != len(want) || l.Mode != core.Daily {
		t.Fatalf("terms %v (mode %s), want %v", l.Terms, l.Mode, want)
	}
	for i := range want {
		if l.Terms[i].Mode != want[i].Mode || !l.Terms[i].Start.Equal(want[i].Start) {
			t.Errorf("term %d: %s from %s, want %s from %s", i, l.Terms[i].Mode, l.Terms[i].Start, want[i].Mode, want[i].Start)
		}
	}
	if l.Cost != 820_000_000 || r.Cost != l.Cost || l.Billed != 11*24*time.Hour {
		t.Errorf("lease cost %s billed %s, bill %s; want 820 for 11 days", l.Cost, l.Billed, r.Cost)
	}
	if r.CostByMode[core.Daily] != 320_000_000 || r.CostByMode[core.Weekly] != 500_000_000 {
		t.Errorf("cost by mode %v, want daily 320 and weekly 500", r.CostByMode)
	}
}

// runRecords replays cfg under p and returns the result with its lease
// records, failing t on an error.
func runRecords(t *testing.T, cfg Config, p policy.Policy) (*Result, []LeaseRecord) {
	t.Helper()
	var recs []LeaseRecord
	cfg.Leases = func(l LeaseRecord) { recs = append(recs, l) }
	r, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return r, recs
}
