package engine

import (
	"math"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// historyStep is one Step and Apply at now, as the loop and the
// simulator make them.
func historyStep(st *State, now time.Time, cfg Config) Decisions {
	d := Step(st, now, cfg)
	Apply(st, d)
	return d
}

func teamJob(id, team string, gpus int, est time.Duration, submit time.Time) *Unit {
	j := &core.Job{ID: id, Team: team, Tier: core.TierRegular, Submit: submit, EstDuration: est,
		Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU}}
	return &Unit{Unit: sched.Unit{Job: j}, State: core.JobPending, Since: submit}
}

// A team's running work accrues history (milli-GPU-seconds per GPU
// class) at every Apply, and the history halves over one half-life with
// nothing running.
func TestHistoryAccruesAndDecays(t *testing.T) {
	st := readyFleet(1) // one 8-GPU A100 machine
	cfg := Config{NoAcquire: true, NoRelease: true}
	hl := cfg.Sched.FairShareHalfLife()
	now := t0.Add(time.Hour)
	u := teamJob("train", "a", 2, time.Hour, now)
	st.Units = append(st.Units, u)
	if d := historyStep(st, now, cfg); len(d.Place) != 1 || d.HalfLife != hl {
		t.Fatalf("placed %d units under half-life %s, want 1 under %s", len(d.Place), d.HalfLife, hl)
	}
	if !st.HistoryAt.Equal(now) || len(st.History) != 0 {
		t.Fatalf("after the first Apply: history %v at %s, want none at %s", st.History, st.HistoryAt, now)
	}

	// Half an hour of 2 GPUs: 2,000 milli × 1,800 s.
	now = now.Add(30 * time.Minute)
	historyStep(st, now, cfg)
	if got, want := st.History["a"]["A100"], int64(2000*1800); got != want || !st.HistoryAt.Equal(now) {
		t.Fatalf("after 30 min of 2 GPUs: %d milli-GPU-s at %s, want %d at %s", got, st.HistoryAt, want, now)
	}

	// It ends at the hour, just before the step (as the simulator
	// finishes units): its last half hour counts.
	now = now.Add(30 * time.Minute)
	FinishUnit(st, u, now)
	historyStep(st, now, cfg)
	got := st.History["a"]["A100"]
	exact := 2000*1800*math.Exp2(-float64(30*time.Minute)/float64(hl)) + 2000*1800
	if math.Abs(float64(got)-exact) > exact*0.001 {
		t.Fatalf("after an hour of 2 GPUs: %d milli-GPU-s, want about %.0f", got, exact)
	}

	// Nothing runs for a half-life: the history halves, exactly.
	now = now.Add(hl)
	historyStep(st, now, cfg)
	if half := st.History["a"]["A100"]; half != got/2 {
		t.Fatalf("one half-life later: %d, want half of %d", half, got)
	}

	// The decay over a span does not depend on how it is cut into steps
	// (only the rounding down of each grid step's value does).
	one, many := st.History["a"]["A100"], st.History["a"]["A100"]
	{
		s := &State{History: map[string]sched.Usage{"a": {"A100": one}}, HistoryAt: now}
		recordHistory(s, now.Add(hl/3), hl)
		one = s.History["a"]["A100"]
		s = &State{History: map[string]sched.Usage{"a": {"A100": many}}, HistoryAt: now}
		for at := now; at.Before(now.Add(hl / 3)); {
			at = at.Add(min(7*time.Minute+13*time.Second, now.Add(hl/3).Sub(at)))
			recordHistory(s, at, hl)
		}
		many = s.History["a"]["A100"]
	}
	if d := one - many; d < 0 || d > decaySteps/3 {
		t.Errorf("a third of a half-life in one step: %d; in 7-minute steps: %d (want the same but for rounding)", one, many)
	}

	// Old use is forgotten: the team's entry goes once it decays to zero.
	historyStep(st, now.Add(70*hl), cfg)
	if len(st.History) != 0 {
		t.Errorf("70 half-lives later: history %v, want none", st.History)
	}
}

// With two teams of equal weight queueing at once for one machine, the
// team that used more of the fleet lately waits: without the history the
// other team (first by name) would have had the machine.
func TestHistoryOrdersTeams(t *testing.T) {
	st := readyFleet(1)
	st.Teams = []core.Team{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}}
	cfg := Config{NoAcquire: true, NoRelease: true}
	now := t0.Add(time.Hour)
	old := teamJob("a-old", "a", 8, 2*time.Hour, now)
	st.Units = append(st.Units, old)
	historyStep(st, now, cfg)
	now = now.Add(2 * time.Hour)
	FinishUnit(st, old, now)
	historyStep(st, now, cfg)
	if got, want := st.History["a"]["A100"], int64(8000*7200); got != want {
		t.Fatalf("team a's history after 2 h of 8 GPUs: %d, want %d", got, want)
	}

	now = now.Add(time.Minute)
	st.Units = append(st.Units, teamJob("a-new", "a", 8, time.Hour, now), teamJob("b-new", "b", 8, time.Hour, now))
	d := Step(st, now, cfg)
	if len(d.Place) != 1 || d.Place[0].Unit != "b-new" {
		t.Fatalf("placed %v, want b-new alone (team a used the machine for the last 2 h)", d.Place)
	}
	history := st.History
	st.History = nil
	if d := Step(st, now, cfg); len(d.Place) != 1 || d.Place[0].Unit != "a-new" {
		t.Fatalf("without history: placed %v, want a-new (equal shares, first by name)", d.Place)
	}
	st.History = history
	Apply(st, d)
	if u := st.unit("b-new"); u.State != core.JobRunning {
		t.Errorf("b-new %s after Apply, want running", u.State)
	}
}

// The decay factors are 2^(-2^b/decaySteps) in Q62.
func TestDecayFactors(t *testing.T) {
	for b, f := range decayFactor {
		want := math.Exp2(-math.Exp2(float64(b-decayBits))) * (1 << 62)
		if math.Abs(float64(f)-want) > want*1e-14 {
			t.Errorf("decayFactor[%d] = %d, want about %.0f", b, f, want)
		}
	}
	// The grid: one half-life is decaySteps points wherever it starts,
	// also before the epoch.
	for _, at := range []time.Time{t0, t0.Add(123456789), time.Date(1960, 1, 1, 0, 0, 0, 7, time.UTC)} {
		for _, hl := range []time.Duration{time.Second, 24 * time.Hour, 7*24*time.Hour + 1} {
			if k := decayGrid(at.Add(hl), hl) - decayGrid(at, hl); k != decaySteps {
				t.Errorf("a half-life of %s from %s crosses %d grid points, want %d", hl, at, k, decaySteps)
			}
		}
	}
}
