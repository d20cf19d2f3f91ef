package trace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Deadlines are drawn from their own stream: the trace is the same with
// them but for the deadlines, each within its slack range plus the grace.
func TestGenerateDeadlines(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Jobs = 2000
	plain := Generate(cfg, 7)
	cfg.DeadlinePermille, cfg.DeadlineSlackMin, cfg.DeadlineSlackMax, cfg.DeadlineGrace = 300, 1200, 3000, 600
	dated := Generate(cfg, 7)
	n := 0
	for i := range dated.Jobs {
		j := dated.Jobs[i]
		if j.Deadline != 0 {
			n++
			lo, hi := j.Submit+(j.Duration*1200+999)/1000+600, j.Submit+(j.Duration*3000+999)/1000+600
			if j.Deadline < lo || j.Deadline > hi {
				t.Errorf("job %s: deadline %d outside %d..%d", j.ID, j.Deadline, lo, hi)
			}
		}
		j.Deadline = 0
		if diff := cmp.Diff(plain.Jobs[i], j); diff != "" {
			t.Fatalf("job %d differs beyond its deadline:\n%s", i, diff)
		}
	}
	if n < 520 || n > 680 {
		t.Errorf("%d of 2000 jobs have a deadline; want about 30%%", n)
	}
	if err := dated.Validate(); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		set  func(*GenConfig)
		want string
	}{
		{func(c *GenConfig) { c.DeadlinePermille = 1001 }, "deadline_permille"},
		{func(c *GenConfig) { c.DeadlineSlackMin = 900 }, "deadline_slack_min"},
		{func(c *GenConfig) { c.DeadlineSlackMax = 1000 }, "deadline_slack_max"},
		{func(c *GenConfig) { c.DeadlineGrace = -1 }, "deadline_grace"},
	} {
		c := cfg
		tc.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v; want an error naming %s", err, tc.want)
		}
	}
}
