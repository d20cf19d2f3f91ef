package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// DurationModel learns how long jobs run from the ones that finished:
// per team and command the run times, and per team the ratio of the
// actual run time to the user's own estimate ("feedback"). Predict gives
// a duration for a job without an estimate (the median run of its team
// and command) and corrects an estimate by the team's median ratio. It
// is plain data, meant to be kept with the loop's state as the demand
// history is, so that a server and a replay predict alike: engine.State
// keeps one (State.Durations), taught by every unit that succeeds.
type DurationModel struct {
	// Runs are the last DurationKeep run times per team and command
	// (DurationKey), in seconds, oldest first.
	Runs map[string][]int64
	// Ratios are the last DurationKeep ratios per team of a run's time to
	// its user's estimate, in basis points, oldest first.
	Ratios map[string][]int64
}

// DurationKeep is how many runs and ratios a DurationModel keeps per key.
const DurationKeep = 32

// minRatios is how many ratios a team needs before its estimates are
// corrected.
const minRatios = 3

// DurationKey is the key of a team's command in DurationModel.Runs.
func DurationKey(team, command string) string { return team + "\x00" + command }

// SplitDurationKey is the team and command of a DurationKey.
func SplitDurationKey(k string) (team, command string) {
	team, command, _ = strings.Cut(k, "\x00")
	return team, command
}

// Observe records a finished run: its time, and, when the user gave an
// estimate, the ratio of the two. Runs that did not run (actual <= 0) are
// not recorded.
func (m *DurationModel) Observe(team, command string, estimate, actual time.Duration) {
	if actual <= 0 {
		return
	}
	if m.Runs == nil {
		m.Runs = map[string][]int64{}
	}
	k := DurationKey(team, command)
	if _, known := m.Runs[k]; !known && len(m.Runs) >= DurationCommands {
		m.forgetOne()
	}
	m.Runs[k] = keepLast(append(m.Runs[k], int64(actual/time.Second)))
	if estimate > 0 {
		if m.Ratios == nil {
			m.Ratios = map[string][]int64{}
		}
		m.Ratios[team] = keepLast(append(m.Ratios[team], core.MulDivHalfEven(int64(actual), 10000, int64(estimate))))
	}
}

// DurationCommands is how many team commands a DurationModel keeps runs
// of. The model is saved with the loop state at every tick, so it must
// not grow with every command line ever run: jobs whose command lines
// carry a run id never repeat, and their entries would pile up.
const DurationCommands = 4096

// forgetOne drops the entry with the fewest runs (the smallest key among
// those): a command seen once is the likeliest never to come back, and
// one that repeats keeps its history however many unique ones pass. The
// choice depends only on the model, so a server and a replay forget
// alike.
func (m *DurationModel) forgetOne() {
	var drop string
	least := -1
	for k, r := range m.Runs {
		if least < 0 || len(r) < least || len(r) == least && k < drop {
			drop, least = k, len(r)
		}
	}
	delete(m.Runs, drop)
}

func keepLast(xs []int64) []int64 {
	if len(xs) > DurationKeep {
		xs = slices.Clone(xs[len(xs)-DurationKeep:])
	}
	return xs
}

// Predict is the duration to plan a job of team and command on, and why:
// the user's estimate times the team's median ratio of actual to
// estimated time (once it has minRatios of them), else the estimate; with
// no estimate, the median run of the team's command, else fallback.
// PredictDuration is the same duration without the reason.
func (m *DurationModel) Predict(team, command string, estimate, fallback time.Duration) (time.Duration, string) {
	d := m.PredictDuration(team, command, estimate, fallback)
	if estimate > 0 {
		if bp, ok := m.Ratio(team); ok {
			return d, fmt.Sprintf("the estimate %s × %d.%02d%%, the median ratio of %s's last %d runs to their estimates", estimate, bp/100, bp%100, team, len(m.Ratios[team]))
		}
		return d, "the user's estimate"
	}
	if _, ok := m.Typical(team, command); ok {
		return d, fmt.Sprintf("the median of %s's last %d runs of this command", team, len(m.Runs[DurationKey(team, command)]))
	}
	return d, "no estimate and no history: the default"
}

// PredictDuration is Predict's duration: what an engine plans on, at no
// cost of words.
func (m *DurationModel) PredictDuration(team, command string, estimate, fallback time.Duration) time.Duration {
	if estimate > 0 {
		if bp, ok := m.Ratio(team); ok {
			return Corrected(estimate, bp)
		}
		return estimate
	}
	if d, ok := m.Typical(team, command); ok {
		return d
	}
	return fallback
}

// Corrected is estimate times a ratio in basis points, at least a second:
// an estimate corrected by a team's ratio. A ratio of 10000 (estimates
// right) gives the estimate itself.
func Corrected(estimate time.Duration, bp int64) time.Duration {
	if bp == 10000 {
		return estimate
	}
	return max(time.Duration(core.MulDivHalfEven(int64(estimate), bp, 10000)), time.Second)
}

// Ratio is the team's median ratio of actual to estimated run time, in
// basis points, once it has minRatios of them (ok false before).
func (m *DurationModel) Ratio(team string) (bp int64, ok bool) {
	if r := m.Ratios[team]; len(r) >= minRatios {
		return median(r), true
	}
	return 0, false
}

// Typical is the median run of the team's command (ok false with none).
func (m *DurationModel) Typical(team, command string) (time.Duration, bool) {
	if r := m.Runs[DurationKey(team, command)]; len(r) > 0 {
		return time.Duration(median(r)) * time.Second, true
	}
	return 0, false
}

// Empty reports whether the model has learned nothing.
func (m *DurationModel) Empty() bool { return len(m.Runs) == 0 && len(m.Ratios) == 0 }

// median is the lower median of xs (LowerQuantile(xs, 50)), sorted in a
// copy on the stack: it is asked at every prediction, and a model keeps
// at most DurationKeep values per key.
func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	var buf [DurationKeep]int64
	s := append(buf[:0], xs...)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
