// Package readmodeltest is the read model's test fixture: a small fleet
// whose overview is computed by hand (Store's comment), shared by the
// read model's tests and the API's.
package readmodeltest

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// Now is a Monday 10:00, the second day of March.
var Now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// Catalog is two 2-GPU A100 offers: s2 billed by the second, h2 by the
// started hour.
func Catalog() *pricing.Catalog {
	off := func(id string, price core.Micros, gran int64) core.Offer {
		return core.Offer{ID: id, Provider: "t", Region: "r", InstanceType: id, GPUModel: "A100", GPUs: 2, GPUMemMiB: 40960, VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
			Plans: []core.PricePlan{{Mode: core.OnDemand, Price: price, Per: core.Hour, Granularity: gran}}}
	}
	// s2: 3.6 an hour per second (0.001 a second); h2: 2 an hour per
	// started hour.
	return &pricing.Catalog{Currency: "USD", Offers: []core.Offer{off("t/r/s2", 3_600_000, 1), off("t/r/h2", 2_000_000, 3600)}}
}

// Store is a new SQLite store holding, as of Now:
//
//   - L1 (s2, ready) launched yesterday 22:00, idle since 09:30, never
//     used: 10 h today (36), 12 h this month (43.2), all idle;
//   - L2 (h2, released) from Feb 28 23:30 to Mar 1 00:10, billed to 00:30:
//     its started hour was incurred in February, nothing this month;
//   - L3 (h2, ready) launched today 09:20, running j1 (team a) at 500
//     milli on GPU 0 since 09:21: its started hour (2) is incurred at
//     launch, 20 min to its boundary; a holds 39 min × 0.5 GPU of its 2
//     GPU-hours, 0.325 of the 2;
//   - j2 (team b, core, 2 GPUs) and j3 (team a, offline, 1 GPU) queued;
//   - samples: L1 GPU 0 at 10% for 40 min (idle), L1 GPU 1 at 50%, L3 GPU 0
//     last heard 10 min ago (stale);
//   - team a's budget 100; the loop's own record of its spend (25) is not
//     what the dashboard shows; open alerts of teams a and b.
func Store(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/ui.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	Fill(t, st)
	return st
}

// Fill writes Store's rows to st.
func Fill(t testing.TB, st store.Store) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Teams().CreateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1, MonthlyBudget: 100_000_000}))
	must(st.Teams().CreateTeam(ctx, core.Team{ID: "b", Name: "b", Weight: 1}))
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		must(err)
		return v
	}
	lease := func(id, offer string, state core.LeaseState, start, end, idle string) {
		l := store.Lease{Lease: core.Lease{ID: id, OfferID: offer, Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: id}, Requested: at(start)}
		must(st.Leases().CreateLease(ctx, l))
		l.State, l.ProviderID, l.Start, l.ReadyAt = state, "p-"+id, at(start), at(start)
		if end != "" {
			l.End = at(end)
		}
		if idle != "" {
			l.IdleSince = at(idle)
		}
		must(st.Leases().UpdateLease(ctx, l))
	}
	lease("L1", "t/r/s2", core.LeaseReady, "2026-03-01T22:00:00Z", "", "2026-03-02T09:30:00Z")
	lease("L2", "t/r/h2", core.LeaseReleased, "2026-02-28T23:30:00Z", "2026-03-01T00:10:00Z", "2026-03-01T00:00:00Z")
	lease("L3", "t/r/h2", core.LeaseReady, "2026-03-02T09:20:00Z", "", "")
	job := func(id, team string, tier core.Tier, gpus int, milli core.Milli) {
		_, _, err := st.Jobs().SubmitJob(ctx, core.Job{ID: id, Team: team, Tier: tier, Request: core.Request{GPUs: gpus, MilliPerGPU: milli}, Submit: at("2026-03-02T09:00:00Z")}, "")
		must(err)
	}
	job("j1", "a", core.TierRegular, 1, 500)
	job("j2", "b", core.TierCore, 2, 1000)
	job("j3", "a", core.TierOffline, 1, 1000)
	must(st.Units().SaveUnits(ctx, store.Unit{JobID: "j1", State: core.JobRunning, Parts: []store.Part{{LeaseID: "L3", GPUs: []int{0}}}, Start: at("2026-03-02T09:21:00Z")}))
	var samples []core.Sample
	for m := 40; m >= 0; m -= 10 {
		ts := Now.Add(-time.Duration(m) * time.Minute)
		samples = append(samples, core.Sample{LeaseID: "L1", GPU: 0, At: ts, UtilPct: 10}, core.Sample{LeaseID: "L1", GPU: 1, At: ts, UtilPct: 50})
	}
	samples = append(samples, core.Sample{LeaseID: "L3", GPU: 0, At: Now.Add(-10 * time.Minute), UtilPct: 90})
	must(st.Samples().InsertSamples(ctx, samples...))
	_, err := st.Loop().SaveLoop(ctx, store.LoopState{Spent: map[string]core.Micros{"a": 25_000_000}})
	must(err)
	for _, team := range []string{"a", "b"} {
		_, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "budget", Team: team, Reason: "test", Raised: Now.Add(-time.Hour)})
		must(err)
	}
	// The loop's first idle rung on L1's GPU 0, raised 10 minutes ago
	// (low for idle.for, 30 minutes, by then), and one on GPU 1 that it
	// resolved: GPU 1 works again.
	_, _, err = st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "idle-alert", LeaseID: "L1", GPU: 0, Reason: "GPU 0 of L1 under 20% utilization for 30m", Raised: Now.Add(-10 * time.Minute)})
	must(err)
	gone, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "idle-alert", LeaseID: "L1", GPU: 1, Reason: "GPU 1 of L1 under 20% utilization for 30m", Raised: Now.Add(-20 * time.Minute)})
	must(err)
	must(st.Alerts().ResolveAlert(ctx, gone.ID, Now.Add(-5*time.Minute)))
}
