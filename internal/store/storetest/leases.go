package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func testUnits(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	j := job("j", "ml")
	j.Shards = 3
	submit(t, s, j)
	submit(t, s, job("k", "ml"))

	u0 := store.Unit{JobID: "j", Shard: 0, State: core.JobRunning, Parts: []store.Part{{LeaseID: "L1", GPUs: []int{0, 1}}, {LeaseID: "L2", GPUs: []int{3}}},
		Start: at(5), LastCheckpoint: at(15), Done: 1234567890, Since: at(1), Reclaims: 1, Preemptions: 2, NoSpot: true, LostMilliSeconds: 42_000}
	u1 := store.Unit{JobID: "j", Shard: 1, State: core.JobSucceeded, Start: at(2), Done: 3600e9, Since: at(1), End: at(62), Parts: []store.Part{}}
	u2 := store.Unit{JobID: "j", Shard: 2, State: core.JobPending, Since: at(1), DeferredUntil: at(120)}
	ok(t, s.Units().SaveUnits(c, u0, u1, u2), "save units")
	got, err := s.Units().ListUnits(c, "j")
	ok(t, err, "list units")
	diff(t, "units", []store.Unit{u0, u1, u2}, got)

	live, err := s.Units().ListLiveUnits(c)
	ok(t, err, "live units")
	diff(t, "live units", []store.Unit{u0, u2, {JobID: "k", State: core.JobPending, Since: t0}}, live)

	// A finished unit stays finished; saving it unchanged is fine.
	ok(t, s.Units().SaveUnits(c, u1), "save finished unit as it is")
	bad := u1
	bad.State = core.JobRunning
	wantErr(t, s.Units().SaveUnits(c, bad), store.ErrConflict, "resurrect a finished unit")
	// All or nothing: a bad unit in a batch leaves the others unsaved.
	moved := u2
	moved.State = core.JobRunning
	wantErr(t, s.Units().SaveUnits(c, moved, bad), store.ErrConflict, "batch with a bad unit")
	wantErr(t, s.Units().SaveUnits(c, store.Unit{JobID: "j", Shard: 7, State: core.JobPending}), store.ErrNotFound, "unit beyond the shards")
	wantErr(t, s.Units().SaveUnits(c, store.Unit{JobID: "nope", State: core.JobPending}), store.ErrNotFound, "unit of missing job")
	got, err = s.Units().ListUnits(c, "j")
	ok(t, err, "list units after failures")
	diff(t, "units after failed saves", []store.Unit{u0, u1, u2}, got)
}

func testLeases(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	l1, l2, l3 := intent("L1"), intent("L2"), intent("L3")
	l1.For = []string{"j1", "j2#0"}
	l2.Mode = core.Spot
	l2intent := l2
	for _, l := range []store.Lease{l1, l2, l3} {
		ok(t, s.Leases().CreateLease(c, l), "create "+l.ID)
	}
	got, err := s.Leases().GetLease(c, "L1")
	ok(t, err, "get L1")
	diff(t, "intent", l1, got)
	got, err = s.Leases().LeaseByClientToken(c, "ct-L2")
	ok(t, err, "by client token")
	diff(t, "L2 by token", l2, got)

	dup := intent("L1")
	dup.ClientToken = "other"
	wantErr(t, s.Leases().CreateLease(c, dup), store.ErrConflict, "same id twice")
	dup = intent("L9")
	dup.ClientToken = "ct-L1"
	wantErr(t, s.Leases().CreateLease(c, dup), store.ErrConflict, "same client token twice")
	ready := intent("L8")
	ready.State = core.LeaseReady
	wantField(t, s.Leases().CreateLease(c, ready), "state", "ready", "create a lease that is not an intent")
	badFor := intent("L7")
	badFor.For = []string{"j1", ""}
	wantField(t, s.Leases().CreateLease(c, badFor), "for[1]", "", "create a lease rented for an empty unit key")

	// The provider launched it; later it is ready.
	l1.State, l1.ProviderID, l1.Start = core.LeaseProvisioning, "i-0abc", at(2)
	ok(t, s.Leases().UpdateLease(c, l1), "provisioning")
	l1.State, l1.ReadyAt, l1.IdleSince = core.LeaseReady, at(4), at(4)
	ok(t, s.Leases().UpdateLease(c, l1), "ready")
	got, err = s.Leases().LeaseByProviderID(c, "i-0abc")
	ok(t, err, "by provider id")
	diff(t, "ready lease", l1, got)
	_, err = s.Leases().LeaseByProviderID(c, "i-none")
	wantErr(t, err, store.ErrNotFound, "unknown provider id")

	// One machine is one lease.
	l2.State, l2.ProviderID = core.LeaseProvisioning, "i-0abc"
	wantErr(t, s.Leases().UpdateLease(c, l2), store.ErrConflict, "provider id of another lease")
	// Immutable fields.
	for _, tc := range []struct {
		name string
		edit func(*store.Lease)
	}{
		{"offer", func(l *store.Lease) { l.OfferID = "gcp/a3" }},
		{"mode", func(l *store.Lease) { l.Mode = core.Monthly }},
		{"client token", func(l *store.Lease) { l.ClientToken = "new" }},
	} {
		x := l1
		tc.edit(&x)
		wantErr(t, s.Leases().UpdateLease(c, x), store.ErrConflict, "change "+tc.name)
	}
	missing := intent("L404")
	wantErr(t, s.Leases().UpdateLease(c, missing), store.ErrNotFound, "update missing lease")

	l3.State, l3.End = core.LeaseFailed, at(3)
	ok(t, s.Leases().UpdateLease(c, l3), "fail L3")
	live, err := s.Leases().ListLiveLeases(c)
	ok(t, err, "live leases")
	diff(t, "live leases", []store.Lease{l1, l2intent}, live)

	page, err := s.Leases().ListLeases(c, store.LeaseFilter{States: []core.LeaseState{core.LeaseFailed, core.LeaseReady}})
	ok(t, err, "list leases by state")
	diff(t, "failed or ready", []store.Lease{l3, l1}, page.Items)
	p1, err := s.Leases().ListLeases(c, store.LeaseFilter{Limit: 2})
	ok(t, err, "page 1")
	p2, err := s.Leases().ListLeases(c, store.LeaseFilter{Limit: 2, Cursor: p1.Next})
	ok(t, err, "page 2")
	if len(p1.Items) != 2 || len(p2.Items) != 1 || p2.Next != "" || p2.Items[0].ID != "L1" {
		t.Errorf("lease pages: %d then %d (next %q)", len(p1.Items), len(p2.Items), p2.Next)
	}

	// Held in a range: L1 from 2 on, L4 from 5 to 20, L5 from 30 on; L2
	// never launched, L3 failed before launch.
	for _, x := range []struct {
		id         string
		start, end int
	}{{"L4", 5, 20}, {"L5", 30, 0}} {
		l := intent(x.id)
		ok(t, s.Leases().CreateLease(c, l), "create "+x.id)
		l.State, l.ProviderID, l.Start = core.LeaseProvisioning, "i-"+x.id, at(x.start)
		ok(t, s.Leases().UpdateLease(c, l), x.id+" provisioning")
		l.State, l.ReadyAt = core.LeaseReady, at(x.start)
		ok(t, s.Leases().UpdateLease(c, l), x.id+" ready")
		if x.end > 0 {
			l.State, l.End = core.LeaseReleased, at(x.end)
			ok(t, s.Leases().UpdateLease(c, l), x.id+" released")
		}
	}
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"[10, 25)", at(10), at(25), []string{"L4", "L1"}},
		{"[20, 25): L4 ended at 20", at(20), at(25), []string{"L1"}},
		{"[0, 3): before L4", at(0), at(3), []string{"L1"}},
		{"[0, 2): L1 launched at 2", at(0), at(2), nil},
		{"up to 40, open start", time.Time{}, at(40), []string{"L5", "L4", "L1"}},
		{"[40, 41)", at(40), at(41), []string{"L5", "L1"}},
	} {
		var ids []string
		for cursor := ""; ; {
			page, err := s.Leases().ListLeases(c, store.LeaseFilter{HeldFrom: tc.from, HeldTo: tc.to, Limit: 1, Cursor: cursor})
			ok(t, err, "held "+tc.name)
			for _, l := range page.Items {
				ids = append(ids, l.ID)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		diff(t, "leases held "+tc.name, tc.want, ids)
	}
	_, err = s.Leases().ListLeases(c, store.LeaseFilter{HeldFrom: at(10), HeldTo: at(9)})
	wantField(t, err, "held_to", "-", "held to before held from")

	// A committed lease renews on another term (fleet.RenewalTerm): its
	// mode changes, the term it held appended to its earlier terms, and a
	// range before the renewal still finds it by its first start.
	l6 := intent("L6")
	l6.Mode = core.Daily
	ok(t, s.Leases().CreateLease(c, l6), "create L6")
	l6.State, l6.ProviderID, l6.Start, l6.CommittedEnd = core.LeaseProvisioning, "i-L6", at(50), at(50+24*60)
	ok(t, s.Leases().UpdateLease(c, l6), "L6 provisioning")
	l6.State, l6.ReadyAt = core.LeaseReady, at(50)
	ok(t, s.Leases().UpdateLease(c, l6), "L6 ready")
	renewed := l6
	renewed.Earlier = []core.Term{{Mode: core.Daily, Start: at(50)}}
	renewed.Mode, renewed.Start, renewed.CommittedEnd = core.Weekly, at(50+24*60), at(50+8*24*60)
	ok(t, s.Leases().UpdateLease(c, renewed), "renew L6 on a week")
	got, err = s.Leases().GetLease(c, "L6")
	ok(t, err, "get renewed L6")
	diff(t, "renewed lease", renewed, got)
	ok(t, s.Leases().UpdateLease(c, renewed), "save renewed L6 unchanged")
	page, err = s.Leases().ListLeases(c, store.LeaseFilter{HeldFrom: at(51), HeldTo: at(52)})
	ok(t, err, "held before the renewal")
	if i := slices.IndexFunc(page.Items, func(l store.Lease) bool { return l.ID == "L6" }); i < 0 {
		t.Errorf("leases held [51, 52): L6, renewed at %s, not found by its first start", renewed.Start)
	}
	bare := renewed
	bare.Mode = core.Monthly
	wantErr(t, s.Leases().UpdateLease(c, bare), store.ErrConflict, "change the mode without a renewal")
	rewritten := renewed
	rewritten.Earlier = []core.Term{{Mode: core.Weekly, Start: at(50)}}
	wantErr(t, s.Leases().UpdateLease(c, rewritten), store.ErrConflict, "rewrite the earlier terms")
	got, err = s.Leases().GetLease(c, "L6")
	ok(t, err, "get L6 after refused updates")
	diff(t, "L6 after refused updates", renewed, got)
}

// testLeaseProviderIDs: a provider id names one live lease. A machine id
// the provider hands out again after its machine ended (the sim provider
// numbers machines afresh in each process) is free for a new lease; two
// live leases never share one, and the refusal names the holder in the
// store's words, not the database's.
func testLeaseProviderIDs(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	old, next, third := intent("L1"), intent("L2"), intent("L3")
	for _, l := range []store.Lease{old, next, third} {
		ok(t, s.Leases().CreateLease(c, l), "create "+l.ID)
	}
	old.State, old.ProviderID, old.Start = core.LeaseProvisioning, "sim-000001", at(2)
	ok(t, s.Leases().UpdateLease(c, old), "L1 launched")
	old.State, old.End = core.LeaseFailed, at(3)
	ok(t, s.Leases().UpdateLease(c, old), "L1 vanished")

	next.State, next.ProviderID, next.Start = core.LeaseProvisioning, "sim-000001", at(4)
	ok(t, s.Leases().UpdateLease(c, next), "L2 takes the id of ended L1")
	got, err := s.Leases().LeaseByProviderID(c, "sim-000001")
	ok(t, err, "by provider id, one live")
	diff(t, "the live lease wins", next, got)

	third.State, third.ProviderID, third.Start = core.LeaseProvisioning, "sim-000001", at(5)
	err = s.Leases().UpdateLease(c, third)
	wantErr(t, err, store.ErrConflict, "L3 takes the id of live L2")
	if err != nil {
		for _, want := range []string{`"L3"`, `"sim-000001"`, `"L2"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("conflict %q does not name %s", err, want)
			}
		}
		if strings.Contains(strings.ToLower(err.Error()), "constraint") {
			t.Errorf("conflict %q carries the database's text", err)
		}
	}

	next.State, next.End = core.LeaseReleased, at(6)
	ok(t, s.Leases().UpdateLease(c, next), "L2 released")
	got, err = s.Leases().LeaseByProviderID(c, "sim-000001")
	ok(t, err, "by provider id, all ended")
	diff(t, "the newest ended lease", next, got)
	ok(t, s.Leases().UpdateLease(c, third), "L3 takes the id once L2 ended")
	got, err = s.Leases().LeaseByProviderID(c, "sim-000001")
	ok(t, err, "by provider id, L3 live")
	diff(t, "L3 is the live one", third, got)
	live, err := s.Leases().ListLiveLeases(c)
	ok(t, err, "live leases")
	diff(t, "live leases", []store.Lease{third}, live)
}

func testLeaseTransitions(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	states := store.LeaseStates
	n := 0
	for _, from := range states {
		for _, to := range states {
			n++
			id := fmt.Sprintf("L%d", n)
			l := intent(id)
			ok(t, s.Leases().CreateLease(c, l), "create "+id)
			if from != core.LeaseRequested {
				l.State = from
				ok(t, s.Leases().UpdateLease(c, l), fmt.Sprintf("%s: to %s", id, from))
			}
			l.State = to
			err := s.Leases().UpdateLease(c, l)
			if store.LeaseTransitionAllowed(from, to) {
				if err != nil {
					t.Errorf("%s → %s: %v, want allowed", from, to, err)
				}
			} else {
				wantErr(t, err, store.ErrConflict, fmt.Sprintf("%s → %s", from, to))
			}
		}
	}
	// The rules themselves, spot-checked.
	for _, tc := range []struct {
		from, to core.LeaseState
		want     bool
	}{
		{core.LeaseRequested, core.LeaseProvisioning, true},
		{core.LeaseRequested, core.LeaseReady, true},
		{core.LeaseReady, core.LeaseDraining, true},
		{core.LeaseDraining, core.LeaseReady, true},
		{core.LeaseDraining, core.LeaseReleased, true},
		{core.LeaseReady, core.LeaseReclaimed, true},
		{core.LeaseReady, core.LeaseProvisioning, false},
		{core.LeaseReleased, core.LeaseReady, false},
		{core.LeaseFailed, core.LeaseReleased, false},
		{core.LeaseReleased, core.LeaseReleased, true},
	} {
		if got := store.LeaseTransitionAllowed(tc.from, tc.to); got != tc.want {
			t.Errorf("LeaseTransitionAllowed(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
