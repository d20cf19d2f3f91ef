package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"pgregory.net/rapid"
)

// repeatJob is a one-GPU job submitted at t0+at that runs for d.
func repeatJob(id string, at, d time.Duration) *core.Job {
	return &core.Job{ID: id, Team: "t", Tier: core.TierRegular, Submit: t0.Add(at), EstDuration: d,
		Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}}
}

func repeatWorkload(jobs ...*core.Job) *Workload {
	w := &Workload{Actual: map[string]time.Duration{}, Skipped: map[string]int{"cpu-only job (no GPUs)": 2}}
	for _, j := range jobs {
		w.Jobs = append(w.Jobs, j)
		w.Actual[j.ID] = j.EstDuration + time.Minute // the truth differs from the estimate
	}
	return w
}

func TestRepeat(t *testing.T) {
	due := repeatJob("c", 3*time.Hour, time.Hour)
	due.Deadline = t0.Add(6 * time.Hour)
	w := repeatWorkload(repeatJob("a", 0, 2*time.Hour), repeatJob("b", time.Hour, 30*time.Minute), due)
	got, err := Repeat(w, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Span 3 h, mean gap 1.5 h: copies 4.5 h apart.
	period := 4*time.Hour + 30*time.Minute
	if len(got.Jobs) != 9 || len(got.Actual) != 9 {
		t.Fatalf("%d jobs, %d durations; want 9 of each", len(got.Jobs), len(got.Actual))
	}
	for k := 0; k < 3; k++ {
		for i, orig := range w.Jobs {
			j := got.Jobs[k*3+i]
			wantID := orig.ID
			if k > 0 {
				wantID = orig.ID + ".r" + string(rune('1'+k))
			}
			shift := time.Duration(k) * period
			if j.ID != wantID || !j.Submit.Equal(orig.Submit.Add(shift)) || j.EstDuration != orig.EstDuration || got.Actual[j.ID] != w.Actual[orig.ID] {
				t.Errorf("copy %d of %s: %s at %s for %s (actual %s); want %s at %s for %s (actual %s)", k, orig.ID, j.ID, j.Submit, j.EstDuration, got.Actual[j.ID],
					wantID, orig.Submit.Add(shift), orig.EstDuration, w.Actual[orig.ID])
			}
			if orig.Deadline.IsZero() != j.Deadline.IsZero() || !orig.Deadline.IsZero() && !j.Deadline.Equal(orig.Deadline.Add(shift)) {
				t.Errorf("copy %d of %s: deadline %s; want the original's %s moved by %s", k, orig.ID, j.Deadline, orig.Deadline, shift)
			}
		}
	}
	if got.Skipped["cpu-only job (no GPUs)"] != 6 {
		t.Errorf("skipped %v; want each copy's 2", got.Skipped)
	}
	// The original is untouched.
	if len(w.Jobs) != 3 || w.Jobs[2].ID != "c" || !w.Jobs[2].Deadline.Equal(t0.Add(6*time.Hour)) || len(w.Actual) != 3 {
		t.Errorf("the original workload changed: %d jobs, last %+v", len(w.Jobs), *w.Jobs[2])
	}
	if same, err := Repeat(w, 1); err != nil || same != w {
		t.Errorf("Repeat(w, 1) = %p, %v; want w itself", same, err)
	}
	if _, err := Repeat(w, 0); err == nil {
		t.Error("Repeat(w, 0): no error")
	}
}

func TestRepeatAllAtOnce(t *testing.T) {
	// No span to go by: the copies follow one another by the longest run.
	w := repeatWorkload(repeatJob("a", 0, 2*time.Hour), repeatJob("b", 0, 5*time.Hour))
	got, err := Repeat(w, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(5*time.Hour + time.Minute); !got.Jobs[2].Submit.Equal(want) || !got.Jobs[3].Submit.Equal(want) {
		t.Errorf("second copy at %s and %s; want both at %s", got.Jobs[2].Submit, got.Jobs[3].Submit, want)
	}
}

func TestRepeatNameClash(t *testing.T) {
	w := repeatWorkload(repeatJob("a", 0, time.Hour), repeatJob("a.r2", time.Hour, time.Hour))
	if _, err := Repeat(w, 2); err == nil || !strings.Contains(err.Error(), "a.r2") {
		t.Errorf("Repeat over a trace holding a.r2: %v; want an error naming it", err)
	}
}

// TestRepeatReplays: the copies are work like any other — every job of
// both copies finishes, the price bound (a sum over jobs) doubles, and the
// bill of two copies exceeds one copy's.
func TestRepeatReplays(t *testing.T) {
	w := burstyWorkload(3)
	w2, err := Repeat(w, 2)
	if err != nil {
		t.Fatal(err)
	}
	one, err := PriceBound(w, testOffers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	two, err := PriceBound(w2, testOffers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := two - 2*one; d < -core.Micros(len(w.Jobs)) || d > core.Micros(len(w.Jobs)) {
		t.Errorf("price bound of two copies %s, of one %s: want twice, to the rounding", two, one)
	}
	p, _ := policy.Preset("gpufleet")
	r1, err := Run(context.Background(), testConfig(w), p)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Run(context.Background(), testConfig(w2), p)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Unfinished != 0 || r2.Jobs != 2*r1.Jobs {
		t.Errorf("two copies: %d jobs, %d unfinished; one copy: %d jobs", r2.Jobs, r2.Unfinished, r1.Jobs)
	}
	if r2.Cost <= r1.Cost {
		t.Errorf("two copies cost %s, one %s", r2.Cost, r1.Cost)
	}
}

// TestPropertyRepeat: on generated workloads, each copy is the original
// moved by one shift (deadlines too), the shifts grow by one period, each
// copy arrives after the one before has, names never clash, and the price
// bound — a sum over jobs — is n times the original's.
func TestPropertyRepeat(t *testing.T) {
	offers := testOffers()
	rapid.Check(t, func(t *rapid.T) {
		w := genWorkload(t)
		n := rapid.IntRange(1, 4).Draw(t, "n")
		got, err := Repeat(w, n)
		if err != nil {
			t.Fatal(err)
		}
		m := len(w.Jobs)
		if len(got.Jobs) != n*m || len(got.Actual) != n*m {
			t.Fatalf("%d jobs, %d durations from %d × %d", len(got.Jobs), len(got.Actual), n, m)
		}
		var prevShift time.Duration
		var prevLast time.Time
		for k := 0; k < n; k++ {
			shift := got.Jobs[k*m].Submit.Sub(w.Jobs[0].Submit)
			first, last := got.Jobs[k*m].Submit, got.Jobs[k*m].Submit
			for i, orig := range w.Jobs {
				c := got.Jobs[k*m+i]
				if !c.Submit.Equal(orig.Submit.Add(shift)) || !orig.Deadline.IsZero() && !c.Deadline.Equal(orig.Deadline.Add(shift)) ||
					orig.Deadline.IsZero() != c.Deadline.IsZero() || got.Actual[c.ID] != w.Actual[orig.ID] || c.EstDuration != orig.EstDuration {
					t.Fatalf("copy %d of %s: %+v; want the original moved by %s", k, orig.ID, *c, shift)
				}
				if c.Submit.Before(first) {
					first = c.Submit
				}
				if c.Submit.After(last) {
					last = c.Submit
				}
			}
			if k > 0 {
				if k > 1 && shift-prevShift != got.Jobs[m].Submit.Sub(w.Jobs[0].Submit) {
					t.Fatalf("copy %d moved by %s after %s: not one period more", k, shift, prevShift)
				}
				if shift <= prevShift || first.Before(prevLast) {
					t.Fatalf("copy %d (from %s, moved %s) starts before copy %d ends arriving (%s)", k, first, shift, k-1, prevLast)
				}
			}
			prevShift, prevLast = shift, last
		}
		one, err := PriceBound(w, offers, nil)
		if err != nil {
			t.Fatal(err)
		}
		all, err := PriceBound(got, offers, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := all - core.Micros(n)*one; d < -core.Micros(n*m) || d > core.Micros(n*m) {
			t.Fatalf("price bound of %d copies %s, of one %s", n, all, one)
		}
	})
}
