package fleet

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// pts builds a window of one point per minute from start, with the given
// utilizations.
func pts(start time.Time, pcts ...int) []core.UtilPoint {
	out := make([]core.UtilPoint, len(pcts))
	for i, p := range pcts {
		out[i] = core.UtilPoint{At: start.Add(time.Duration(i) * time.Minute), Pct: p}
	}
	return out
}

func repeat(n int, pct int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = pct
	}
	return out
}

func TestIdleLow(t *testing.T) {
	w := 10 * time.Minute
	at := now.Add(w) // the window is (now, now+10m]
	cat := func(parts ...[]int) []int {
		var out []int
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		window  []core.UtilPoint
		burstBP int
		want    bool
	}{
		{"empty", nil, 0, false},
		{"all zero", pts(now, repeat(10, 0)...), 0, true},
		{"not yet full", pts(now.Add(time.Minute), repeat(9, 0)...), 0, false},
		{"one old point holds", pts(now.Add(-time.Hour), 3), 0, true},
		{"busy", pts(now, repeat(10, 90)...), 1000, false},
		{"mean just under", pts(now, cat(repeat(9, 0), []int{199})...), 0, true},    // 19.9%
		{"mean at threshold", pts(now, cat(repeat(9, 0), []int{200})...), 0, false}, // 20%: not under
		{"burst of 3 min at 100, no tolerance", pts(now, cat(repeat(7, 0), repeat(3, 100))...), 0, false},
		{"burst of 3 min at 100, 30% tolerance", pts(now, cat(repeat(7, 0), repeat(3, 100))...), 3000, true},
		{"burst of 3 min at 100, 20% tolerance", pts(now, cat(repeat(7, 0), repeat(3, 100))...), 2000, true},  // 1 min left: 12.5%
		{"burst of 5 min at 100, 20% tolerance", pts(now, cat(repeat(5, 0), repeat(5, 100))...), 2000, false}, // 3 of 8 min: 37.5%
		{"tolerance never makes busy idle", pts(now, cat(repeat(4, 0), repeat(6, 100))...), 5000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IdleLow(tc.window, at, w, tc.burstBP, 20); got != tc.want {
				t.Errorf("IdleLow = %v, want %v", got, tc.want)
			}
		})
	}
}

// The case the old rule ("every reading under 20% for 30 minutes") never
// caught: a GPU at 0% with a 3-minute burst at 100% every 15 minutes. Its
// mean is 20%, its mean without the busiest 10% of the window 11%: the
// ladder alerts once the first 30-minute window is full. A GPU at work
// half the time is never alerted.
func TestLadderCatchesBurstyIdleGPU(t *testing.T) {
	run := func(busyEvery, busyFor int) []string {
		var state map[string]LadderState
		var got []string
		for m := 0; m <= 120; m++ {
			at := now.Add(time.Duration(m) * time.Minute)
			pct := 0
			if m%busyEvery < busyFor {
				pct = 100
			}
			var alerts []Alert
			state, alerts = Ladder(at, []GPUReading{{LeaseID: "L1", GPU: 0, Unit: "u", Team: "t", UtilPct: pct, At: at}}, state, Config{})
			for _, a := range alerts {
				got = append(got, fmt.Sprintf("%d:%s", m, a.Kind))
			}
		}
		return got
	}
	if got, want := fmt.Sprint(run(15, 3)), fmt.Sprint([]string{"30:idle-alert", "45:idle-notify", "75:idle-action"}); got != want {
		t.Errorf("bursty idle GPU: alerts %s, want %s", got, want)
	}
	if got := run(10, 5); len(got) != 0 {
		t.Errorf("GPU at work half the time: alerts %v, want none", got)
	}
}

// The window a GPU's state keeps never grows past what the rule needs:
// points before the window go, except the one whose value holds at its
// start, and equal neighbours are merged.
func TestLadderWindowStaysSmall(t *testing.T) {
	var state map[string]LadderState
	for m := 0; m <= 600; m++ {
		at := now.Add(time.Duration(m) * time.Minute)
		state, _ = Ladder(at, []GPUReading{{LeaseID: "L1", GPU: 0, Unit: "u", UtilPct: m % 3, At: at}}, state, Config{})
	}
	s := state[GPUKey("L1", 0, "u")]
	if n := len(s.Window); n < 30 || n > 32 {
		t.Errorf("window holds %d points after 10 hours of minute readings; want 31 (30 minutes and the one before)", n)
	}
	state = nil
	for m := 0; m <= 600; m++ {
		at := now.Add(time.Duration(m) * time.Minute)
		state, _ = Ladder(at, []GPUReading{{LeaseID: "L1", GPU: 0, Unit: "u", UtilPct: 0, At: at}}, state, Config{})
	}
	if n := len(state[GPUKey("L1", 0, "u")].Window); n != 1 {
		t.Errorf("a constant GPU keeps %d points, want 1", n)
	}
}

// Properties of the rule on any window: with no tolerance it is the
// time-weighted mean; more tolerance never turns a low window busy; and
// raising every reading never turns a busy window low.
func TestPropertyIdleLow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "n")
		w := make([]core.UtilPoint, n)
		at := now
		for i := range w {
			w[i] = core.UtilPoint{At: at, Pct: rapid.IntRange(0, 100).Draw(t, "pct")}
			at = at.Add(time.Duration(rapid.IntRange(1, 600).Draw(t, "gap")) * time.Second)
		}
		window := time.Duration(rapid.IntRange(1, 120).Draw(t, "window")) * time.Minute
		end := w[0].At.Add(window).Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, "after")) * time.Second)
		thr := rapid.IntRange(1, 100).Draw(t, "thr")
		b1 := rapid.IntRange(0, 5000).Draw(t, "b1")
		b2 := rapid.IntRange(b1, 5000).Draw(t, "b2")

		// The mean by brute force, second by second.
		from := end.Add(-window)
		var sum, secs int64
		for s := from.Add(time.Second); !s.After(end); s = s.Add(time.Second) {
			pct := -1
			for _, p := range w {
				if p.At.Before(s) {
					pct = p.Pct
				}
			}
			sum += int64(pct)
			secs++
		}
		if got, want := IdleLow(w, end, window, -1, thr), sum < int64(thr)*secs; got != want {
			t.Fatalf("no tolerance: IdleLow = %v, mean %d/%d vs %d%%: want %v", got, sum, secs, thr, want)
		}
		if IdleLow(w, end, window, b1, thr) && !IdleLow(w, end, window, b2, thr) {
			t.Fatalf("low with %d bp tolerance, busy with %d", b1, b2)
		}
		up := make([]core.UtilPoint, n)
		for i, p := range w {
			up[i] = core.UtilPoint{At: p.At, Pct: min(100, p.Pct+rapid.IntRange(0, 100).Draw(t, "up"))}
		}
		if IdleLow(up, end, window, b1, thr) && !IdleLow(w, end, window, b1, thr) {
			t.Fatalf("raising readings made a busy window low")
		}
	})
}

// An idle GPU's alerts clear when it works again (every rung it fired,
// once), a zombie's when its unit is gone, and a GPU whose lease ended
// clears what it had fired; a GPU that fired nothing clears nothing.
func TestLadderClearsEndedAlerts(t *testing.T) {
	var state map[string]LadderState
	var cleared []string
	step := func(m int, rs ...GPUReading) {
		at := now.Add(time.Duration(m) * time.Minute)
		for i := range rs {
			rs[i].At = at
		}
		next, _ := Ladder(at, rs, state, Config{})
		for _, c := range Cleared(state, next) {
			cleared = append(cleared, fmt.Sprintf("%d:%s/%d|%s:%s", m, c.LeaseID, c.GPU, c.Unit, c.Kind))
		}
		state = next
	}
	idle := GPUReading{LeaseID: "L1", GPU: 2, Unit: "job/0", UtilPct: 0}
	busy := GPUReading{LeaseID: "L2", GPU: 0, Unit: "b", UtilPct: 90}
	for m := 0; m <= 50; m++ { // idle-alert at 30, idle-notify at 45
		step(m, idle, busy)
	}
	working := idle
	working.UtilPct = 100
	for m := 51; m <= 60; m++ {
		step(m, working, busy)
	}
	// Busy from minute 51: at minute m the window holds m-51 busy
	// minutes, 3 of them tolerated as a burst, so its mean reaches 20% at
	// minute 60.
	if got, want := fmt.Sprint(cleared), "[60:L1/2|job/0:idle-alert 60:L1/2|job/0:idle-notify]"; got != want {
		t.Errorf("cleared after the GPU went back to work: %s, want %s", got, want)
	}
	cleared = nil
	zombie := GPUReading{LeaseID: "L3", GPU: 1, Unit: "z", UtilPct: 100, NoProcess: true}
	for m := 61; m <= 100; m++ {
		step(m, zombie, busy)
	}
	if len(cleared) != 0 {
		t.Fatalf("cleared while the zombie lasts: %v", cleared)
	}
	step(101, busy) // the zombie's unit was stopped: its GPU is no longer watched
	if got, want := fmt.Sprint(cleared), "[101:L3/1|z:zombie]"; got != want {
		t.Errorf("cleared after the zombie went: %s, want %s", got, want)
	}
}
