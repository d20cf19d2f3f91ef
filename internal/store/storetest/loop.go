package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func testLoop(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	zero, err := s.Loop().LoadLoop(c)
	ok(t, err, "load before any save")
	diff(t, "initial loop state", store.LoopState{}, zero)

	st := store.LoopState{
		NextID:        17,
		Spent:         map[string]core.Micros{"ml": 1_234_567, "web": 0},
		History:       map[string]core.Usage{"ml": {"H100": 3_600_000}, "web": {}},
		HistoryAt:     at(5),
		Refused:       []core.Refusal{{Offer: "aws/us-east-1/p4d", Mode: core.OnDemand, Until: at(3), Wait: 30 * time.Second}, {Offer: "aws/us-east-1/p4d", Mode: core.Spot, Until: at(4), Wait: 10 * time.Minute}},
		Demand:        []core.DemandPoint{{At: at(1), Milli: 0}, {At: at(2).Add(1500 * time.Microsecond), Milli: 2500}, {At: at(2).Add(1500 * time.Microsecond), Milli: 3000}, {At: at(6), Milli: 1000}},
		Ladder:        map[string]core.LadderState{"L1/0": {LowSince: at(3), Rung: 2, Unit: "j1", Window: []core.UtilPoint{{At: at(1).Add(1500 * time.Microsecond), Pct: 35}, {At: at(2), Pct: 0}}}, "L1/1": {NoProcSince: at(4), Zombie: true, Unit: "j1#2"}},
		BudgetAlerted: map[string]bool{"ml": true},
		Runs:          []core.DurationRuns{{Team: "ml", Command: "", Seconds: []int64{0, 3600}}, {Team: "ml", Command: "python train.py --lr 0.1", Seconds: []int64{7200, 5400, 9000}}, {Team: "web", Command: "nginx:1.27", Seconds: []int64{60}}},
		Ratios:        map[string][]int64{"ml": {10000, 20000, 5000}, "web": {12345}},
	}
	v, err := s.Loop().SaveLoop(c, st)
	ok(t, err, "first save")
	if v != 1 {
		t.Errorf("first save: version %d, want 1", v)
	}
	got, err := s.Loop().LoadLoop(c)
	ok(t, err, "load")
	st.Version = 1
	diff(t, "loop state", st, got)

	_, err = s.Loop().SaveLoop(c, store.LoopState{NextID: 99})
	wantErr(t, err, store.ErrConflict, "a second first save")
	st.NextID = 18
	v, err = s.Loop().SaveLoop(c, st)
	ok(t, err, "second save")
	if v != 2 {
		t.Errorf("second save: version %d, want 2", v)
	}
	_, err = s.Loop().SaveLoop(c, st) // still Version 1
	wantErr(t, err, store.ErrConflict, "stale save")
	got, err = s.Loop().LoadLoop(c)
	ok(t, err, "load again")
	if got.NextID != 18 || got.Version != 2 {
		t.Errorf("after a stale save: next id %d version %d, want 18 and 2", got.NextID, got.Version)
	}
}

// Fill sets every field of the struct ptr points to a distinct non-zero
// value, numbering from *n, as fill does: for a caller that stores a type
// of its own (the server's engine state) through the store and must see
// every field come back.
func Fill(t *testing.T, ptr any, n *int) {
	t.Helper()
	v := reflect.ValueOf(ptr).Elem()
	fill(t, v, v.Type().Name(), n)
}

// fill sets every field of the struct v points to a distinct non-zero
// value, so that a field the store forgets shows up as a difference. A
// field of a type it does not know fails the test: teach it, and the
// store, about the new field.
func fill(t *testing.T, v reflect.Value, path string, n *int) {
	t.Helper()
	*n++
	i := *n
	switch x := v.Addr().Interface().(type) {
	case *time.Time:
		*x = at(1000 + i)
		return
	case *time.Duration:
		*x = time.Duration(i) * time.Second
		return
	case *core.JobState:
		*x = core.JobRunning
		return
	case *core.LeaseState:
		*x = core.LeaseReady
		return
	case *core.BillingMode:
		*x = core.Spot
		return
	case *core.Tier:
		*x = core.TierCore
		return
	case *core.Workload:
		*x = core.Inference
		return
	case *core.Accelerator:
		*x = core.Accelerators[i%len(core.Accelerators)] // distinct in a list: a job names each family once
		return
	case **core.Job, **core.Offer, **core.PricePlan:
		return // set by the caller
	}
	switch v.Kind() {
	case reflect.Struct:
		for f := range v.NumField() {
			if !v.Type().Field(f).IsExported() {
				continue // working space (the engine's caches), not state to keep
			}
			fill(t, v.Field(f), path+"."+v.Type().Field(f).Name, n)
		}
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(i))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		if v.Type() != reflect.TypeOf("") {
			t.Fatalf("fill %s: a string type %s the suite does not know", path, v.Type())
		}
		v.SetString(fmt.Sprintf("v%d", i))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for k := range 2 {
			key := reflect.New(v.Type().Key()).Elem()
			fill(t, key, fmt.Sprintf("%s key %d", path, k), n)
			val := reflect.New(v.Type().Elem()).Elem()
			fill(t, val, fmt.Sprintf("%s[%v]", path, key), n)
			m.SetMapIndex(key, val)
		}
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for k := range 2 {
			fill(t, s.Index(k), fmt.Sprintf("%s[%d]", path, k), n)
		}
		v.Set(s)
	default:
		t.Fatalf("fill %s: a %s field the suite does not know: persist it and teach fill", path, v.Type())
	}
}

// testEngineRoundTrip checks that a core.Job, a Unit and a Lease with
// every field set come back from the store exactly, as a restart reads
// them (the server's loop turns them into the engine's state, and checks
// that every field of the engine's unit and lease is kept).
func testEngineRoundTrip(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")

	var full core.Job
	n := 0
	fill(t, reflect.ValueOf(&full).Elem(), "Job", &n)
	full.ID, full.Team, full.State, full.Shards = "full", "ml", core.JobPending, 3
	full.Request.GPUs, full.Request.MilliPerGPU = 2, core.WholeGPU
	sfull, _, err := s.Jobs().SubmitJob(c, full, "full-key")
	ok(t, err, "submit a job with every field set")
	diff(t, "submitted", full, sfull.Job)
	gfull, err := s.Jobs().GetJob(c, "full")
	ok(t, err, "get it")
	diff(t, "job with every field set", full, gfull.Job)
	for _, f := range []func(*core.Job){
		func(j *core.Job) { j.ID = "other" }, func(j *core.Job) { j.Submit = j.Submit.Add(time.Hour) }, func(j *core.Job) { j.State = "" },
	} {
		x := full
		f(&x)
		if store.JobFingerprint(&x) != store.JobFingerprint(&full) {
			t.Error("fingerprint depends on id, submit time or state")
		}
	}
	// Every other field is part of the body: changing it changes the
	// fingerprint (a field added to core.Job must be added there too).
	jt := reflect.TypeOf(full)
	for i := range jt.NumField() {
		name := jt.Field(i).Name
		if name == "ID" || name == "Submit" || name == "State" {
			continue
		}
		var x core.Job
		m := 100
		fill(t, reflect.ValueOf(&x).Elem(), "Job", &m)
		y := full
		f := reflect.ValueOf(&y).Elem().Field(i)
		f.Set(reflect.ValueOf(x).Field(i))
		if reflect.DeepEqual(f.Interface(), reflect.ValueOf(full).Field(i).Interface()) {
			switch f.Kind() { // fill gives these one value only
			case reflect.Bool:
				f.SetBool(!f.Bool())
			case reflect.String:
				f.SetString(f.String() + "'")
			}
		}
		if store.JobFingerprint(&y) == store.JobFingerprint(&full) {
			t.Errorf("JobFingerprint ignores core.Job.%s", name)
		}
	}
	j := job("j", "ml")
	j.Shards = 4
	sj := submit(t, s, j)

	var u store.Unit
	fill(t, reflect.ValueOf(&u).Elem(), "Unit", &n)
	u.JobID, u.Shard = sj.ID, 2
	ok(t, s.Units().SaveUnits(c, u), "save unit")

	var l store.Lease
	fill(t, reflect.ValueOf(&l).Elem(), "Lease", &n)
	l.OfferID = "aws/us-east-1/g6.xlarge"
	for i := range l.Earlier { // terms are oldest first, before the current one
		l.Earlier[i].Start = l.Start.Add(time.Duration(i-len(l.Earlier)) * 24 * time.Hour)
	}
	in := l
	in.State, in.Requested = core.LeaseRequested, at(1)
	ok(t, s.Leases().CreateLease(c, in), "create lease")
	ok(t, s.Leases().UpdateLease(c, l), "update lease")
	l.Requested = in.Requested // set once, by CreateLease

	// The other domain types the store keeps, every field set: a field
	// added to one of them fails here until the store keeps it.
	var tm core.Team
	fill(t, reflect.ValueOf(&tm).Elem(), "Team", &n)
	ok(t, s.Teams().CreateTeam(c, tm), "create a team with every field set")
	gt, err := s.Teams().GetTeam(c, tm.ID)
	ok(t, err, "get it")
	diff(t, "team with every field set", tm, gt)

	var sm core.Sample
	fill(t, reflect.ValueOf(&sm).Elem(), "Sample", &n)
	sm.UtilPct = 42
	ok(t, s.Samples().InsertSamples(c, sm), "insert a sample with every field set")
	gs, err := s.Samples().QuerySamples(c, store.SampleFilter{LeaseID: sm.LeaseID})
	ok(t, err, "query it")
	diff(t, "sample with every field set", []core.Sample{sm}, gs)

	var ev core.Event
	fill(t, reflect.ValueOf(&ev).Elem(), "Event", &n)
	seqs, err := s.Events().AppendEvents(c, ev)
	ok(t, err, "append an event with every field set")
	ev.Seq = seqs[0]
	ge, err := s.Events().ListEvents(c, store.EventFilter{Subject: ev.Subject})
	ok(t, err, "list it")
	diff(t, "event with every field set", []core.Event{ev}, ge.Items)

	var ls store.LoopState
	fill(t, reflect.ValueOf(&ls).Elem(), "LoopState", &n)
	ls.Version = 0
	v, err := s.Loop().SaveLoop(c, ls)
	ok(t, err, "save a loop state with every field set")
	ls.Version = v
	gl, err := s.Loop().LoadLoop(c)
	ok(t, err, "load it")
	diff(t, "loop state with every field set", ls, gl)

	// What a restart reads back: the live leases and units, a job's
	// units together.
	leases, err := s.Leases().ListLiveLeases(c)
	ok(t, err, "list live leases")
	diff(t, "live leases", []store.Lease{l}, leases)
	units, err := s.Units().ListLiveUnits(c)
	ok(t, err, "list live units")
	var unit *store.Unit
	var ofJ []int
	for i := range units {
		if units[i].JobID != "j" {
			continue
		}
		ofJ = append(ofJ, i)
		if units[i].Shard == 2 {
			unit = &units[i]
		}
	}
	if len(ofJ) != 4 || unit == nil || len(units) != 7 || ofJ[3]-ofJ[0] != 3 {
		t.Fatalf("%d live units, %d of j at %v, want 7 and 4 together with shard 2 among them", len(units), len(ofJ), ofJ)
	}
	diff(t, "unit", &u, unit)
}

func testLeaders(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	none, err := s.Loop().LoadLeader(c)
	ok(t, err, "load before any leader")
	diff(t, "leader before any", store.Leadership{}, none)

	first, err := s.Loop().RecordLeader(c, "host-a/101", at(1))
	ok(t, err, "first leader")
	diff(t, "first leader", store.Leadership{Replica: "host-a/101", Since: at(1), Term: 1}, first)
	got, err := s.Loop().LoadLeader(c)
	ok(t, err, "load first leader")
	diff(t, "stored first leader", first, got)

	// A takeover (or the same replica leading again) is the next term.
	second, err := s.Loop().RecordLeader(c, "host-b/202", at(2))
	ok(t, err, "second leader")
	diff(t, "second leader", store.Leadership{Replica: "host-b/202", Since: at(2), Term: 2}, second)
	err = s.Tx(c, func(tx store.Tx) error {
		_, err := tx.Loop().RecordLeader(c, "host-a/101", at(3))
		return err
	})
	ok(t, err, "third leader in a transaction")
	got, err = s.Loop().LoadLeader(c)
	ok(t, err, "load third leader")
	diff(t, "stored third leader", store.Leadership{Replica: "host-a/101", Since: at(3), Term: 3}, got)

	_, err = s.Loop().RecordLeader(c, "", at(4))
	wantField(t, err, "replica", "", "a leader without a name")
	_, err = s.Loop().RecordLeader(c, "host-c/1", time.Time{})
	wantField(t, err, "since", "", "a leader without a time")
	got, err = s.Loop().LoadLeader(c)
	ok(t, err, "load after refusals")
	if got.Term != 3 {
		t.Errorf("refused records moved the term to %d, want 3", got.Term)
	}
}
