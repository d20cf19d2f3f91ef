package server

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// TestBaselineChanged: a change to any field the store keeps makes the
// unit changed, and nothing else does.
func TestBaselineChanged(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	job := &core.Job{ID: "j", Shards: 2}
	unit := func() *engine.Unit {
		return &engine.Unit{Unit: sched.Unit{Job: job, Shard: 1}, State: core.JobRunning,
			Parts: []engine.Assigned{{LeaseID: "L1", GPUs: []int{0, 1}}}, Start: at, Since: at.Add(-time.Minute)}
	}
	for _, tc := range []struct {
		name    string
		change  func(u *engine.Unit)
		changed bool
	}{
		{"nothing", func(*engine.Unit) {}, false},
		{"same instant, other location and a monotonic reading", func(u *engine.Unit) {
			now := time.Now()
			u.Start = now.Add(at.Sub(now)).In(time.FixedZone("x", 3600))
		}, false},
		{"parts cloned", func(u *engine.Unit) { u.Parts = []engine.Assigned{{LeaseID: "L1", GPUs: []int{0, 1}}} }, false},
		{"state", func(u *engine.Unit) { u.State = core.JobCheckpointing }, true},
		{"parts gone", func(u *engine.Unit) { u.Parts = nil }, true},
		{"parts empty", func(u *engine.Unit) { u.Parts = []engine.Assigned{} }, true},
		{"other lease", func(u *engine.Unit) { u.Parts[0].LeaseID = "L2" }, true},
		{"other gpu", func(u *engine.Unit) { u.Parts[0].GPUs[1] = 2 }, true},
		{"start", func(u *engine.Unit) { u.Start = at.Add(time.Microsecond) }, true},
		{"last checkpoint", func(u *engine.Unit) { u.LastCheckpoint = at }, true},
		{"done", func(u *engine.Unit) { u.Done = time.Second }, true},
		{"since", func(u *engine.Unit) { u.Since = at }, true},
		{"deferred until", func(u *engine.Unit) { u.DeferredUntil = at }, true},
		{"reclaims", func(u *engine.Unit) { u.Reclaims++ }, true},
		{"preemptions", func(u *engine.Unit) { u.Preemptions++ }, true},
		{"no spot", func(u *engine.Unit) { u.NoSpot = true }, true},
		{"lost", func(u *engine.Unit) { u.LostMilliSeconds = 1 }, true},
		{"end", func(u *engine.Unit) { u.End = at }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other, u := unit(), unit()
			b := newBaseline(&engine.State{Units: []*engine.Unit{other, u}})
			tc.change(u)
			var want []store.Unit
			if tc.changed {
				want = []store.Unit{unitFromEngine(u)}
			}
			if diff := cmp.Diff(want, b.Changed()); diff != "" {
				t.Errorf("Changed() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBaselineLeaseChanged: a change to any field the store keeps of a
// lease makes it changed, a lease not loaded is changed, and nothing
// else is.
func TestBaselineLeaseChanged(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	lease := func() *engine.Lease {
		return &engine.Lease{Lease: core.Lease{ID: "L1", OfferID: "o", Mode: core.OnDemand, Start: at, State: core.LeaseReady, ClientToken: "L1", ProviderID: "m-1"},
			ReadyAt: at, For: []string{"j#0"}}
	}
	for _, tc := range []struct {
		name    string
		change  func(l *engine.Lease)
		changed bool
	}{
		{"nothing", func(*engine.Lease) {}, false},
		{"same instant elsewhere", func(l *engine.Lease) { l.ReadyAt = at.In(time.FixedZone("x", 3600)) }, false},
		{"state", func(l *engine.Lease) { l.State = core.LeaseDraining }, true},
		{"provider id", func(l *engine.Lease) { l.ProviderID = "m-2" }, true},
		{"end", func(l *engine.Lease) { l.End = at }, true},
		{"committed end", func(l *engine.Lease) { l.CommittedEnd = at }, true},
		{"ready at", func(l *engine.Lease) { l.ReadyAt = at.Add(time.Second) }, true},
		{"reclaim at", func(l *engine.Lease) { l.ReclaimAt = at }, true},
		{"idle since", func(l *engine.Lease) { l.IdleSince = at }, true},
		{"rented for", func(l *engine.Lease) { l.For = []string{"j#1"} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lease()
			b := newBaseline(&engine.State{Leases: []*engine.Lease{l}})
			tc.change(l)
			if got := b.LeaseChanged(l); got != tc.changed {
				t.Errorf("LeaseChanged = %v, want %v", got, tc.changed)
			}
		})
	}
	if !newBaseline(&engine.State{}).LeaseChanged(lease()) {
		t.Error("a lease the baseline does not have is unchanged, want changed")
	}
}

// TestEngineRoundTrip: an engine unit and lease with every exported field
// set come back exactly through the store and a restart's
// loadEngineState, on both stores: a field added to engine.Unit or
// engine.Lease fails here until the store keeps it. A lease whose offer
// left the catalog makes the restart fail with store.ErrNotFound.
func TestEngineRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) func() (store.Store, error)
	}{
		{"sqlite", func(t *testing.T) func() (store.Store, error) {
			path := filepath.Join(t.TempDir(), "fleet.db")
			return func() (store.Store, error) { return sqlite.Open(context.Background(), path, sqlite.Options{}) }
		}},
		{"postgres", pgOpener},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.open(t)()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			engineRoundTrip(t, s)
		})
	}
}

func engineRoundTrip(t *testing.T, s store.Store) {
	c := t.Context()
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must(s.Teams().CreateTeam(c, core.Team{ID: "ml", Name: "ml"}), "create team")
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	sj, _, err := s.Jobs().SubmitJob(c, core.Job{ID: "j", Team: "ml", User: "alice", Tier: core.TierRegular, Shards: 4,
		Request:     core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU, Models: []string{"L4"}},
		EstDuration: time.Hour, Submit: at}, "")
	must(err, "submit")

	n := 0
	var u engine.Unit
	storetest.Fill(t, &u, &n)
	u.Job, u.Shard = &sj.Job, 2
	must(s.Units().SaveUnits(c, unitFromEngine(&u)), "save unit")

	offer := &core.Offer{ID: "aws/us-east-1/g6.xlarge", Provider: "aws", GPUModel: "L4", GPUs: 1, Plans: []core.PricePlan{
		{Mode: core.OnDemand, Price: 800_000, Per: "hour", Granularity: 1},
		{Mode: core.Spot, Price: 300_000, Per: "hour", Granularity: 1},
	}}
	var l engine.Lease
	storetest.Fill(t, &l, &n)
	l.OfferID, l.Offer, l.Plan = offer.ID, offer, &offer.Plans[1]
	for i := range l.Earlier { // terms are oldest first, before the current one
		l.Earlier[i].Start = l.Start.Add(time.Duration(i-len(l.Earlier)) * 24 * time.Hour)
	}
	in := leaseFromEngine(&l)
	in.State, in.Requested = core.LeaseRequested, at
	must(s.Leases().CreateLease(c, in), "create lease")
	must(s.Leases().UpdateLease(c, leaseFromEngine(&l)), "update lease")

	catalog := func(id string) (*core.Offer, bool) { return offer, id == offer.ID }
	var st *engine.State
	must(s.Tx(c, func(tx store.Tx) error {
		var err error
		st, _, err = loadEngineState(c, tx, catalog)
		return err
	}), "load engine state")
	if d := cmp.Diff([]*engine.Lease{&l}, st.Leases, cmpopts.IgnoreUnexported(engine.Lease{})); d != "" {
		t.Errorf("leases (-want +got)\n%s", d)
	}
	var unit *engine.Unit
	var ofJ []*engine.Unit
	for _, x := range st.Units {
		ofJ = append(ofJ, x)
		if x.Shard == 2 {
			unit = x
		}
	}
	if len(ofJ) != 4 || unit == nil {
		t.Fatalf("%d live units of j, want 4 with shard 2 among them", len(ofJ))
	}
	if d := cmp.Diff(&u, unit, cmpopts.IgnoreUnexported(engine.Unit{})); d != "" {
		t.Errorf("unit (-want +got)\n%s", d)
	}
	if ofJ[0].Job != ofJ[3].Job {
		t.Error("units of one job do not share its *core.Job")
	}

	gone := store.Lease{Lease: core.Lease{ID: "gone", OfferID: "aws/gone", Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: "gone"}, Requested: at}
	must(s.Leases().CreateLease(c, gone), "create lease of a vanished offer")
	if _, _, err := loadEngineState(c, s, catalog); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("restart with a lease whose offer is gone: %v, want store.ErrNotFound", err)
	}
}
