package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Opener returns a store for the test t. The first call for a given t
// returns a store on a new, empty database; a later call with the same t,
// after the earlier store was closed, opens that same database again (the
// restart tests rely on it). The opener cleans up with t.Cleanup.
type Opener func(t *testing.T) store.Store

// Run runs the whole suite against the stores open makes.
func Run(t *testing.T, open Opener) {
	suites := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"Teams", testTeams},
		{"Users", testUsers},
		{"Tokens", testTokens},
		{"Jobs", testJobs},
		{"Idempotency", testIdempotency},
		{"JobStates", testJobStates},
		{"WideJob", testWideJob},
		{"UnitLimit", testUnitLimit},
		{"GetJobs", testGetJobs},
		{"Units", testUnits},
		{"UnitSummaries", testUnitSummaries},
		{"Leases", testLeases},
		{"LeaseTransitions", testLeaseTransitions},
		{"LeaseProviderIDs", testLeaseProviderIDs},
		{"Events", testEvents},
		{"Samples", testSamples},
		{"Alerts", testAlerts},
		{"Loop", testLoop},
		{"Inbox", testInbox},
		{"Leaders", testLeaders},
		{"Agents", testAgents},
		{"AgentCommands", testAgentCommands},
		{"JobLogs", testJobLogs},
		{"EngineRoundTrip", testEngineRoundTrip},
		{"Tx", testTx},
		{"Pagination", testPagination},
		{"Concurrency", testConcurrency},
		{"GroupCommit", testGroupCommit},
		{"GroupCommitAsAlone", testGroupCommitAsAlone},
		{"Restart", testRestart},
		{"BadInput", testBadInput},
		{"RowErrors", testRowErrors},
		{"Injection", testInjection},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) { s.fn(t, open) })
	}
}

// t0 is the suite's epoch; times are whole microseconds, as the store
// keeps them.
var t0 = time.Date(2026, 3, 2, 9, 30, 0, 123456000, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

// diff fails t with a diff when want and got differ.
func diff(t *testing.T, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// ok fails t now if err is not nil.
func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr checks that err wraps target.
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one wrapping %v", what, err, target)
	}
}

// wantField checks that err is a *core.FieldError for field (and, if
// value is not "-", that value).
func wantField(t *testing.T, err error, field, value, what string) {
	t.Helper()
	var fe *core.FieldError
	if !errors.As(err, &fe) {
		t.Errorf("%s: error %v, want a *core.FieldError for %s", what, err, field)
		return
	}
	if fe.Field != field || (value != "-" && fe.Value != value) {
		t.Errorf("%s: field error for %s=%q (%v), want %s=%q", what, fe.Field, fe.Value, err, field, value)
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

// team returns a valid team.
func team(id string) core.Team {
	return core.Team{ID: id, Name: "Team " + id, Cohort: "research", Weight: 2, MonthlyBudget: 5_000 * core.MicrosPerUnit, UnitLimit: 100_000,
		Quotas: []core.Quota{{GPUClass: "H100", Guaranteed: 8000, BorrowLimit: -1, LendLimit: 4000}, {GPUClass: "A100", Guaranteed: 2000, BorrowLimit: 1000, LendLimit: -1}}}
}

// job returns a valid job of team submitted at t0.
func job(id, team string) core.Job {
	return core.Job{ID: id, Team: team, User: "alice", Tier: core.TierRegular,
		Request: core.Request{GPUs: 2, MilliPerGPU: core.WholeGPU, MemPerGPUMiB: 40_000, Models: []string{"H100", "A100"},
			Throughput: map[string]int64{"H100": 300, "A100": 120}, CPUMilli: 8000, MemMiB: 64_000,
			Workload: core.Training, Accelerators: []core.Accelerator{core.NVIDIA, core.AMD}},
		EstDuration: 90 * time.Minute, Deadline: at(24 * 60), Interruptible: true, CheckpointInterval: 10 * time.Minute,
		Command: []string{"python", "train.py", "--epochs=3"}, Image: "ghcr.io/acme/train:1", Submit: t0}
}

// setupTeams creates teams on s.
func setupTeams(t *testing.T, s store.Aggregates, ids ...string) {
	t.Helper()
	for _, id := range ids {
		ok(t, s.Teams().CreateTeam(ctx(t), team(id)), "create team "+id)
	}
}

// submit submits j without an idempotency key and fails t on error.
func submit(t *testing.T, s store.Aggregates, j core.Job) store.Job {
	t.Helper()
	got, created, err := s.Jobs().SubmitJob(ctx(t), j, "")
	ok(t, err, "submit "+j.ID)
	if !created {
		t.Fatalf("submit %s: created false", j.ID)
	}
	return got
}

// intent returns a lease intent.
func intent(id string) store.Lease {
	return store.Lease{Lease: core.Lease{ID: id, OfferID: "aws/us-east-1/p5.48xlarge", Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: "ct-" + id}, Requested: at(1)}
}

// allJobs pages through every job f selects with page size n.
func allJobs(t *testing.T, s store.Aggregates, f store.JobFilter, n int) []store.Job {
	t.Helper()
	var out []store.Job
	f.Limit = n
	for i := 0; ; i++ {
		p, err := s.Jobs().ListJobs(ctx(t), f)
		ok(t, err, fmt.Sprintf("list jobs page %d", i))
		out = append(out, p.Items...)
		if p.Next == "" {
			return out
		}
		if len(p.Items) != n {
			t.Fatalf("page %d has %d jobs and a next cursor, want %d", i, len(p.Items), n)
		}
		f.Cursor = p.Next
	}
}

func jobIDs(js []store.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
