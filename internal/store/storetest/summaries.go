package storetest

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// testUnitSummaries: the runs in progress, the waiting units per tier and
// team, and the jobs per state, each summed in the store.
func testUnitSummaries(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "a", "b")

	// ja: team a, regular, 3 shards of 2 GPUs × 1000; jb: team b, core,
	// 1 GPU × 500; jc: team a, offline, 1 GPU × 250, succeeded; jd: team
	// b, core, 4 GPUs × 1000.
	ja := job("ja", "a")
	ja.Shards = 3
	submit(t, s, ja)
	jb := job("jb", "b")
	jb.Tier, jb.Request.GPUs, jb.Request.MilliPerGPU = core.TierCore, 1, 500
	submit(t, s, jb)
	jc := job("jc", "a")
	jc.Tier, jc.Request.GPUs, jc.Request.MilliPerGPU = core.TierOffline, 1, 250
	submit(t, s, jc)
	jd := job("jd", "b")
	jd.Tier, jd.Request.GPUs = core.TierCore, 4
	submit(t, s, jd)

	run := func(id string, shard int, state core.JobState, lease string, gpus ...int) store.Unit {
		return store.Unit{JobID: id, Shard: shard, State: state, Parts: []store.Part{{LeaseID: lease, GPUs: gpus}}, Start: at(10 + shard), LastCheckpoint: at(10)}
	}
	ok(t, s.Units().SaveUnits(c,
		run("ja", 0, core.JobRunning, "L1", 0, 1),
		run("ja", 1, core.JobCheckpointing, "L2", 2, 3),
		store.Unit{JobID: "jb", State: core.JobPreempted, Since: at(20), Preemptions: 1},
		run("jc", 0, core.JobRunning, "L1", 2),
	), "save units")
	ok(t, s.Units().SaveUnits(c, store.Unit{JobID: "jc", State: core.JobSucceeded, Start: at(10), End: at(30)}), "jc succeeds")
	ok(t, s.Units().SaveUnits(c, store.Unit{JobID: "jd", State: core.JobAdmitted, Since: at(5)}), "jd admitted")
	_, err := s.Jobs().TransitionJob(c, "ja", core.JobRunning, at(10))
	ok(t, err, "ja running")
	_, err = s.Jobs().TransitionJob(c, "jc", core.JobSucceeded, at(30))
	ok(t, err, "jc succeeded")

	running, err := s.Units().ListRunning(c)
	ok(t, err, "list running")
	diff(t, "runs in progress", []store.Run{
		{JobID: "ja", Shard: 0, Shards: 3, Team: "a", MilliPerGPU: 1000, Parts: []store.Part{{LeaseID: "L1", GPUs: []int{0, 1}}}, Start: at(10)},
		{JobID: "ja", Shard: 1, Shards: 3, Team: "a", MilliPerGPU: 1000, Parts: []store.Part{{LeaseID: "L2", GPUs: []int{2, 3}}}, Start: at(11)},
	}, running)
	if k := running[1].Key(); k != "ja#1" {
		t.Errorf("key of ja's shard 1: %q", k)
	}

	// Waiting: ja#2 (pending, regular, a: 2000), jb (preempted, core, b:
	// 500), jd (admitted, core, b: 4000).
	waiting, err := s.Units().CountWaiting(c, "")
	ok(t, err, "count waiting")
	diff(t, "waiting units", []store.WaitingCount{
		{Tier: core.TierCore, Team: "b", Units: 2, GPUMilli: 4500},
		{Tier: core.TierRegular, Team: "a", Units: 1, GPUMilli: 2000},
	}, waiting)
	waiting, err = s.Units().CountWaiting(c, "a")
	ok(t, err, "count team a's waiting")
	diff(t, "team a's waiting units", []store.WaitingCount{{Tier: core.TierRegular, Team: "a", Units: 1, GPUMilli: 2000}}, waiting)
	waiting, err = s.Units().CountWaiting(c, "nobody")
	ok(t, err, "count an unknown team's waiting")
	if len(waiting) != 0 {
		t.Errorf("an unknown team's waiting units: %+v", waiting)
	}

	jobs, err := s.Jobs().CountJobs(c, "")
	ok(t, err, "count jobs")
	diff(t, "jobs per state", map[core.JobState]int{core.JobPending: 2, core.JobAdmitted: 0, core.JobRunning: 1, core.JobCheckpointing: 0,
		core.JobPreempted: 0, core.JobSucceeded: 1, core.JobFailed: 0, core.JobCancelled: 0}, jobs)
	jobs, err = s.Jobs().CountJobs(c, "b")
	ok(t, err, "count team b's jobs")
	if jobs[core.JobPending] != 2 || jobs[core.JobRunning] != 0 || len(jobs) != len(store.JobStates) {
		t.Errorf("team b's jobs per state: %v", jobs)
	}

	_, err = s.Jobs().CountJobs(c, "a\x00")
	wantField(t, err, "team", "-", "count jobs of a team with a NUL")
	_, err = s.Units().CountWaiting(c, "\xff")
	wantField(t, err, "team", "-", "count waiting of a team in invalid UTF-8")
}
