package server

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestHistorySurvivesRestart: the fair-share history the engine records
// at every tick is saved with the loop state, and a new loop on the same
// store carries on from it (neither restarted from zero nor counted
// again) and goes on scheduling.
func TestHistorySurvivesRestart(t *testing.T) {
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
	w.run(40 * time.Minute)
	if s := w.job("j1").State; s != core.JobSucceeded {
		t.Fatalf("j1 %s after 40 min, want succeeded", s)
	}
	before := loop()
	used := before.History["a"]["A100"]
	// 30 minutes of one GPU is 1,800,000 milli-GPU-seconds, less a few
	// minutes' decay at a 24 h half-life and the last tick's seconds.
	if used < 1_750_000 || used > 1_800_000 {
		t.Fatalf("team a's stored history after 30 min of one A100: %d milli-GPU-s (%v), want about 1,800,000", used, before.History)
	}
	if last := w.clk.Now().Add(-DefaultTick); !before.HistoryAt.Equal(last) {
		t.Errorf("history counted up to %s, want the last tick's %s", before.HistoryAt, last)
	}

	w.restart()
	offers := hourly()
	st, _, err := loadEngineState(context.Background(), w.st, func(id string) (*core.Offer, bool) { return &offers[0], id == offers[0].ID })
	if err != nil {
		t.Fatal(err)
	}
	if !st.HistoryAt.Equal(before.HistoryAt) || st.History["a"]["A100"] != used {
		t.Errorf("a restart reads history %v at %s, want %v at %s", st.History, st.HistoryAt, before.History, before.HistoryAt)
	}
	w.submit("j2", core.TierCore, time.Hour)
	w.run(5 * time.Minute)
	if s := w.job("j2").State; s != core.JobRunning {
		t.Fatalf("j2 %s 5 min after a restart, want running", s)
	}
	after := loop()
	if !after.HistoryAt.After(before.HistoryAt) {
		t.Errorf("history counted up to %s after the restart, want after %s", after.HistoryAt, before.HistoryAt)
	}
	// What was there decays a little (minutes of a 24 h half-life) and
	// j2's minutes add to it: nothing lost, nothing counted twice.
	got := after.History["a"]["A100"]
	if got < used*99/100 || got > used+5*60*1000 {
		t.Errorf("team a's history after the restart: %d milli-GPU-s, want about %d decayed a little plus j2's few minutes", got, used)
	}
}
