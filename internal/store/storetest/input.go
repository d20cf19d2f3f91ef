package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// testBadInput: every bad value is refused before it reaches the
// database, with a *core.FieldError naming the field and the value.
func testBadInput(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	submit(t, s, job("j", "ml"))
	ok(t, s.Leases().CreateLease(c, intent("L1")), "lease")

	withTeam := func(edit func(*core.Team)) func() error {
		tm := team("x")
		edit(&tm)
		return func() error { return s.Teams().CreateTeam(c, tm) }
	}
	withJob := func(edit func(*core.Job)) func() error {
		j := job("x", "ml")
		edit(&j)
		return func() error { _, _, err := s.Jobs().SubmitJob(c, j, ""); return err }
	}
	withUser := func(edit func(*store.User)) func() error {
		u := store.User{ID: "u", Team: "ml", Role: store.RoleMember, Created: at(0)}
		edit(&u)
		return func() error { return s.Users().CreateUser(c, u) }
	}
	withToken := func(edit func(*store.Token)) func() error {
		tk := store.Token{ID: "tk", Hash: store.HashToken("x"), Role: store.RoleAgent, Created: at(0)}
		edit(&tk)
		return func() error { return s.Tokens().CreateToken(c, tk) }
	}
	withLease := func(edit func(*store.Lease)) func() error {
		l := intent("Lx")
		edit(&l)
		return func() error { return s.Leases().CreateLease(c, l) }
	}
	withUnit := func(edit func(*store.Unit)) func() error {
		u := store.Unit{JobID: "j", State: core.JobRunning}
		edit(&u)
		return func() error { return s.Units().SaveUnits(c, u) }
	}
	withEvent := func(edit func(*core.Event)) func() error {
		e := core.Event{At: at(0), Kind: "place", Subject: "j"}
		edit(&e)
		return func() error { _, err := s.Events().AppendEvents(c, e); return err }
	}
	withSample := func(edit func(*core.Sample)) func() error {
		x := core.Sample{LeaseID: "L1", At: at(0), UtilPct: 5}
		edit(&x)
		return func() error { return s.Samples().InsertSamples(c, x) }
	}
	withAlert := func(edit func(*store.Alert)) func() error {
		a := store.Alert{Kind: "idle-alert", Raised: at(0)}
		edit(&a)
		return func() error { _, _, err := s.Alerts().RaiseAlert(c, a); return err }
	}
	long := strings.Repeat("x", store.MaxIDLen+1)
	for _, tc := range []struct {
		name         string
		op           func() error
		field, value string
	}{
		{"team: empty id", withTeam(func(x *core.Team) { x.ID = "" }), "id", ""},
		{"team: id too long", withTeam(func(x *core.Team) { x.ID = long }), "id", "-"},
		{"team: negative budget", withTeam(func(x *core.Team) { x.MonthlyBudget = -1_500_000 }), "monthly_budget", core.Micros(-1_500_000).String()},
		{"team: negative unit limit", withTeam(func(x *core.Team) { x.UnitLimit = -1 }), "unit_limit", "-1"},
		{"team: unit limit too high", withTeam(func(x *core.Team) { x.UnitLimit = core.MaxUnitLimit + 1 }), "unit_limit", "1000001"},
		{"team: negative weight", withTeam(func(x *core.Team) { x.Weight = -3 }), "weight", "-3"},
		{"team: negative guarantee", withTeam(func(x *core.Team) { x.Quotas[1].Guaranteed = -5 }), "quotas[1].guaranteed", "-5"},
		{"team: quota without class", withTeam(func(x *core.Team) { x.Quotas[0].GPUClass = "" }), "quotas[0].gpu_class", ""},
		{"team: class twice", withTeam(func(x *core.Team) { x.Quotas[1].GPUClass = "H100" }), "quotas[1].gpu_class", "H100"},
		{"team: NUL in name", withTeam(func(x *core.Team) { x.Name = "a\x00b" }), "name", `a\0b`},
		{"team: invalid UTF-8", withTeam(func(x *core.Team) { x.Cohort = "\xff\xfe" }), "cohort", "-"},
		{"user: empty id", withUser(func(u *store.User) { u.ID = "" }), "id", ""},
		{"user: unknown role", withUser(func(u *store.User) { u.Role = "root" }), "role", "root"},
		{"user: member without team", withUser(func(u *store.User) { u.Team = "" }), "team", ""},
		{"user: no creation time", withUser(func(u *store.User) { u.Created = time.Time{} }), "created", ""},
		{"token: no hash", withToken(func(x *store.Token) { x.Hash = store.TokenHash{} }), "hash", ""},
		{"token: member without user", withToken(func(x *store.Token) { x.Role, x.Team = store.RoleMember, "ml" }), "user", ""},
		{"token: expires before created", withToken(func(x *store.Token) { x.Expires = at(-1) }), "expires", "-"},
		{"job: empty id", withJob(func(j *core.Job) { j.ID = "" }), "id", ""},
		{"job: '#' in id", withJob(func(j *core.Job) { j.ID = "a#1" }), "id", "a#1"},
		{"job: '/' in id", withJob(func(j *core.Job) { j.ID = "a/b" }), "id", "a/b"},
		{"job: '..' in id", withJob(func(j *core.Job) { j.ID = "a..b" }), "id", "a..b"},
		{"job: newline in id", withJob(func(j *core.Job) { j.ID = "a\nb" }), "id", "a\nb"},
		{"job: space in id", withJob(func(j *core.Job) { j.ID = "a b" }), "id", "a b"},
		{"job: formula id", withJob(func(j *core.Job) { j.ID = "=cmd" }), "id", "=cmd"},
		{"job: space in team", withJob(func(j *core.Job) { j.Team = "m l" }), "team", "m l"},
		{"job: '/' in user", withJob(func(j *core.Job) { j.User = "../root" }), "user", "../root"},
		{"job: checkpoint interval over 100 years", withJob(func(j *core.Job) { j.CheckpointInterval = core.MaxJobDuration + time.Second }), "checkpoint_interval", "-"},
		{"team: '/' in id", withTeam(func(x *core.Team) { x.ID = "a/b" }), "id", "a/b"},
		{"user: space in id", withUser(func(u *store.User) { u.ID = "a b" }), "id", "a b"},
		{"job: empty team", withJob(func(j *core.Job) { j.Team = "" }), "team", ""},
		{"job: no GPUs", withJob(func(j *core.Job) { j.Request.GPUs = 0 }), "gpus", "0"},
		{"job: bad tier", withJob(func(j *core.Job) { j.Tier = "gold" }), "tier", "gold"},
		{"job: negative shards", withJob(func(j *core.Job) { j.Shards = -1 }), "shards", "-1"},
		{"job: negative host memory", withJob(func(j *core.Job) { j.Request.MemMiB = -1 }), "mem_mib", "-1"},
		{"job: negative duration", withJob(func(j *core.Job) { j.EstDuration = -time.Second }), "duration", "-1s"},
		{"job: NUL in command", withJob(func(j *core.Job) { j.Command = []string{"sh", "-c\x00rm"} }), "command[1]", `-c\0rm`},
		{"job: no submit time", withJob(func(j *core.Job) { j.Submit = time.Time{} }), "submit", ""},
		{"job: submitted running", withJob(func(j *core.Job) { j.State = core.JobRunning }), "state", "running"},
		{"job: empty model name", withJob(func(j *core.Job) { j.Request.Models = []string{""} }), "models[0]", ""},
		{"job: unknown workload", withJob(func(j *core.Job) { j.Request.Workload = "serving" }), "workload", "serving"},
		{"job: unknown accelerator", withJob(func(j *core.Job) { j.Request.Accelerators = []core.Accelerator{"cuda"} }), "accelerators[0]", "cuda"},
		{"job: long idempotency key", func() error { _, _, err := s.Jobs().SubmitJob(c, job("y", "ml"), long); return err }, "idempotency_key", "-"},
		{"get job: empty id", func() error { _, err := s.Jobs().GetJob(c, ""); return err }, "id", ""},
		{"get team: empty id", func() error { _, err := s.Teams().GetTeam(c, ""); return err }, "id", ""},
		{"get lease: empty id", func() error { _, err := s.Leases().GetLease(c, ""); return err }, "id", ""},
		{"cancel: empty id", func() error { _, err := s.Jobs().CancelJob(c, "", at(0)); return err }, "id", ""},
		{"cancel: no time", func() error { _, err := s.Jobs().CancelJob(c, "j", time.Time{}); return err }, "at", ""},
		{"lease: alias mode", withLease(func(l *store.Lease) { l.Mode = "hourly" }), "mode", "hourly"},
		{"lease: no client token", withLease(func(l *store.Lease) { l.ClientToken = "" }), "client_token", ""},
		{"lease: no request time", withLease(func(l *store.Lease) { l.Requested = time.Time{} }), "requested", ""},
		{"lease: no offer", withLease(func(l *store.Lease) { l.OfferID = "" }), "offer", ""},
		{"lease: earlier term on an alias mode", withLease(func(l *store.Lease) {
			l.Start = at(60)
			l.Earlier = []core.Term{{Mode: "hourly", Start: at(30)}}
		}), "earlier[0].mode", "hourly"},
		{"lease: earlier term after the lease's start", withLease(func(l *store.Lease) {
			l.Start = at(60)
			l.Earlier = []core.Term{{Mode: core.Daily, Start: at(90)}}
		}), "earlier[0].start", at(90).UTC().Format(time.RFC3339Nano)},
		{"update lease: unknown state", func() error { l := intent("L1"); l.State = "gone"; return s.Leases().UpdateLease(c, l) }, "state", "gone"},
		{"unit: unknown state", withUnit(func(u *store.Unit) { u.State = "zombie" }), "state", "zombie"},
		{"unit: negative done", withUnit(func(u *store.Unit) { u.Done = -time.Second }), "done", "-1000000000"},
		{"unit: part without lease", withUnit(func(u *store.Unit) { u.Parts = []store.Part{{GPUs: []int{0}}} }), "parts[0].lease", ""},
		{"unit: negative GPU", withUnit(func(u *store.Unit) { u.Parts = []store.Part{{LeaseID: "L1", GPUs: []int{-1}}} }), "parts[0].gpus", "-1"},
		{"event: no kind", withEvent(func(e *core.Event) { e.Kind = "" }), "kind", ""},
		{"event: no time", withEvent(func(e *core.Event) { e.At = time.Time{} }), "at", ""},
		{"event: NUL in attribute", withEvent(func(e *core.Event) { e.Attrs = map[string]string{"k": "\x00"} }), "attrs[k]", `\0`},
		{"sample: utilization over 100", withSample(func(x *core.Sample) { x.UtilPct = 101 }), "util_pct", "101"},
		{"sample: negative GPU", withSample(func(x *core.Sample) { x.GPU = -1 }), "gpu", "-1"},
		{"sample: no lease", withSample(func(x *core.Sample) { x.LeaseID = "" }), "lease", ""},
		{"sample: bad limit", func() error { _, err := s.Samples().QuerySamples(c, store.SampleFilter{Limit: -5}); return err }, "limit", "-5"},
		{"alert: no kind", withAlert(func(a *store.Alert) { a.Kind = "" }), "kind", ""},
		{"alert: already resolved", withAlert(func(a *store.Alert) { a.Resolved = at(1) }), "resolved", "-"},
		{"loop: negative spend", func() error {
			_, err := s.Loop().SaveLoop(c, store.LoopState{Spent: map[string]core.Micros{"ml": -1}})
			return err
		}, "spent[ml]", core.Micros(-1).String()},
		{"loop: negative next id", func() error { _, err := s.Loop().SaveLoop(c, store.LoopState{NextID: -1}); return err }, "next_id", "-1"},
		{"loop: runs out of order", func() error {
			_, err := s.Loop().SaveLoop(c, store.LoopState{Runs: []core.DurationRuns{{Team: "ml", Command: "b"}, {Team: "ml", Command: "a"}}})
			return err
		}, "runs[1]", "ml a"},
		{"loop: negative run", func() error {
			_, err := s.Loop().SaveLoop(c, store.LoopState{Runs: []core.DurationRuns{{Team: "ml", Seconds: []int64{5, -1}}}})
			return err
		}, "runs[0].seconds", "-1"},
		{"loop: negative ratio", func() error {
			_, err := s.Loop().SaveLoop(c, store.LoopState{Ratios: map[string][]int64{"ml": {-3}}})
			return err
		}, "ratios[ml]", "-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			wantField(t, err, tc.field, tc.value, tc.name)
			if err != nil && !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: message %q does not name the field %s", tc.name, err, tc.field)
			}
		})
	}
	// Nothing of the refused input was stored.
	if _, err := s.Teams().GetTeam(c, "x"); err == nil {
		t.Error("a refused team was stored")
	}
	if _, err := s.Jobs().GetJob(c, "x"); err == nil {
		t.Error("a refused job was stored")
	}
	if _, err := s.Leases().GetLease(c, "Lx"); err == nil {
		t.Error("a refused lease was stored")
	}
}

// hostile are values that would change a query if spliced into its text.
var hostile = []string{
	`'; DROP TABLE jobs; --`,
	`x' OR '1'='1`,
	`" OR ""="`,
	`Robert'); DROP TABLE teams;--`,
	`$1`,
	`?1`,
	`:id`,
	`\'; SELECT pg_sleep(5); --`,
	`%_*`,
	"tab\tnew\nline ünï©ødé 𝔘",
}

// testInjection: hostile values are stored and read back verbatim, match
// only themselves in filters, and leave the schema intact.
func testInjection(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "plain")
	submit(t, s, job("plain-job", "plain"))
	for i, v := range hostile {
		// New team, user and job ids follow core.CheckName, which no
		// hostile value passes; they go in every text field instead, and
		// reads by a hostile id find nothing.
		id := fmt.Sprintf("h%d", i)
		for what, op := range map[string]func() error{
			"team": func() error { return s.Teams().CreateTeam(c, core.Team{ID: v, Name: v}) },
			"user": func() error {
				return s.Users().CreateUser(c, store.User{ID: v, Team: "plain", Role: store.RoleMember, Created: at(0)})
			},
			"job": func() error { _, _, err := s.Jobs().SubmitJob(c, job(v, "plain"), ""); return err },
		} {
			wantField(t, op(), "id", "-", fmt.Sprintf("%s with id %q", what, v))
		}
		if _, err := s.Jobs().GetJob(c, v); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get job %q: %v, want ErrNotFound", v, err)
		}
		tm := core.Team{ID: id, Name: v, Cohort: v, Quotas: []core.Quota{{GPUClass: v, Guaranteed: 1}}}
		ok(t, s.Teams().CreateTeam(c, tm), fmt.Sprintf("team %q", v))
		got, err := s.Teams().GetTeam(c, id)
		ok(t, err, fmt.Sprintf("get team %q", v))
		diff(t, "hostile team", tm, got)

		ok(t, s.Users().CreateUser(c, store.User{ID: id, Team: id, Name: v, Email: v, Role: store.RoleMember, Created: at(0)}), "user")
		j := job(id, id)
		j.Image, j.Command = v, []string{v, v}
		j.Request.Models, j.Request.Throughput = []string{v}, map[string]int64{v: 1}
		sj, created, err := s.Jobs().SubmitJob(c, j, v)
		ok(t, err, fmt.Sprintf("submit %q", v))
		if !created {
			t.Errorf("job %q not created", v)
		}
		got2, err := s.Jobs().GetJob(c, id)
		ok(t, err, fmt.Sprintf("get job %q", v))
		diff(t, "hostile job", sj, got2)
		page, err := s.Jobs().ListJobs(c, store.JobFilter{Team: id})
		ok(t, err, "list by team")
		diff(t, "jobs of the team", []string{id}, jobIDs(page.Items))
		page, err = s.Jobs().ListJobs(c, store.JobFilter{Team: v})
		ok(t, err, "list by hostile team")
		diff(t, "jobs of the hostile team", []string{}, jobIDs(page.Items))

		l := store.Lease{Lease: core.Lease{ID: v, OfferID: v, Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: v, ProviderID: v}, Requested: at(0)}
		ok(t, s.Leases().CreateLease(c, l), "hostile lease")
		gl, err := s.Leases().LeaseByProviderID(c, v)
		ok(t, err, "lease by hostile provider id")
		diff(t, "hostile lease", l, gl)

		e := core.Event{At: at(i), Kind: v, Subject: v, Reason: v, Attrs: map[string]string{v: v}}
		seqs, err := s.Events().AppendEvents(c, e)
		ok(t, err, "hostile event")
		e.Seq = seqs[0]
		ep, err := s.Events().ListEvents(c, store.EventFilter{Subject: v})
		ok(t, err, "events by hostile subject")
		diff(t, "hostile event", []core.Event{e}, ep.Items)

		ok(t, s.Samples().InsertSamples(c, core.Sample{LeaseID: v, At: at(i), UtilPct: 1}), "hostile sample")
		a, _, err := s.Alerts().RaiseAlert(c, store.Alert{Kind: v, LeaseID: v, Unit: v, Team: v, Action: v, Reason: v, Raised: at(i)})
		ok(t, err, "hostile alert")
		if a.Reason != v {
			t.Errorf("alert reason %q, want %q", a.Reason, v)
		}
	}
	teams, err := s.Teams().ListTeams(c)
	ok(t, err, "teams still there")
	if len(teams) != len(hostile)+1 {
		t.Errorf("%d teams, want %d", len(teams), len(hostile)+1)
	}
	all := allJobs(t, s, store.JobFilter{}, 100)
	if len(all) != len(hostile)+1 {
		t.Errorf("%d jobs, want %d: a value was executed or matched too much", len(all), len(hostile)+1)
	}
	ss, err := s.Samples().QuerySamples(c, store.SampleFilter{LeaseID: `x' OR '1'='1`})
	ok(t, err, "samples by hostile lease")
	if len(ss) != 1 {
		t.Errorf("%d samples for one hostile lease, want 1", len(ss))
	}
}

// testRowErrors: a taken id, a missing reference and a reused
// idempotency key are *store.RowError values that name the field and
// the value in words of their own, with no database text, and wrap
// ErrConflict or ErrNotFound.
func testRowErrors(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	submit(t, s, job("j", "ml"))
	ok(t, s.Users().CreateUser(c, store.User{ID: "ann", Team: "ml", Role: store.RoleMember, Created: at(0)}), "user")
	_, _, err := s.Jobs().SubmitJob(c, job("k", "ml"), "key1")
	ok(t, err, "submit with key")
	other := job("k2", "ml")
	other.Request.GPUs = 3
	for _, tc := range []struct {
		name  string
		err   error
		kind  error
		field string
		msg   string
	}{
		{"team id taken", s.Teams().CreateTeam(c, team("ml")), store.ErrConflict, "id", `team "ml" already exists`},
		{"user id taken", s.Users().CreateUser(c, store.User{ID: "ann", Team: "ml", Role: store.RoleMember, Created: at(0)}), store.ErrConflict, "id", `user "ann" already exists`},
		{"user of an unknown team", s.Users().CreateUser(c, store.User{ID: "bob", Team: "zz", Role: store.RoleMember, Created: at(0)}), store.ErrNotFound, "team", `team "zz" does not exist`},
		{"token of an unknown user", s.Tokens().CreateToken(c, store.Token{ID: "t1", Hash: store.HashToken("a"), User: "nobody", Team: "ml", Role: store.RoleMember, Created: at(0)}),
			store.ErrNotFound, "user", `user "nobody" does not exist`},
		{"token of an unknown team", s.Tokens().CreateToken(c, store.Token{ID: "t2", Hash: store.HashToken("b"), User: "ann", Team: "zz", Role: store.RoleMember, Created: at(0)}),
			store.ErrNotFound, "team", `team "zz" does not exist`},
		{"job id taken", func() error { _, _, err := s.Jobs().SubmitJob(c, job("j", "ml"), ""); return err }(), store.ErrConflict, "id", `job "j" already exists`},
		{"job of an unknown team", func() error { _, _, err := s.Jobs().SubmitJob(c, job("x", "zz"), ""); return err }(), store.ErrNotFound, "team", `team "zz" does not exist`},
		{"key reused", func() error { _, _, err := s.Jobs().SubmitJob(c, other, "key1"); return err }(), store.ErrConflict, "idempotency_key",
			`idempotency key "key1" was used for job "k" with a different body`},
	} {
		var re *store.RowError
		if !errors.Is(tc.err, tc.kind) || !errors.As(tc.err, &re) {
			t.Errorf("%s: %v, want a *store.RowError wrapping %v", tc.name, tc.err, tc.kind)
			continue
		}
		diff(t, tc.name, []string{tc.field, tc.msg}, []string{re.Field, re.Msg})
		for _, raw := range []string{"UNIQUE", "constraint", "duplicate key", "violates", "SQLSTATE"} {
			if strings.Contains(tc.err.Error(), raw) {
				t.Errorf("%s: %q carries database text %q", tc.name, tc.err, raw)
			}
		}
	}
}
