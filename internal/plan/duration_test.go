package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestDurationModel(t *testing.T) {
	var m DurationModel
	h := time.Hour
	if d, why := m.Predict("ml", "train.py", 0, h); d != h || !strings.Contains(why, "default") {
		t.Errorf("empty model: %s (%s), want the default", d, why)
	}
	// Runs of one command: 2 h, 3 h, 10 h; the median is 3 h.
	for _, a := range []time.Duration{2 * h, 10 * h, 3 * h} {
		m.Observe("ml", "train.py", 0, a)
	}
	if d, _ := m.Predict("ml", "train.py", 0, h); d != 3*h {
		t.Errorf("no estimate: %s, want the median run, 3h", d)
	}
	if d, _ := m.Predict("ml", "eval.py", 0, h); d != h {
		t.Errorf("another command: %s, want the default", d)
	}
	// The team's estimates run long: actual twice, twice, three times.
	m.Observe("ml", "train.py", h, 2*h)
	if d, why := m.Predict("ml", "train.py", 4*h, h); d != 4*h || why != "the user's estimate" {
		t.Errorf("one ratio: %s (%s), want the estimate", d, why)
	}
	m.Observe("ml", "train.py", h, 3*h)
	m.Observe("ml", "x", 2*h, 4*h)
	if d, _ := m.Predict("ml", "anything", 4*h, h); d != 8*h {
		t.Errorf("three ratios (2, 3, 2): %s, want 4h × 2", d)
	}
	if d, _ := m.Predict("ops", "train.py", 4*h, h); d != 4*h {
		t.Errorf("another team's estimate corrected: %s", d)
	}
	for range 2 * DurationKeep {
		m.Observe("ml", "train.py", h, h)
	}
	if n := len(m.Runs[DurationKey("ml", "train.py")]); n != DurationKeep {
		t.Errorf("kept %d runs, want %d", n, DurationKeep)
	}
	if d, _ := m.Predict("ml", "train.py", 4*h, h); d != 4*h {
		t.Errorf("estimates now right: %s, want 4h", d)
	}
	m.Observe("ml", "train.py", h, 0)
	if n := len(m.Ratios["ml"]); n != DurationKeep {
		t.Errorf("a run that did not run was recorded (%d ratios)", n)
	}
}

// The model keeps at most DurationCommands commands; a flood of command
// lines that never repeat does not push out one that does.
func TestDurationModelBounded(t *testing.T) {
	var m DurationModel
	for range 3 {
		m.Observe("ml", "train.py", 0, time.Hour)
	}
	for i := range 3 * DurationCommands {
		m.Observe("ml", fmt.Sprintf("train.py --run-id %d", i), 0, time.Minute)
		if len(m.Runs) > DurationCommands {
			t.Fatalf("after %d unique commands the model keeps %d, want at most %d", i+1, len(m.Runs), DurationCommands)
		}
	}
	if d, ok := m.Typical("ml", "train.py"); !ok || d != time.Hour {
		t.Errorf("the repeated command's typical run %s (%v), want 1h", d, ok)
	}
	last := fmt.Sprintf("train.py --run-id %d", 3*DurationCommands-1)
	if _, ok := m.Typical("ml", last); !ok {
		t.Errorf("the newest command was forgotten at once")
	}
}

// median is LowerQuantile at 50, for as many values as a model keeps and
// more, and leaves its input as it was.
func TestPropertyMedian(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		xs := rapid.SliceOfN(rapid.Int64Range(-5, 5), 0, DurationKeep+8).Draw(t, "xs")
		before := slices.Clone(xs)
		if got, want := median(xs), LowerQuantile(xs, 50); got != want {
			t.Fatalf("median(%v) = %d, want %d", xs, got, want)
		}
		if !slices.Equal(xs, before) {
			t.Fatal("median changed its input")
		}
	})
}
