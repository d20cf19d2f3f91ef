package engine

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// placed runs a harness until every unit runs, and returns it with the
// units by job id.
func placed(t *testing.T, jobs ...*core.Job) (*harness, map[string]*Unit) {
	t.Helper()
	h := newHarness(t, []core.Offer{hourlyOffer("o", "V100", 8, "8")}, Config{})
	for _, j := range jobs {
		h.submit(j, 10*time.Hour)
	}
	h.runUntil(t0.Add(10 * time.Minute))
	by := map[string]*Unit{}
	for _, u := range h.st.Units {
		if u.State != core.JobRunning {
			t.Fatalf("unit %s is %s after 10 minutes, want running", u.Key(), u.State)
		}
		by[u.Job.ID] = u
	}
	return h, by
}

// Each observed transition changes the unit as its rule says, and the
// live view stays true without State.changed: the package's TestMain
// checks the view against a fresh build at every Step, which the steps
// after the transitions run.
func TestObservedTransitions(t *testing.T) {
	ckJob := job("ck", core.TierCore, 1, 10*time.Hour)
	ckJob.CheckpointInterval = 30 * time.Minute
	h, u := placed(t, job("cancel", core.TierCore, 1, 10*time.Hour), job("fail", core.TierCore, 2, 10*time.Hour),
		ckJob, job("reported", core.TierCore, 1, 10*time.Hour))
	start := u["ck"].Start
	now := start.Add(100 * time.Minute)
	h.now = now

	if !CancelUnit(h.st, u["cancel"], now) || u["cancel"].State != core.JobCancelled || u["cancel"].Done != 100*time.Minute || u["cancel"].Parts != nil || !u["cancel"].End.Equal(now) {
		t.Errorf("cancel: %+v", u["cancel"])
	}
	if CancelUnit(h.st, u["cancel"], now.Add(time.Hour)) || u["cancel"].Done != 100*time.Minute {
		t.Errorf("a second cancel changed the unit: %+v", u["cancel"])
	}
	exit := now.Add(-10 * time.Minute)
	if !FailUnit(h.st, u["fail"], exit) || u["fail"].State != core.JobFailed || u["fail"].Done != 90*time.Minute || !u["fail"].End.Equal(exit) {
		t.Errorf("fail: %+v", u["fail"])
	}

	// A checkpoint interval of 30 minutes: at 100 minutes the last one is
	// at 90; 10 minutes of one GPU are lost.
	ck, ok := RequeueUnit(h.st, u["ck"], now)
	if !ok || !ck.Equal(start.Add(90*time.Minute)) || u["ck"].State != core.JobPending || u["ck"].Done != 90*time.Minute ||
		u["ck"].LostMilliSeconds != 600*int64(core.WholeGPU) || !u["ck"].Since.Equal(now) || u["ck"].Parts != nil {
		t.Errorf("requeue: checkpoint %s ok %v, unit %+v", ck, ok, u["ck"])
	}
	if _, ok := RequeueUnit(h.st, u["ck"], now); ok {
		t.Error("requeued a pending unit")
	}

	// A reported checkpoint counts; one from the future or before the run
	// does not.
	r := u["reported"]
	if OnCheckpoint(h.st, r, now.Add(time.Minute), now) || OnCheckpoint(h.st, r, r.Start.Add(-time.Minute), now) {
		t.Error("took a checkpoint outside the run")
	}
	if !OnCheckpoint(h.st, r, r.Start.Add(77*time.Minute), now) {
		t.Error("refused a checkpoint inside the run")
	}
	if ck, _ := RequeueUnit(h.st, r, now); !ck.Equal(r.Start.Add(77 * time.Minute)) {
		t.Errorf("requeue after a reported checkpoint: from %s, want start+77m", ck)
	}

	// The steps after: the requeued units are placed again, the ended ones
	// stay ended, and the view checks pass.
	h.runUntil(now.Add(10 * time.Minute))
	if u["ck"].State != core.JobRunning || u["reported"].State != core.JobRunning {
		t.Errorf("requeued units not placed again: ck %s, reported %s", u["ck"].State, u["reported"].State)
	}
	if u["cancel"].State != core.JobCancelled || u["fail"].State != core.JobFailed {
		t.Errorf("ended units changed: cancel %s, fail %s", u["cancel"].State, u["fail"].State)
	}
}

// At a reclaim notice the units on the machine checkpoint; once saved they
// run on (ResumeCheckpointed), and when the machine goes, RequeueLease puts
// whatever still runs there back in the queue.
func TestResumeAndRequeueLease(t *testing.T) {
	h, u := placed(t, job("a", core.TierCore, 1, 10*time.Hour), job("b", core.TierCore, 1, 10*time.Hour))
	lease := u["a"].Parts[0].LeaseID
	now := h.now
	OnReclaimNotice(h.st, lease, now, now.Add(2*time.Minute), h.cfg)
	var on []*Unit
	for _, x := range h.st.Units {
		if x.RunsOn(lease) {
			on = append(on, x)
			if x.State != core.JobCheckpointing {
				t.Fatalf("unit %s on the noticed lease is %s, want checkpointing", x.Key(), x.State)
			}
		}
	}
	if got := ResumeCheckpointed(h.st, lease); len(got) != len(on) {
		t.Fatalf("resumed %d units, want the %d on the lease", len(got), len(on))
	}
	for _, x := range on {
		if x.State != core.JobRunning {
			t.Errorf("unit %s is %s after resume, want running", x.Key(), x.State)
		}
	}
	h.stepOnce()
	if got := RequeueLease(h.st, lease, h.now); len(got) != len(on) {
		t.Fatalf("requeued %d units, want %d", len(got), len(on))
	}
	for _, x := range on {
		if x.State != core.JobPending {
			t.Errorf("unit %s is %s after its lease went, want pending", x.Key(), x.State)
		}
	}
	h.stepOnce() // the view check
}
