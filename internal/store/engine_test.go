package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/sched"
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
			b := NewBaseline(&engine.State{Units: []*engine.Unit{other, u}})
			tc.change(u)
			var want []Unit
			if tc.changed {
				want = []Unit{UnitFromEngine(u)}
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
			b := NewBaseline(&engine.State{Leases: []*engine.Lease{l}})
			tc.change(l)
			if got := b.LeaseChanged(l); got != tc.changed {
				t.Errorf("LeaseChanged = %v, want %v", got, tc.changed)
			}
		})
	}
	if !NewBaseline(&engine.State{}).LeaseChanged(lease()) {
		t.Error("a lease the baseline does not have is unchanged, want changed")
	}
}
