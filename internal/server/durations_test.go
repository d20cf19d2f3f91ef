package server

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestDurationsSurviveRestart: what finished jobs taught the engine of
// run times is saved with the loop state at every tick, and a restarted
// loop reads it back and plans a job without an estimate on it as the
// first loop would have.
func TestDurationsSurviveRestart(t *testing.T) {
	w := newWorld(t)
	loop := func() store.LoopState {
		t.Helper()
		ls, err := w.st.Loop().LoadLoop(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	w.submit("j1", core.TierCore, 30*time.Minute)
	w.submit("j2", core.TierCore, 20*time.Minute)
	w.run(40 * time.Minute)
	before := loop()
	wantRuns := []core.DurationRuns{{Team: "a", Command: "", Seconds: []int64{1200, 1800}}}
	if !reflect.DeepEqual(before.Runs, wantRuns) || !reflect.DeepEqual(before.Ratios, map[string][]int64{"a": {10000, 10000}}) {
		t.Fatalf("saved runs %+v and ratios %v; want %+v and two ratios of 1", before.Runs, before.Ratios, wantRuns)
	}
	predict := func(st *engine.State) time.Duration {
		t.Helper()
		j := &core.Job{ID: "x", Team: "a", Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: w.clk.Now()}
		u := &engine.Unit{Unit: sched.Unit{Job: j}, State: core.JobPending, Since: w.clk.Now()}
		st.Units = append(st.Units, u)
		engine.Step(st, w.clk.Now(), engine.Config{LearnDurations: true, NoAcquire: true, NoRelease: true})
		return u.Planned()
	}
	offers := hourly()
	catalog := func(id string) (*core.Offer, bool) { return &offers[0], id == offers[0].ID }
	first, _, err := loadEngineState(context.Background(), w.st, catalog)
	if err != nil {
		t.Fatal(err)
	}
	// The lower median of 20 and 30 minutes.
	if got := predict(first); got != 20*time.Minute {
		t.Fatalf("before the restart a job without an estimate is planned on %s, want 20m", got)
	}

	w.restart()
	st, _, err := loadEngineState(context.Background(), w.st, catalog)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.Durations, first.Durations) {
		t.Fatalf("a restart reads durations %+v, want %+v", st.Durations, first.Durations)
	}
	if got := predict(st); got != 20*time.Minute {
		t.Fatalf("after the restart a job without an estimate is planned on %s, want 20m as before", got)
	}
	// The restarted loop learns on from there.
	w.submit("j3", core.TierCore, 10*time.Minute)
	w.run(20 * time.Minute)
	after := loop()
	if len(after.Runs) != 1 || !reflect.DeepEqual(after.Runs[0].Seconds, []int64{1200, 1800, 600}) || len(after.Ratios["a"]) != 3 {
		t.Fatalf("after the restart: runs %+v ratios %v; want j3's 600 s added to what was there", after.Runs, after.Ratios)
	}
}
