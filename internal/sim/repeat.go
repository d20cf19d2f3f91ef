package sim

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Repeat returns w replayed n times back to back, so that decisions whose
// worth shows only over a longer horizon than the trace — above all the
// committed terms a week or a month long — can be judged on it. Copy k
// (from 0) arrives k periods after the original, a period being the
// trace's span from first to last submission plus its mean gap between
// submissions (the longest run when all arrive at once), so that the
// copies follow on as the trace's own arrivals do. Copy k's jobs are the
// originals with ID "ID.rK+1" and their submissions and deadlines moved
// by k periods; durations and estimates are the same. w is not changed;
// n = 1 returns it as it is.
func Repeat(w *Workload, n int) (*Workload, error) {
	if n < 1 {
		return nil, fmt.Errorf("repeat %d: want at least 1", n)
	}
	if n == 1 || len(w.Jobs) == 0 {
		return w, nil
	}
	first, last := w.Jobs[0].Submit, w.Jobs[0].Submit
	var longest time.Duration
	for _, j := range w.Jobs {
		if j.Submit.Before(first) {
			first = j.Submit
		}
		if j.Submit.After(last) {
			last = j.Submit
		}
		longest = max(longest, w.Actual[j.ID])
	}
	span := last.Sub(first)
	period := span
	if len(w.Jobs) > 1 {
		period += span / time.Duration(len(w.Jobs)-1)
	}
	if period <= 0 {
		period = max(longest, time.Second)
	}
	out := &Workload{Jobs: make([]*core.Job, 0, n*len(w.Jobs)), Actual: make(map[string]time.Duration, n*len(w.Jobs)), Skipped: make(map[string]int, len(w.Skipped))}
	for reason, c := range w.Skipped {
		out.Skipped[reason] = n * c
	}
	out.Jobs = append(out.Jobs, w.Jobs...)
	for _, j := range w.Jobs {
		out.Actual[j.ID] = w.Actual[j.ID]
	}
	for k := 1; k < n; k++ {
		shift := time.Duration(k) * period
		for _, j := range w.Jobs {
			c := *j
			c.ID = fmt.Sprintf("%s.r%d", j.ID, k+1)
			if _, dup := out.Actual[c.ID]; dup {
				return nil, fmt.Errorf("repeat: copy %d of job %s would be named %s, which the trace already holds", k+1, j.ID, c.ID)
			}
			c.Submit = j.Submit.Add(shift)
			if !j.Deadline.IsZero() {
				c.Deadline = j.Deadline.Add(shift)
			}
			out.Jobs = append(out.Jobs, &c)
			out.Actual[c.ID] = w.Actual[j.ID]
		}
	}
	return out, nil
}
