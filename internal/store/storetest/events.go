package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func testEvents(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	evs := []core.Event{
		{At: at(0), Kind: "acquire", Subject: "L1", Reason: "3 pending GPU-hours of core work; cheapest per useful GPU-hour", Attrs: map[string]string{"offer": "p5", "mode": "on-demand"}},
		{At: at(1), Kind: "place", Subject: "j1", Reason: "best fit on L1", Attrs: map[string]string{}},
		{At: at(2), Kind: "release", Subject: "L1", Reason: "idle 47 min, no pending job fits"},
		{At: at(3), Kind: "place", Subject: "j2", Reason: "", Attrs: map[string]string{"gpus": "0,1"}},
	}
	seqs, err := s.Events().AppendEvents(c, evs...)
	ok(t, err, "append")
	if len(seqs) != len(evs) {
		t.Fatalf("%d seqs for %d events", len(seqs), len(evs))
	}
	for i := range evs {
		if i > 0 && seqs[i] <= seqs[i-1] {
			t.Errorf("seqs %v not increasing", seqs)
		}
		evs[i].Seq = seqs[i]
	}
	more, err := s.Events().AppendEvents(c, core.Event{At: at(4), Kind: "alert", Subject: "L2/0", Reason: "idle 30 min", Seq: 999_999})
	ok(t, err, "append one more")
	if more[0] <= seqs[3] {
		t.Errorf("seq %d after %d: the given Seq must be ignored", more[0], seqs[3])
	}
	evs = append(evs, core.Event{Seq: more[0], At: at(4), Kind: "alert", Subject: "L2/0", Reason: "idle 30 min"})
	none, err := s.Events().AppendEvents(c)
	ok(t, err, "append nothing")
	if len(none) != 0 {
		t.Errorf("append nothing gave %v", none)
	}

	for _, tc := range []struct {
		name string
		f    store.EventFilter
		want []core.Event
	}{
		{"all", store.EventFilter{}, evs},
		{"subject", store.EventFilter{Subject: "L1"}, []core.Event{evs[0], evs[2]}},
		{"kind", store.EventFilter{Kind: "place"}, []core.Event{evs[1], evs[3]}},
		{"from", store.EventFilter{From: at(3)}, evs[3:]},
		{"to", store.EventFilter{To: at(2)}, evs[:2]},
		{"range and kind", store.EventFilter{Kind: "place", From: at(1), To: at(3)}, evs[1:2]},
		{"none", store.EventFilter{Subject: "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []core.Event
			f := tc.f
			f.Limit = 2
			for i := 0; ; i++ {
				p, err := s.Events().ListEvents(c, f)
				ok(t, err, fmt.Sprintf("page %d", i))
				got = append(got, p.Items...)
				if p.Next == "" {
					break
				}
				f.Cursor = p.Next
			}
			diff(t, "events", tc.want, got)
		})
	}
	_, err = s.Events().ListEvents(c, store.EventFilter{Cursor: store.EncodeCursor("jobs", 1)})
	wantField(t, err, "cursor", "-", "a jobs cursor for events")
	// Filters are text the database can compare: a NUL byte is a field
	// error, not a driver failure.
	_, err = s.Events().ListEvents(c, store.EventFilter{Team: "a\x00b"})
	wantField(t, err, "team", "-", "a NUL in the team filter")
	_, err = s.Alerts().ListAlerts(c, store.AlertFilter{LeaseID: "a\x00b"})
	wantField(t, err, "lease", "-", "a NUL in the lease filter")
	_, err = s.Tokens().ListTokens(c, store.TokenFilter{User: "\xff"})
	wantField(t, err, "user", "-", "invalid UTF-8 in the user filter")
	// Run from here rather than from Run's list, which another file
	// keeps: each on its own database.
	t.Run("Teams", func(t *testing.T) { testEventTeams(t, open) })
	t.Run("Runs", func(t *testing.T) { testRuns(t, open) })
}

func testSamples(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	// 3 leases × 2 GPUs × 200 minutes: several insert batches.
	var all []core.Sample
	for m := range 200 {
		for _, l := range []string{"L1", "L2", "L3"} {
			for g := range 2 {
				all = append(all, core.Sample{LeaseID: l, GPU: g, At: at(m), UtilPct: (m + g) % 101, MemUsedMiB: int64(m) * 100, MemTotalMiB: 81_920, PowerW: 300 + m, TempC: 40 + g})
			}
		}
	}
	ok(t, s.Samples().InsertSamples(c, all...), "insert")
	ok(t, s.Samples().InsertSamples(c, all[:50]...), "insert again (skipped)")
	ok(t, s.Samples().InsertSamples(c, all[7], all[7], all[8]), "duplicates in one call (skipped)")
	ok(t, s.Samples().InsertSamples(c), "insert nothing")

	got, err := s.Samples().QuerySamples(c, store.SampleFilter{})
	ok(t, err, "query all")
	diff(t, "all samples", all, got)

	gpu1 := 1
	got, err = s.Samples().QuerySamples(c, store.SampleFilter{LeaseID: "L2", GPU: &gpu1, From: at(10), To: at(13)})
	ok(t, err, "query range")
	var want []core.Sample
	for _, x := range all {
		if x.LeaseID == "L2" && x.GPU == 1 && !x.At.Before(at(10)) && x.At.Before(at(13)) {
			want = append(want, x)
		}
	}
	diff(t, "L2/1 in [10, 13)", want, got)
	got, err = s.Samples().QuerySamples(c, store.SampleFilter{Limit: 7})
	ok(t, err, "query with limit")
	diff(t, "first 7", all[:7], got)

	ok(t, s.Samples().InsertSamples(c, core.Sample{LeaseID: "L1", GPU: 0, At: at(500), UtilPct: 99}), "a late sample")
	latest, err := s.Samples().LatestSamples(c, at(150))
	ok(t, err, "latest")
	want = nil
	for _, l := range []string{"L1", "L2", "L3"} {
		for g := range 2 {
			if l == "L1" && g == 0 {
				want = append(want, core.Sample{LeaseID: "L1", GPU: 0, At: at(500), UtilPct: 99})
				continue
			}
			want = append(want, all[(199*3+map[string]int{"L1": 0, "L2": 1, "L3": 2}[l])*2+g])
		}
	}
	diff(t, "latest per GPU", want, latest)
	latest, err = s.Samples().LatestSamples(c, at(501))
	ok(t, err, "latest after everything")
	if len(latest) != 0 {
		t.Errorf("latest since the future: %d samples", len(latest))
	}

	n, err := s.Samples().DeleteSamplesBefore(c, at(100))
	ok(t, err, "delete")
	if n != 100*6 {
		t.Errorf("deleted %d, want %d", n, 100*6)
	}
	got, err = s.Samples().QuerySamples(c, store.SampleFilter{To: at(100)})
	ok(t, err, "query deleted range")
	if len(got) != 0 {
		t.Errorf("%d samples left before the cut", len(got))
	}
}

func testAlerts(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	idle := store.Alert{Kind: "idle-alert", LeaseID: "L1", GPU: 3, Unit: "j1", Team: "ml", Action: "none", Reason: "under 5% for 30 min", Raised: at(30)}
	a1, created, err := s.Alerts().RaiseAlert(c, idle)
	ok(t, err, "raise")
	if !created || a1.ID == 0 {
		t.Fatalf("raise: created %v id %d", created, a1.ID)
	}
	idle.ID = a1.ID
	diff(t, "raised alert", idle, a1)

	again := idle
	again.ID, again.Raised, again.Reason = 0, at(31), "still idle"
	a2, created, err := s.Alerts().RaiseAlert(c, again)
	ok(t, err, "raise again")
	if created {
		t.Error("raising an open alert again created a second one")
	}
	diff(t, "open alert returned", idle, a2)

	budget := store.Alert{Kind: "budget", Team: "web", Reason: "80% of the monthly budget spent", Raised: at(40)}
	b, _, err := s.Alerts().RaiseAlert(c, budget)
	ok(t, err, "raise budget")
	budget.ID = b.ID

	ok(t, s.Alerts().ResolveAlert(c, a1.ID, at(45)), "resolve")
	ok(t, s.Alerts().ResolveAlert(c, a1.ID, at(50)), "resolve again")
	wantErr(t, s.Alerts().ResolveAlert(c, 999_999, at(50)), store.ErrNotFound, "resolve missing")
	idle.Resolved = at(45)

	a3, created, err := s.Alerts().RaiseAlert(c, again)
	ok(t, err, "raise after resolution")
	if !created || a3.ID == a1.ID {
		t.Errorf("raise after resolution: created %v id %d, want a new alert", created, a3.ID)
	}
	again.ID = a3.ID

	for _, tc := range []struct {
		name string
		f    store.AlertFilter
		want []store.Alert
	}{
		{"all newest first", store.AlertFilter{}, []store.Alert{again, budget, idle}},
		{"open", store.AlertFilter{OpenOnly: true}, []store.Alert{again, budget}},
		{"team", store.AlertFilter{Team: "ml"}, []store.Alert{again, idle}},
		{"kind", store.AlertFilter{Kind: "budget"}, []store.Alert{budget}},
		{"lease", store.AlertFilter{LeaseID: "L1", OpenOnly: true}, []store.Alert{again}},
		{"id", store.AlertFilter{ID: budget.ID}, []store.Alert{budget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []store.Alert
			f := tc.f
			f.Limit = 1
			for {
				p, err := s.Alerts().ListAlerts(c, f)
				ok(t, err, "list")
				got = append(got, p.Items...)
				if p.Next == "" {
					break
				}
				f.Cursor = p.Next
			}
			diff(t, "alerts", tc.want, got)
		})
	}
	t.Run("Acks", func(t *testing.T) { testAlertAcks(t, open) })
}

// testEventTeams: an event concerns the team its attrs name, else (not
// for audit events) the team of the job or unit its subject names.
func testEventTeams(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "a", "b")
	submit(t, s, job("ja", "a"))
	jb := job("jb", "b")
	jb.Shards = 2
	submit(t, s, jb)
	evs := []core.Event{
		{At: at(0), Kind: "place", Subject: "ja", Reason: "best fit"},
		{At: at(1), Kind: "unit.succeeded", Subject: "jb#1", Reason: "done"},
		{At: at(2), Kind: "audit.team_created", Subject: "ja", Reason: "a team named like a job", Attrs: map[string]string{"actor": "root"}},
		{At: at(3), Kind: "audit.token_created", Subject: "tok-1", Reason: "token", Attrs: map[string]string{"team": "b"}},
		{At: at(4), Kind: "acquire", Subject: "L1", Reason: "demand"},
		{At: at(5), Kind: "place", Subject: "nope#0", Reason: "a job the store does not know"},
	}
	seqs, err := s.Events().AppendEvents(c, evs...)
	ok(t, err, "append")
	for i := range evs {
		evs[i].Seq = seqs[i]
	}
	for _, tc := range []struct {
		team string
		want []core.Event
	}{
		{"a", []core.Event{evs[0]}},
		{"b", []core.Event{evs[1], evs[3]}},
		{"c", nil},
	} {
		p, err := s.Events().ListEvents(c, store.EventFilter{Team: tc.team})
		ok(t, err, "list team "+tc.team)
		diff(t, "events of team "+tc.team, tc.want, p.Items)
	}
	p, err := s.Events().ListEvents(c, store.EventFilter{Team: "b", Kind: "unit.succeeded"})
	ok(t, err, "team and kind")
	diff(t, "team b's unit events", []core.Event{evs[1]}, p.Items)
}

// testRuns: the store keeps a unit's run when it stops running or moves,
// and only then.
func testRuns(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "a", "b")
	submit(t, s, job("ja", "a"))
	jb := job("jb", "b")
	jb.Request.GPUs, jb.Request.MilliPerGPU = 1, 500
	submit(t, s, jb)
	running := func(id string, start time.Time, lease string, gpus ...int) store.Unit {
		return store.Unit{JobID: id, State: core.JobRunning, Parts: []store.Part{{LeaseID: lease, GPUs: gpus}}, Start: start, LastCheckpoint: start}
	}
	ok(t, s.Units().SaveUnits(c, running("ja", at(10), "L1", 0, 1)), "ja runs")
	ok(t, s.Units().SaveUnits(c, running("ja", at(10), "L1", 0, 1)), "ja saved again, still running")
	cp := running("ja", at(10), "L1", 0, 1)
	cp.State = core.JobCheckpointing
	ok(t, s.Units().SaveUnits(c, cp), "ja checkpoints")
	ok(t, s.Units().SaveUnits(c, running("jb", at(5), "L2", 3)), "jb runs")
	ok(t, s.Units().SaveUnits(c, running("jb", at(20), "L3", 0)), "jb moves")
	ok(t, s.Units().SaveUnits(c, store.Unit{JobID: "jb", State: core.JobPending, Since: at(30), Done: 25 * time.Minute}), "jb preempted")
	runs, err := s.Events().ListRuns(c, store.RunFilter{})
	ok(t, err, "runs while ja still runs")
	jbRuns := []store.Run{
		{JobID: "jb", Team: "b", MilliPerGPU: 500, Parts: []store.Part{{LeaseID: "L2", GPUs: []int{3}}}, Start: at(5), End: at(20)},
		{JobID: "jb", Team: "b", MilliPerGPU: 500, Parts: []store.Part{{LeaseID: "L3", GPUs: []int{0}}}, Start: at(20), End: at(30)},
	}
	diff(t, "runs", jbRuns, runs)
	ok(t, s.Units().SaveUnits(c, store.Unit{JobID: "ja", State: core.JobSucceeded, Start: at(10), End: at(70), Done: time.Hour}), "ja succeeds")
	jaRun := store.Run{JobID: "ja", Team: "a", MilliPerGPU: 1000, Parts: []store.Part{{LeaseID: "L1", GPUs: []int{0, 1}}}, Start: at(10), End: at(70)}
	runs, err = s.Events().ListRuns(c, store.RunFilter{})
	ok(t, err, "all runs")
	diff(t, "all runs", append(jbRuns, jaRun), runs)
	runs, err = s.Events().ListRuns(c, store.RunFilter{From: at(30), To: at(60)})
	ok(t, err, "runs in [30, 60)")
	diff(t, "runs overlapping [30, 60)", []store.Run{jaRun}, runs)
	runs, err = s.Events().ListRuns(c, store.RunFilter{To: at(10)})
	ok(t, err, "runs before 10")
	diff(t, "runs before 10", jbRuns[:1], runs)
	_, err = s.Events().ListRuns(c, store.RunFilter{Limit: -1})
	wantField(t, err, "limit", "-1", "negative limit")
}

// testAlertAcks: an acknowledgement is kept once, by whom, and shown.
func testAlertAcks(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	a, _, err := s.Alerts().RaiseAlert(c, store.Alert{Kind: "idle-alert", LeaseID: "L1", Team: "ml", Reason: "idle", Raised: at(1)})
	ok(t, err, "raise")
	ok(t, s.Alerts().AckAlert(c, a.ID, "alice", at(2)), "ack")
	ok(t, s.Alerts().AckAlert(c, a.ID, "bob", at(3)), "ack again")
	wantErr(t, s.Alerts().AckAlert(c, 999_999, "bob", at(3)), store.ErrNotFound, "ack missing")
	wantField(t, s.Alerts().AckAlert(c, a.ID, "", at(3)), "by", "", "ack by nobody")
	p, err := s.Alerts().ListAlerts(c, store.AlertFilter{})
	ok(t, err, "list")
	a.Acked, a.AckedBy = at(2), "alice"
	diff(t, "acknowledged alert", []store.Alert{a}, p.Items)
}
