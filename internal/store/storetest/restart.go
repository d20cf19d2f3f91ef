package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// snapshot is everything testRestart reads back.
type snapshot struct {
	Teams  []core.Team
	Users  []store.User
	Tokens []store.Token
	Jobs   []store.Job
	Units  []store.Unit
	Leases []store.Lease
	Events []core.Event
	Sample []core.Sample
	Alerts []store.Alert
	Loop   store.LoopState
}

func read(t *testing.T, s store.Store) snapshot {
	t.Helper()
	c := ctx(t)
	var sn snapshot
	var err error
	sn.Teams, err = s.Teams().ListTeams(c)
	ok(t, err, "teams")
	sn.Users, err = s.Users().ListUsers(c, "")
	ok(t, err, "users")
	sn.Tokens, err = s.Tokens().ListTokens(c, store.TokenFilter{})
	ok(t, err, "tokens")
	sn.Jobs = allJobs(t, s, store.JobFilter{}, 100)
	for _, j := range sn.Jobs {
		us, err := s.Units().ListUnits(c, j.ID)
		ok(t, err, "units")
		sn.Units = append(sn.Units, us...)
	}
	lp, err := s.Leases().ListLeases(c, store.LeaseFilter{})
	ok(t, err, "leases")
	sn.Leases = lp.Items
	ep, err := s.Events().ListEvents(c, store.EventFilter{})
	ok(t, err, "events")
	sn.Events = ep.Items
	sn.Sample, err = s.Samples().QuerySamples(c, store.SampleFilter{})
	ok(t, err, "samples")
	ap, err := s.Alerts().ListAlerts(c, store.AlertFilter{})
	ok(t, err, "alerts")
	sn.Alerts = ap.Items
	sn.Loop, err = s.Loop().LoadLoop(c)
	ok(t, err, "loop")
	return sn
}

func testRestart(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	ok(t, s.Users().CreateUser(c, store.User{ID: "alice", Team: "ml", Role: store.RoleMember, Created: at(0)}), "user")
	ok(t, s.Tokens().CreateToken(c, store.Token{ID: "t", Hash: store.HashToken("s"), User: "alice", Team: "ml", Role: store.RoleMember, Created: at(0)}), "token")
	j := job("j", "ml")
	j.Shards = 2
	submit(t, s, j)
	_, _, err := s.Jobs().SubmitJob(c, job("k", "ml"), "key")
	ok(t, err, "submit k")
	ok(t, s.Units().SaveUnits(c, store.Unit{JobID: "j", Shard: 1, State: core.JobRunning, Parts: []store.Part{{LeaseID: "L1", GPUs: []int{0}}}, Start: at(3)}), "unit")
	l := intent("L1")
	ok(t, s.Leases().CreateLease(c, l), "intent")
	l.State, l.ProviderID = core.LeaseReady, "i-1"
	ok(t, s.Leases().UpdateLease(c, l), "ready")
	ok(t, s.Leases().CreateLease(c, intent("L2")), "an intent the provider never heard of")
	_, err = s.Events().AppendEvents(c, core.Event{At: at(1), Kind: "acquire", Subject: "L1", Reason: "demand"})
	ok(t, err, "event")
	ok(t, s.Samples().InsertSamples(c, core.Sample{LeaseID: "L1", At: at(2), UtilPct: 50}), "sample")
	_, _, err = s.Alerts().RaiseAlert(c, store.Alert{Kind: "idle-alert", LeaseID: "L1", Raised: at(3)})
	ok(t, err, "alert")
	_, err = s.Loop().SaveLoop(c, store.LoopState{NextID: 2})
	ok(t, err, "loop")
	before := read(t, s)
	ok(t, s.Close(), "close")
	// A closed store refuses work rather than hanging.
	closedCtx, cancel := context.WithTimeout(c, 5*time.Second)
	defer cancel()
	if _, _, err := s.Jobs().SubmitJob(closedCtx, job("late", "ml"), ""); err == nil || closedCtx.Err() != nil {
		t.Errorf("submit on a closed store: %v (context: %v), want a prompt error", err, closedCtx.Err())
	}
	if _, err := s.Jobs().GetJob(closedCtx, "j"); err == nil {
		t.Error("read on a closed store succeeded")
	}

	s2 := open(t)
	after := read(t, s2)
	diff(t, "store after restart", before, after)
	live, err := s2.Leases().ListLiveLeases(c)
	ok(t, err, "live leases after restart")
	if len(live) != 2 {
		t.Errorf("%d live leases after restart, want 2 (no intent forgotten)", len(live))
	}
	// Idempotency survives too.
	again, created, err := s2.Jobs().SubmitJob(c, job("k2", "ml"), "key")
	ok(t, err, "repeat after restart")
	if created || again.ID != "k" {
		t.Errorf("repeat after restart: created %v id %s, want the first job k", created, again.ID)
	}
	// And it opens a third time (migrations are idempotent).
	ok(t, s2.Close(), "close again")
	s3 := open(t)
	diff(t, "store after a second restart", before, read(t, s3))
}
