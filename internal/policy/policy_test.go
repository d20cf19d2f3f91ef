package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// The default preset is the engine's defaults: converting it changes no
// decision (the engine's own TestDecisionHash and the simulator's golden
// tests run on the zero Config).
func TestDefaultIsEngineDefaults(t *testing.T) {
	got, err := Default().Engine(nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Config{}
	if diff := cmp.Diff(want.Fleet.Defaults(), got.Fleet.Defaults()); diff != "" {
		t.Errorf("fleet config (-engine defaults +preset):\n%s", diff)
	}
	documented := sched.Config{MinRuntime: 10 * time.Minute, HalfLife: 24 * time.Hour, DeferMinSavingBP: 500, DeferHorizon: 7 * 24 * time.Hour,
		WaitP99:  map[core.Tier]time.Duration{core.TierCore: 15 * time.Minute, core.TierRegular: time.Hour, core.TierOffline: 4 * time.Hour},
		RiskLead: 8 * time.Minute, DefaultDuration: time.Hour}
	if diff := cmp.Diff(documented, got.Sched); diff != "" {
		t.Errorf("sched config (-documented defaults +preset):\n%s", diff)
	}
	if diff := cmp.Diff(sched.Config{}.Defaults(), got.Sched.Defaults()); diff != "" {
		t.Errorf("sched config (-engine defaults +preset):\n%s", diff)
	}
	if got.NoAcquire || got.NoRelease {
		t.Errorf("NoAcquire, NoRelease = %v, %v; want false, false", got.NoAcquire, got.NoRelease)
	}
}

// Each baseline converts to the engine settings it always had.
func TestPresetsConvert(t *testing.T) {
	zero := map[core.Tier]time.Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}
	for _, tc := range []struct {
		name string
		want engine.Config
	}{
		{"gpufleet", engine.Config{LearnDurations: true}},
		{"static-peak", engine.Config{NoAcquire: true, NoRelease: true, Fleet: fleet.Config{NoConsolidation: true}}},
		{"reactive", engine.Config{Fleet: fleet.Config{WaitTarget: zero, IgnoreBoundary: true, MinIdle: 10 * time.Minute, NoConsolidation: true}}},
		{"autostop", engine.Config{Fleet: fleet.Config{WaitTarget: zero, IgnoreBoundary: true, MinIdle: 10 * time.Minute, NoPacking: true, NoConsolidation: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Engine(nil, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			got.Fleet, tc.want.Fleet = got.Fleet.Defaults(), tc.want.Fleet.Defaults()
			// The baselines know no deadline order and no p99 wait target.
			tc.want.Sched = tc.want.Sched.Defaults()
			if tc.name != "gpufleet" {
				tc.want.Sched.NoDeadlines, tc.want.Sched.WaitP99, tc.want.Sched.RiskLead = true, zero, 3*time.Minute
			}
			got.Sched = got.Sched.Defaults()
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b sched.Scorer) bool { return a == b })); diff != "" {
				t.Errorf("engine config (-baseline +preset):\n%s", diff)
			}
		})
	}
	if _, err := Preset("fastest"); err == nil || !strings.Contains(err.Error(), "gpufleet, static-peak, reactive, autostop") {
		t.Errorf("Preset(fastest) = %v; want an error listing the presets", err)
	}
}

const goodFile = `# a policy
name: night-shift
doc: defer more, keep a base
wait_targets:
  regular: 5m
billing_modes: [on-demand, spot, monthly]
time_of_use:
  min_saving_bp: 1000
reserved:
  mode: monthly
  gpus:
    V100: 4
idle:
  util_pct: 10
  action: stop
preemption:
  enabled: false
renting:
  outlook_horizon: 0s
  provisioning_delay:
    v100x4: 90s
`

func TestParse(t *testing.T) {
	p, err := Parse("night.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Name, want.Doc, want.Source = "night-shift", "defer more, keep a base", "night.yaml"
	want.WaitTargets[core.TierRegular] = Duration(5 * time.Minute)
	want.BillingModes = []core.BillingMode{core.OnDemand, core.Spot, core.Monthly}
	want.TimeOfUse.MinSavingBP = 1000
	want.Reserved.GPUs = map[string]int{"V100": 4}
	want.Idle.UtilPct, want.Idle.Action = 10, fleet.IdleStop
	want.Preemption.Enabled = false
	want.Renting.OutlookHorizon = 0
	want.Renting.ProvisioningDelay = map[string]Duration{"v100x4": Duration(90 * time.Second)}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	// Pre-scaling: off in the presets; a file's lead and quantile reach
	// the fleet's config.
	pre, err := Parse("pre.yaml", []byte("renting:\n  prescale:\n    lead: 30m\n    quantile: 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	ec, err := pre.Engine(nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if Default().Renting.Prescale != (Prescale{}) || ec.Fleet.PrescaleLead != 30*time.Minute || ec.Fleet.PrescaleQuantile != 50 || pre.Hash() == Default().Hash() {
		t.Errorf("prescale: preset %+v; file's fleet config lead %s quantile %d; hashes %s, %s", Default().Renting.Prescale, ec.Fleet.PrescaleLead, ec.Fleet.PrescaleQuantile, pre.Hash(), Default().Hash())
	}
	// Learning durations: on in gpufleet, off in the baselines, a key a
	// file may turn off (and the hash tells the two apart).
	off, err := Parse("off.yaml", []byte("durations:\n  learn: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !Default().Durations.Learn || off.Durations.Learn || off.Hash() == Default().Hash() {
		t.Errorf("durations.learn: preset %v, file %v (hashes %s, %s)", Default().Durations.Learn, off.Durations.Learn, Default().Hash(), off.Hash())
	}
	if c, err := off.Engine(nil, time.Time{}); err != nil || c.LearnDurations {
		t.Errorf("durations.learn false: engine LearnDurations %v, %v", c.LearnDurations, err)
	}
	for _, name := range PresetNames[1:] {
		if b, _ := Preset(name); b.Durations.Learn {
			t.Errorf("baseline %s learns durations", name)
		}
	}
	// A file with only a base is that preset, named after the file.
	p, err = Parse("dir/ca.yml", []byte("base: reactive\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := Preset("reactive")
	if p.Name != "ca" || p.Hash() != r.Hash() {
		t.Errorf("base: reactive gave %s %s; want ca %s", p.Name, p.Hash(), r.Hash())
	}
	if got := p.Label(); got != "ca (dir/ca.yml, "+r.Hash()+")" {
		t.Errorf("Label = %q", got)
	}
	if got := r.Label(); got != "reactive" {
		t.Errorf("preset Label = %q; want reactive", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       string // the error's text
	}{
		{"unknown top key", "name: x\nwait_target:\n  core: 1m\n", `p.yaml:2: wait_target: unknown key at the top level "wait_target": want one of name, doc, base, wait_targets`},
		{"unknown nested key", "idle:\n  util: 5\n", `p.yaml:2: idle.util: unknown key in idle "util": want one of util_pct, window, burst_tolerance_bp, for, notify_after, act_after, action, zombie_after, notify`},
		{"bad duration", "idle:\n  for: soon\n", `p.yaml:2: idle.for: invalid value "soon": want a duration (0s, 30s, 5m, 1h30m)`},
		{"negative wait", "wait_targets:\n  core: -1m\n", `p.yaml:2: wait_targets.core: invalid value "-1m0s": want a duration >= 0 (0s, 5m, 1h)`},
		{"unknown tier", "wait_targets:\n  urgent: 1m\n", `p.yaml:2: wait_targets.urgent: invalid value "urgent": want a tier: core, regular or offline`},
		{"bad mode", "billing_modes: [hourly-ish]\n", `p.yaml:1: billing_modes[0]: invalid value "hourly-ish": want one of on-demand, spot, daily, weekly, monthly`},
		{"mode twice", "billing_modes: [spot, spot]\n", `p.yaml:1: billing_modes[1]: invalid value "spot": want each mode once`},
		{"prescale lead negative", "renting:\n  prescale:\n    lead: -5m\n", `p.yaml:3: renting.prescale.lead: invalid value "-5m0s": want a duration from 0 (off) to 24h`},
		{"prescale quantile over 100", "renting:\n  prescale:\n    lead: 30m\n    quantile: 101\n", `p.yaml:4: renting.prescale.quantile: invalid value "101": want a percent from 0 (the least of the days) to 100`},
		{"prescale unknown key", "renting:\n  prescale:\n    ahead: 30m\n", `p.yaml:3: renting.prescale.ahead: unknown key in renting.prescale "ahead": want one of lead, quantile`},
		{"percent out of range", "idle:\n  util_pct: 101\n", `p.yaml:2: idle.util_pct: invalid value "101": want a percentage 1..100`},
		{"burst over half", "idle:\n  burst_tolerance_bp: 6000\n", `p.yaml:2: idle.burst_tolerance_bp: invalid value "6000": want basis points 0..5000 of idle.window (at most half the window left out as bursts)`},
		{"negative burst", "idle:\n  burst_tolerance_bp: -1\n", `p.yaml:2: idle.burst_tolerance_bp: invalid value "-1": want basis points 0..5000 of idle.window (at most half the window left out as bursts)`},
		{"zero window", "idle:\n  window: 0s\n", `p.yaml:2: idle.window: invalid value "0s": want a duration > 0 (30s, 5m, 1h)`},
		{"bad action", "idle:\n  action: email\n", `p.yaml:2: idle.action: invalid value "email": want one of share, downsize, stop, none`},
		{"not a number", "spot:\n  max_reclaims: three\n", `p.yaml:2: spot.max_reclaims: invalid value "three": want a whole number`},
		{"not a bool", "preemption:\n  enabled: yes\n", `p.yaml:2: preemption.enabled: invalid value "yes": want true or false`},
		{"durations not a bool", "durations:\n  learn: sometimes\n", `p.yaml:2: durations.learn: invalid value "sometimes": want true or false`},
		{"durations unknown key", "durations:\n  lern: true\n", `p.yaml:2: durations.lern: unknown key in durations "lern": want one of learn`},
		{"reserved on demand", "reserved:\n  mode: on-demand\n", `p.yaml:2: reserved.mode: invalid value "on-demand": want a committed mode: daily, weekly or monthly`},
		{"reserved outside modes", "billing_modes: [on-demand]\nreserved:\n  gpus:\n    V100: 2\n", `p.yaml:2: reserved.mode: invalid value "monthly": want one of billing_modes [on-demand]`},
		{"negative reserved", "reserved:\n  gpus:\n    V100: -2\n", `p.yaml:3: reserved.gpus.V100: invalid value "-2": want a GPU model and a count of GPUs 0..1000000`},
		{"unknown base", "base: fastest\n", `p.yaml:1: base: invalid value "fastest": want one of gpufleet, static-peak, reactive, autostop`},
		{"duplicate key", "name: a\nname: b\n", `p.yaml:2: name: duplicate key "name": want each key once`},
		{"alias", "idle: &x\n  util_pct: 5\nspot: *x\n", `p.yaml:1: idle: a YAML alias or anchor: want plain values`},
		{"list for mapping", "idle: [1]\n", `p.yaml:1: idle: invalid value "": want a mapping of util_pct, window, burst_tolerance_bp, for, notify_after, act_after, action, zombie_after, notify`},
		{"act before notify", "idle:\n  notify_after: 1h\n  act_after: 30m\n", `p.yaml:3: idle.act_after: invalid value "30m0s": want a duration >= idle.notify_after (1h0m0s)`},
		{"notify not a URL", "idle:\n  notify:\n    url: hooks.example.com\n    secret_env: HOOK\n", `p.yaml:3: idle.notify.url: invalid value "hooks.example.com": want an absolute http or https URL with a host and no user info`},
		{"notify with user", "idle:\n  notify:\n    url: https://u:p@hooks.example.com/x\n    secret_env: HOOK\n", `p.yaml:3: idle.notify.url: invalid value "https://u:p@hooks.example.com/x": want an absolute http or https URL with a host and no user info`},
		{"notify without secret", "idle:\n  notify:\n    url: https://hooks.example.com/x\n", `p.yaml:2: idle.notify.secret_env: invalid value "": want the name of the environment variable holding the signing secret ([A-Za-z_][A-Za-z0-9_]*)`},
		{"notify secret not a name", "idle:\n  notify:\n    url: https://hooks.example.com/x\n    secret_env: 9LIVES\n", `p.yaml:4: idle.notify.secret_env: invalid value "9LIVES": want the name of the environment variable holding the signing secret ([A-Za-z_][A-Za-z0-9_]*)`},
		{"zero half-life", "fair_share:\n  half_life: 0s\n", `p.yaml:2: fair_share.half_life: invalid value "0s": want a duration > 0 (30s, 5m, 1h)`},
		{"two documents", "name: a\n---\nname: b\n", `p.yaml:2: a second YAML document: want one policy per file`},
		{"empty", "", `p.yaml: empty file: want a policy (docs/policy.md)`},
		{"scalar", "gpufleet\n", `p.yaml:1: not a mapping: want a policy: keys such as name, base, wait_targets (docs/policy.md)`},
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
}

// Every preset, and a file, survive Marshal then Parse unchanged.
func TestMarshalRoundTrip(t *testing.T) {
	ps := []Policy{}
	for _, n := range PresetNames {
		p, _ := Preset(n)
		ps = append(ps, p)
	}
	f, err := Parse("night.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	ps = append(ps, f)
	for _, p := range ps {
		b, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse("out.yaml", b)
		if err != nil {
			t.Fatalf("%s: Parse(Marshal) = %v\n%s", p.Name, err, b)
		}
		p.Source, p.Base = "out.yaml", ""
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", p.Name, diff)
		}
	}
}

func TestEngineReserved(t *testing.T) {
	offers := []core.Offer{
		{ID: "v100x4", GPUModel: "V100", GPUs: 4, Plans: []core.PricePlan{{Mode: core.Monthly, Price: 2000 * core.MicrosPerUnit, Per: core.Month, Granularity: 1, Term: 30 * 24 * 3600}}},
		{ID: "a100x8", GPUModel: "A100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 20 * core.MicrosPerUnit, Per: core.Hour, Granularity: 1}}},
	}
	p := Default()
	p.Reserved.GPUs = map[string]int{"V100": 6}
	got, err := p.Engine(offers, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"V100": 2}, got.Fleet.Reserved); diff != "" {
		t.Errorf("6 V100 GPUs in machines of 4 (-want +got):\n%s", diff)
	}
	p.Reserved.GPUs = map[string]int{"A100": 8}
	_, err = p.Engine(offers, time.Time{})
	if want := `reserved.gpus.A100: invalid value "8": want a GPU model with a monthly plan in the catalog (V100)`; err == nil || err.Error() != want {
		t.Errorf("no committed A100 offer: %v; want %s", err, want)
	}
}

// Nil and empty lists and maps hash alike: they decide alike.
func TestHashNilEmpty(t *testing.T) {
	a, b := Default(), Default()
	b.BillingModes, b.Reserved.GPUs = nil, nil
	if a.Hash() != b.Hash() {
		t.Errorf("hash %s with empty billing_modes and reserved.gpus, %s with nil", a.Hash(), b.Hash())
	}
	b.Idle.UtilPct++
	if a.Hash() == b.Hash() {
		t.Error("a changed knob kept the hash")
	}
}

// TestParseNotify: the idle ladder's webhook is read from the file, kept
// by Marshal, and left out of Hash (it decides nothing).
func TestParseNotify(t *testing.T) {
	p, err := Parse("hook.yaml", []byte("idle:\n  notify:\n    url: https://hooks.example.com/gpufleet\n    secret_env: GPUFLEET_WEBHOOK_SECRET\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Notify{URL: "https://hooks.example.com/gpufleet", SecretEnv: "GPUFLEET_WEBHOOK_SECRET"}
	if diff := cmp.Diff(want, p.Idle.Notify); diff != "" {
		t.Errorf("Notify (-want +got):\n%s", diff)
	}
	if d := Default(); p.Hash() != d.Hash() {
		t.Errorf("Hash %s with a webhook, %s without: want equal", p.Hash(), d.Hash())
	}
	b, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse("hook.yaml", b)
	if err != nil || q.Idle.Notify != want {
		t.Errorf("round trip: %+v, %v", q.Idle.Notify, err)
	}
	if b, _ := Marshal(Default()); strings.Contains(string(b), "notify:\n") {
		t.Errorf("a policy without a webhook marshals a notify key:\n%s", b)
	}
}
