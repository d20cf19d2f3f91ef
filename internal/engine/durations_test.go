package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/sched"
	"pgregory.net/rapid"
)

// TestEstimateRatioOne: a team whose estimates were right (a ratio of
// exactly 1) is planned on its estimates as given, whatever its runs,
// and the scheduler sees the user's own job, not a copy.
func TestEstimateRatioOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := &State{learn: true}
		for i, n := 0, rapid.IntRange(3, 40).Draw(t, "ratios"); i < n; i++ {
			d := time.Duration(rapid.Int64Range(1, 1e6).Draw(t, "d")) * time.Second
			st.Durations.Observe("t", rapid.SampledFrom([]string{"", "train", "eval"}).Draw(t, "cmd"), d, d)
		}
		est := time.Duration(rapid.Int64Range(1, int64(core.MaxJobDuration)).Draw(t, "est"))
		j := job("j", core.TierRegular, 1, est)
		j.Command = []string{rapid.SampledFrom([]string{"train", "eval"}).Draw(t, "command")}
		u := &Unit{Unit: sched.Unit{Job: j}, State: core.JobPending}
		if got := st.Estimate(u); got != est {
			t.Fatalf("ratio 1: planned on %s, want the estimate %s", got, est)
		}
		st.setEstimate(u)
		if su := u.schedUnit(); su.Job != j {
			t.Fatal("ratio 1: the scheduler sees a copy of the job")
		}
		if got := plan.Corrected(est, 10000); got != est {
			t.Fatalf("plan.Corrected(%s, 10000) = %s", est, got)
		}
	})
}

// TestFinishLearnPredict: units that succeed teach the model; a later
// unit of the team is planned on the corrected estimate (the scheduler
// and fleet see it), a unit without an estimate on its command's median
// run, and the user's job keeps its estimate as given. Learning off
// plans on the estimate, though the model learned all the same.
func TestFinishLearnPredict(t *testing.T) {
	h := newHarness(t, []core.Offer{hourlyOffer("od", "A100", 8, "2")}, Config{LearnDurations: true})
	// Three jobs estimated at 4 h that run 1 h: the team's ratio is 1/4.
	for _, id := range []string{"a", "b", "c"} {
		j := job(id, core.TierRegular, 1, 4*time.Hour)
		j.Command = []string{"train.py"}
		h.submit(j, time.Hour)
	}
	long := job("long", core.TierRegular, 1, 20*time.Hour) // runs its estimate: 20 h
	h.submit(long, 20*time.Hour)
	h.runUntil(t0.Add(2 * time.Hour))
	for _, id := range []string{"a", "b", "c"} {
		if u := h.st.unit(id); u.State != core.JobSucceeded {
			t.Fatalf("%s is %s after 2 h", id, u.State)
		}
	}
	if r := h.st.Durations.Ratios["t"]; !reflect.DeepEqual(r, []int64{2500, 2500, 2500}) {
		t.Fatalf("ratios %v, want three of 2500 bp", r)
	}
	if r := h.st.Durations.Runs[plan.DurationKey("t", "train.py")]; !reflect.DeepEqual(r, []int64{3600, 3600, 3600}) {
		t.Fatalf("runs %v, want three of an hour", r)
	}
	// The running unit was planned again when the ratio appeared.
	lu := h.st.unit("long")
	if lu.State != core.JobRunning || lu.Planned() != 5*time.Hour || lu.Job.EstDuration != 20*time.Hour {
		t.Fatalf("long: %s, planned on %s (estimate %s); want running on 5h, the estimate kept at 20h", lu.State, lu.Planned(), lu.Job.EstDuration)
	}
	if end, ok := estEnd(lu); !ok || !end.Equal(lu.Start.Add(5*time.Hour)) {
		t.Fatalf("long's estimated end %s, want its start + 5h", end)
	}

	d8 := job("d", core.TierRegular, 1, 8*time.Hour)
	none := job("none", core.TierRegular, 1, 0)
	none.Command = []string{"train.py"}
	other := job("other", core.TierRegular, 1, 0)
	other.Command = []string{"eval.py"}
	h.submit(d8, 2*time.Hour)
	h.submit(none, time.Hour)
	h.submit(other, time.Hour)
	var seen map[string]time.Duration
	h.onStep = func(h *harness, d *Decisions) {
		if seen != nil {
			return
		}
		seen = map[string]time.Duration{}
		for _, su := range h.st.scratch.v.pending {
			seen[su.Key()] = su.Job.EstDuration
		}
	}
	h.stepOnce()
	want := map[string]time.Duration{"d": 2 * time.Hour, "none": time.Hour, "other": 0}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("the scheduler saw durations %v, want %v", seen, want)
	}
	if d8.EstDuration != 8*time.Hour || none.EstDuration != 0 {
		t.Fatalf("the users' estimates changed: %s, %s", d8.EstDuration, none.EstDuration)
	}
	if d, why := h.st.EstimateReason(h.st.unit("d")); d != 2*time.Hour || why == "" {
		t.Fatalf("EstimateReason(d) = %s, %q", d, why)
	}

	// Learning off: the estimates as given; the model still learns.
	h.cfg.LearnDurations = false
	h.stepOnce()
	if u := h.st.unit("d"); u.Planned() != 8*time.Hour || h.st.Estimate(u) != 8*time.Hour {
		t.Fatalf("learning off: d planned on %s, want 8h", u.Planned())
	}
	h.runUntil(h.now.Add(24 * time.Hour))
	if n := len(h.st.Durations.Ratios["t"]); n != 5 {
		t.Fatalf("learning off: %d ratios, want 5 (the model learns either way)", n)
	}
}

// TestLearnExactIsUnchanged: with every estimate exact, learning
// durations decides exactly what planning on the estimates does.
func TestLearnExactIsUnchanged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		off, _ := spec.run(t)
		spec.learn = true
		on, _ := spec.run(t)
		if !reflect.DeepEqual(off.events, on.events) {
			t.Fatalf("exact estimates: %d events learning, %d not", len(on.events), len(off.events))
		}
		if len(on.st.Durations.Ratios) == 0 {
			t.Fatal("nothing learned")
		}
	})
}

// TestLearnBiased: with estimates off by a factor, a learning run is
// deterministic, finishes all work, and its live view stays what a
// fresh build gives (CheckViews, on in this package's tests) and every
// unit planned on what the model says.
func TestLearnBiased(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		spec.learn = true
		spec.actualBP = rapid.SampledFrom([]int64{2500, 5000, 12000}).Draw(t, "actual")
		h, _ := spec.run(t)
		again, _ := spec.run(t)
		if !reflect.DeepEqual(h.events, again.events) {
			t.Fatal("the same run decided differently twice")
		}
		for _, u := range h.st.Units {
			if u.State != core.JobSucceeded {
				t.Fatalf("unit %s ended the run %s", u.Key(), u.State)
			}
		}
	})
}
