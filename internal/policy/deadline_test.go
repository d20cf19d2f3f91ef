package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The p99 wait targets and the deadline settings: what the presets hold,
// what a file changes, and what is refused, each error naming the field,
// the value and what is allowed.
func TestWaitP99AndDeadlines(t *testing.T) {
	g := Default()
	if g.WaitP99[core.TierCore] != Duration(15*time.Minute) || g.WaitP99[core.TierRegular] != Duration(time.Hour) || g.WaitP99[core.TierOffline] != Duration(4*time.Hour) ||
		!g.Deadlines.Aware || g.Deadlines.Margin != Duration(5*time.Minute) {
		t.Errorf("gpufleet preset: wait_p99 %v, deadlines %+v", g.WaitP99, g.Deadlines)
	}
	for _, n := range []string{"static-peak", "reactive", "autostop"} {
		p, _ := Preset(n)
		if p.Deadlines.Aware || p.WaitP99[core.TierCore] != 0 || p.WaitP99[core.TierRegular] != 0 || p.WaitP99[core.TierOffline] != 0 {
			t.Errorf("%s knows deadlines or wait targets: %v %+v", n, p.WaitP99, p.Deadlines)
		}
	}
	p, err := Parse("p.yaml", []byte("wait_p99:\n  regular: 10m\ndeadlines:\n  margin: 1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := p.Engine(nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if ec.Sched.WaitP99[core.TierRegular] != 10*time.Minute || ec.Sched.WaitP99[core.TierOffline] != 4*time.Hour || ec.Sched.RiskLead != 4*time.Minute || ec.Sched.NoDeadlines {
		t.Errorf("engine: wait p99 %v, lead %s, no deadlines %v; want regular 10m merged with the preset, lead 3m + 1m", ec.Sched.WaitP99, ec.Sched.RiskLead, ec.Sched.NoDeadlines)
	}
	// The lead is the slowest provisioning the policy expects.
	p, err = Parse("p.yaml", []byte("renting:\n  provisioning_delay:\n    idc/a100: 20m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ec, _ := p.Engine(nil, time.Time{}); ec.Sched.RiskLead != 25*time.Minute {
		t.Errorf("lead %s; want the 20m delay + 5m margin", ec.Sched.RiskLead)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"negative target", "wait_p99:\n  offline: -1h\n", `p.yaml:2: wait_p99.offline: invalid value "-1h0m0s": want a duration >= 0 (0s: no target; 15m, 12h)`},
		{"unknown tier", "wait_p99:\n  batch: 1h\n", `p.yaml:2: wait_p99.batch: invalid value "batch": want a tier: core, regular or offline`},
		{"not a duration", "wait_p99:\n  core: soon\n", `p.yaml:2: wait_p99.core: invalid value "soon": want a duration (0s, 30s, 5m, 1h30m)`},
		{"negative margin", "deadlines:\n  margin: -5m\n", `p.yaml:2: deadlines.margin: invalid value "-5m0s": want a duration >= 0 (0s, 5m)`},
		{"unknown deadlines key", "deadlines:\n  edf: true\n", `p.yaml:2: deadlines.edf: unknown key in deadlines "edf": want one of aware, margin`},
		{"aware not a bool", "deadlines:\n  aware: yes\n", `p.yaml:2: deadlines.aware: invalid value "yes": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.file))
			var pe *core.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v; want a *core.ParseError", err)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	// A hand-made policy must name every tier.
	p = Default()
	delete(p.WaitP99, core.TierCore)
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "wait_p99.core") {
		t.Errorf("Validate without wait_p99.core = %v", err)
	}
}
