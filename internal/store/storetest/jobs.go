package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func testJobs(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml", "web")

	j1 := job("j1", "ml")
	got := submit(t, s, j1)
	want := store.Job{Job: j1, StateAt: t0}
	want.State = core.JobPending
	diff(t, "submitted job", want, got)
	read, err := s.Jobs().GetJob(c, "j1")
	ok(t, err, "get j1")
	diff(t, "read job", want, read)

	// Shapes that must round-trip exactly: nil and empty lists and maps,
	// no deadline, shared GPUs, sharded.
	j2 := core.Job{ID: "j2", Team: "web", Tier: core.TierOffline, Request: core.Request{GPUs: 1, MilliPerGPU: 250, Models: []string{}, Throughput: map[string]int64{}},
		Shards: 3, Deferrable: true, Submit: at(1), Command: []string{}}
	submit(t, s, j2)
	read, err = s.Jobs().GetJob(c, "j2")
	ok(t, err, "get j2")
	j2.State = core.JobPending
	diff(t, "job with empty lists", store.Job{Job: j2, StateAt: at(1)}, read)

	units, err := s.Units().ListUnits(c, "j2")
	ok(t, err, "units of j2")
	if len(units) != 3 {
		t.Fatalf("j2 has %d units, want 3 (one per shard)", len(units))
	}
	for i, u := range units {
		diff(t, fmt.Sprintf("unit %d", i), store.Unit{JobID: "j2", Shard: i, State: core.JobPending, Since: at(1)}, u)
	}
	units, err = s.Units().ListUnits(c, "j1")
	ok(t, err, "units of j1")
	diff(t, "unit of unsharded job", []store.Unit{{JobID: "j1", Shard: 0, State: core.JobPending, Since: t0}}, units)

	_, err = s.Jobs().GetJob(c, "nope")
	wantErr(t, err, store.ErrNotFound, "get missing")
	_, _, err = s.Jobs().SubmitJob(c, job("j1", "web"), "")
	wantErr(t, err, store.ErrConflict, "same id twice")
	_, _, err = s.Jobs().SubmitJob(c, job("j9", "nope"), "")
	wantErr(t, err, store.ErrNotFound, "unknown team")
	_, err = s.Units().ListUnits(c, "nope")
	wantErr(t, err, store.ErrNotFound, "units of missing job")

	// Times come back in UTC at microseconds whatever zone they went in.
	j3 := job("j3", "ml")
	zone := time.FixedZone("CST", 8*3600)
	j3.Submit = time.Date(2026, 3, 2, 17, 30, 0, 123456789, zone)
	got = submit(t, s, j3)
	read, err = s.Jobs().GetJob(c, "j3")
	ok(t, err, "get j3")
	if !read.Submit.Equal(store.Micro(j3.Submit)) || read.Submit.Location() != time.UTC || !got.Submit.Equal(read.Submit) {
		t.Errorf("submit time %v (returned %v), want %v in UTC", read.Submit, got.Submit, store.Micro(j3.Submit))
	}

	// Filters.
	j4 := job("j4", "web")
	j4.Tier = core.TierCore
	submit(t, s, j4)
	_, err = s.Jobs().TransitionJob(c, "j4", core.JobRunning, at(5))
	ok(t, err, "run j4")
	for _, tc := range []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"all newest first", store.JobFilter{}, []string{"j4", "j3", "j2", "j1"}},
		{"team", store.JobFilter{Team: "ml"}, []string{"j3", "j1"}},
		{"tier", store.JobFilter{Tier: core.TierCore}, []string{"j4"}},
		{"state", store.JobFilter{States: []core.JobState{core.JobPending}}, []string{"j3", "j2", "j1"}},
		{"states", store.JobFilter{States: []core.JobState{core.JobRunning, core.JobSucceeded}}, []string{"j4"}},
		{"team and tier", store.JobFilter{Team: "web", Tier: core.TierOffline}, []string{"j2"}},
		{"nothing", store.JobFilter{Team: "nope"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := jobIDs(allJobs(t, s, tc.f, 2))
			diff(t, "job ids", tc.want, got)
		})
	}
}

func testIdempotency(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml", "web")

	first, created, err := s.Jobs().SubmitJob(c, job("j1", "ml"), "key-1")
	ok(t, err, "first submission")
	if !created || first.IdempotencyKey != "key-1" {
		t.Fatalf("first submission: created %v, key %q", created, first.IdempotencyKey)
	}
	// The same request again, under a new server-side id and time.
	again := job("j2", "ml")
	again.Submit = at(3)
	got, created, err := s.Jobs().SubmitJob(c, again, "key-1")
	ok(t, err, "same key, same body")
	if created {
		t.Error("same key, same body: created a second job")
	}
	diff(t, "job returned for a repeated key", first, got)
	_, err = s.Jobs().GetJob(c, "j2")
	wantErr(t, err, store.ErrNotFound, "the repeat's id")

	changed := job("j3", "ml")
	changed.Request.GPUs = 4
	_, _, err = s.Jobs().SubmitJob(c, changed, "key-1")
	wantErr(t, err, store.ErrConflict, "same key, different body")

	// Keys are per team.
	other, created, err := s.Jobs().SubmitJob(c, job("j4", "web"), "key-1")
	ok(t, err, "same key, other team")
	if !created || other.ID != "j4" {
		t.Errorf("same key in another team: created %v id %s, want a new job j4", created, other.ID)
	}
	// Without a key every submission is new.
	submit(t, s, job("j5", "ml"))
	submit(t, s, job("j6", "ml"))
	units, err := s.Units().ListUnits(c, "j1")
	ok(t, err, "units of j1")
	if len(units) != 1 {
		t.Errorf("j1 has %d units after its repeat, want 1", len(units))
	}
	all := allJobs(t, s, store.JobFilter{}, 100)
	diff(t, "jobs", []string{"j6", "j5", "j4", "j1"}, jobIDs(all))

	if store.JobFingerprint(&first.Job) != store.JobFingerprint(&again) {
		t.Error("fingerprint depends on id or submit time")
	}
	sh0, sh1 := job("x", "ml"), job("x", "ml")
	sh1.Shards = 1
	if store.JobFingerprint(&sh0) != store.JobFingerprint(&sh1) {
		t.Error("fingerprint tells shards 0 from 1 (both are one unit)")
	}
}

func testJobStates(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	for _, id := range []string{"a", "b", "c"} {
		submit(t, s, job(id, "ml"))
	}
	steps := []struct {
		id    string
		to    core.JobState
		at    int
		err   error
		state core.JobState
	}{
		{"a", core.JobAdmitted, 1, nil, core.JobAdmitted},
		{"a", core.JobRunning, 2, nil, core.JobRunning},
		{"a", core.JobRunning, 3, nil, core.JobRunning}, // same state: nothing changes
		{"a", core.JobCheckpointing, 4, nil, core.JobCheckpointing},
		{"a", core.JobPreempted, 5, nil, core.JobPreempted},
		{"a", core.JobPending, 6, nil, core.JobPending},
		{"a", core.JobRunning, 7, nil, core.JobRunning},
		{"a", core.JobSucceeded, 8, nil, core.JobSucceeded},
		{"a", core.JobRunning, 9, store.ErrConflict, core.JobSucceeded},
		{"a", core.JobCancelled, 9, store.ErrConflict, core.JobSucceeded},
		{"b", core.JobFailed, 1, nil, core.JobFailed},
		{"b", core.JobPending, 2, store.ErrConflict, core.JobFailed},
		{"nope", core.JobRunning, 1, store.ErrNotFound, ""},
	}
	for i, st := range steps {
		got, err := s.Jobs().TransitionJob(c, st.id, st.to, at(st.at))
		if st.err != nil {
			wantErr(t, err, st.err, fmt.Sprintf("step %d: %s → %s", i, st.id, st.to))
			continue
		}
		ok(t, err, fmt.Sprintf("step %d: %s → %s", i, st.id, st.to))
		if got.State != st.state {
			t.Errorf("step %d: state %s, want %s", i, got.State, st.state)
		}
	}
	a, err := s.Jobs().GetJob(c, "a")
	ok(t, err, "get a")
	if a.State != core.JobSucceeded || !a.StateAt.Equal(at(8)) {
		t.Errorf("a: %s since %v, want succeeded since %v", a.State, a.StateAt, at(8))
	}
	// Staying in a state keeps the time it was entered.
	_, err = s.Jobs().TransitionJob(c, "c", core.JobRunning, at(1))
	ok(t, err, "run c")
	cj, err := s.Jobs().TransitionJob(c, "c", core.JobRunning, at(2))
	ok(t, err, "run c again")
	if !cj.StateAt.Equal(at(1)) {
		t.Errorf("c state_at %v after a no-op transition, want %v", cj.StateAt, at(1))
	}
	_, err = s.Jobs().TransitionJob(c, "c", "exploded", at(3))
	wantField(t, err, "state", "exploded", "unknown state")

	// Cancel: once, again (no change), never after the end.
	got, err := s.Jobs().CancelJob(c, "c", at(4))
	ok(t, err, "cancel c")
	if got.State != core.JobCancelled || !got.StateAt.Equal(at(4)) {
		t.Errorf("cancelled c: %s at %v", got.State, got.StateAt)
	}
	got, err = s.Jobs().CancelJob(c, "c", at(5))
	ok(t, err, "cancel c again")
	if !got.StateAt.Equal(at(4)) {
		t.Errorf("second cancel moved state_at to %v", got.StateAt)
	}
	_, err = s.Jobs().CancelJob(c, "a", at(5))
	wantErr(t, err, store.ErrConflict, "cancel succeeded job")
	_, err = s.Jobs().CancelJob(c, "nope", at(5))
	wantErr(t, err, store.ErrNotFound, "cancel missing job")
	// Units are the loop's to stop.
	us, err := s.Units().ListUnits(c, "c")
	ok(t, err, "units of c")
	if us[0].State != core.JobPending {
		t.Errorf("cancel changed the unit to %s; the loop stops units", us[0].State)
	}
}

// testWideJob: a job of many shards gets every unit, pending since its
// submission, in shard order, and submitting it allocates no more than
// submitting a job of one shard: the units are made by the database, not
// built a row at a time in memory.
func testWideJob(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	const wide = 20_000
	n := 0
	allocs := func(shards int) float64 {
		return testing.AllocsPerRun(2, func() {
			n++
			j := job(fmt.Sprintf("w%d", n), "ml")
			j.Shards = shards
			submit(t, s, j)
		})
	}
	one, many := allocs(1), allocs(wide)
	// The slack is for the driver's own bookkeeping, which varies a little
	// from call to call; a row's worth of arguments would be 20,000 times.
	if many > one+200 {
		t.Errorf("submitting %d shards allocated %.0f times, one shard %.0f: want about the same", wide, many, one)
	}
	id := fmt.Sprintf("w%d", n)
	us, err := s.Units().ListUnits(c, id)
	ok(t, err, "units of "+id)
	if len(us) != wide {
		t.Fatalf("%s has %d units, want %d", id, len(us), wide)
	}
	for i, u := range us {
		if want := (store.Unit{JobID: id, Shard: i, State: core.JobPending, Since: t0}); !cmp.Equal(want, u) {
			t.Fatalf("unit %d: %s", i, cmp.Diff(want, u))
		}
	}
	live, err := s.Units().ListLiveUnits(c)
	ok(t, err, "live units")
	if want := 3*wide + 3; len(live) != want {
		t.Errorf("%d live units, want %d", len(live), want)
	}

	// Saving them all is all or none, however many statements a backend
	// sends at a time.
	for i := range us {
		us[i].Since = at(9)
	}
	ok(t, s.Units().SaveUnits(c, us...), "save every unit")
	for i := range us {
		us[i].Since = at(10)
	}
	wantErr(t, s.Units().SaveUnits(c, append(us, store.Unit{JobID: id, Shard: wide, State: core.JobPending})...), store.ErrNotFound, "save every unit and one beyond the shards")
	got, err := s.Units().ListUnits(c, id)
	ok(t, err, "units of "+id+" after the failed save")
	for i, u := range got {
		if !u.Since.Equal(at(9)) {
			t.Fatalf("unit %d pending since %v after a save that failed, want %v", i, u.Since, at(9))
		}
	}
	events := make([]core.Event, 2500)
	for i := range events {
		events[i] = core.Event{At: at(11), Kind: "unit.cancelled", Subject: fmt.Sprintf("%s#%d", id, i), Reason: "its job was cancelled"}
	}
	seqs, err := s.Events().AppendEvents(c, events...)
	ok(t, err, "append an event per unit")
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("event %d has seq %d after %d: want increasing, in the order given", i, seqs[i], seqs[i-1])
		}
	}
}

// testUnitLimit: a new job whose units would take its team's unfinished
// jobs past the team's unit limit is refused (field shards, the value,
// what is left), nothing of it stored; an idempotent retry of an accepted
// job still gets it; a job frees its units when it finishes (cancelled
// or succeeded, not running), once; 0 is the default.
func testUnitLimit(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	small := team("small")
	small.UnitLimit = 10
	ok(t, s.Teams().CreateTeam(c, small), "create team small")
	dflt := team("dflt")
	dflt.UnitLimit = 0
	ok(t, s.Teams().CreateTeam(c, dflt), "create team dflt")
	sharded := func(id, team string, shards int) core.Job {
		j := job(id, team)
		j.Shards = shards
		return j
	}
	_, _, err := s.Jobs().SubmitJob(c, sharded("a", "small", 6), "key-a")
	ok(t, err, "6 of 10 units")
	submit(t, s, sharded("b", "small", 0)) // one unit
	_, _, err = s.Jobs().SubmitJob(c, sharded("c", "small", 4), "")
	wantField(t, err, "shards", "4", "4 more units with 7 of 10 unfinished")
	if err == nil || !strings.Contains(err.Error(), "at most 3 units") || !strings.Contains(err.Error(), "unit_limit 10") {
		t.Errorf("refusal %v: want it to say what is left (3) and the limit (10)", err)
	}
	_, err = s.Jobs().GetJob(c, "c")
	wantErr(t, err, store.ErrNotFound, "refused job stored")
	got, created, err := s.Jobs().SubmitJob(c, sharded("a2", "small", 6), "key-a")
	ok(t, err, "retry of a with its key while the team is near its limit")
	if created || got.ID != "a" {
		t.Errorf("retry of a: job %q created %v, want a, not created", got.ID, created)
	}
	submit(t, s, sharded("c", "small", 3))
	_, _, err = s.Jobs().SubmitJob(c, sharded("d", "small", 0), "")
	wantField(t, err, "shards", "0", "one unit more with 10 of 10 unfinished")
	_, err = s.Jobs().CancelJob(c, "a", at(5))
	ok(t, err, "cancel a")
	submit(t, s, sharded("d", "small", 6))
	// b running is still unfinished; b succeeded frees its unit, once.
	_, err = s.Jobs().TransitionJob(c, "b", core.JobRunning, at(6))
	ok(t, err, "b runs")
	_, _, err = s.Jobs().SubmitJob(c, sharded("e", "small", 0), "")
	wantField(t, err, "shards", "0", "one unit more with 10 of 10 unfinished, one running")
	_, err = s.Jobs().TransitionJob(c, "b", core.JobSucceeded, at(7))
	ok(t, err, "b succeeds")
	submit(t, s, sharded("e", "small", 0))
	_, err = s.Jobs().CancelJob(c, "a", at(8))
	ok(t, err, "cancel a again")
	_, _, err = s.Jobs().SubmitJob(c, sharded("f", "small", 0), "")
	wantField(t, err, "shards", "0", "one unit more after a second cancel of a, which frees nothing")

	_, _, err = s.Jobs().SubmitJob(c, sharded("g", "dflt", core.DefaultUnitLimit+1), "")
	wantField(t, err, "shards", fmt.Sprint(core.DefaultUnitLimit+1), "one unit past the default limit")
	submit(t, s, sharded("g", "dflt", core.DefaultUnitLimit))
	got2, err := s.Teams().GetTeam(c, "dflt")
	ok(t, err, "get dflt")
	if got2.UnitLimit != 0 || got2.Units() != core.DefaultUnitLimit {
		t.Errorf("team dflt: unit limit %d (in effect %d), want 0 (%d)", got2.UnitLimit, got2.Units(), core.DefaultUnitLimit)
	}
}

// testGetJobs: GetJobs returns the jobs asked for, whole, however many
// (more than one query's worth), and leaves out ids no job has.
func testGetJobs(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	var ids, want []string
	for i := range 1200 {
		id := fmt.Sprintf("j%04d", i)
		submit(t, s, job(id, "ml"))
		if i%2 == 0 {
			ids = append(ids, id)
			want = append(want, id)
		}
	}
	ids = append(ids, "nope")
	got, err := s.Jobs().GetJobs(c, ids)
	ok(t, err, "get jobs")
	var gotIDs []string
	for _, j := range got {
		gotIDs = append(gotIDs, j.ID)
		if j.ID == "j0000" {
			w := store.Job{Job: job("j0000", "ml"), StateAt: t0}
			w.State = core.JobPending
			diff(t, "job j0000", w, j)
		}
	}
	slices.Sort(gotIDs)
	diff(t, "jobs", want, gotIDs)
	got, err = s.Jobs().GetJobs(c, nil)
	ok(t, err, "get no jobs")
	if len(got) != 0 {
		t.Errorf("no ids: %d jobs, want none", len(got))
	}
	_, err = s.Jobs().GetJobs(c, []string{""})
	wantField(t, err, "ids", "", "an empty id")
}
