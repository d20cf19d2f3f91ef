package plan

import (
	"strings"
	"testing"
	"time"
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
