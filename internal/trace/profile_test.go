package trace

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zone names resolve without the host database

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// cmpProfile compares profiles with time zones by name.
var cmpProfile = cmp.Options{
	cmp.Comparer(func(a, b *time.Location) bool { return a.String() == b.String() }),
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) && a.Location().String() == b.Location().String() }),
}

func TestDefaultProfile(t *testing.T) {
	p := DefaultProfile()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"", "\n", "# nothing\n", "---\n", "~\n"} {
		got, err := ParseProfile("empty.yaml", []byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if diff := cmp.Diff(p, got, cmpProfile); diff != "" {
			t.Errorf("%q is not the defaults (-want +got):\n%s", in, diff)
		}
	}
	back, err := ParseProfile("describe.yaml", []byte(p.Describe()))
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Describe())
	}
	if diff := cmp.Diff(p, back, cmpProfile); diff != "" {
		t.Errorf("Describe round trip (-want +got):\n%s", diff)
	}
}

func TestLoadProfileExample(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatalf("no time zone database: %v", err)
	}
	got, err := LoadProfile(filepath.Join("testdata", "profile", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Profile{
		Name:        "helios-venus",
		Start:       time.Date(2024, 1, 1, 9, 0, 0, 0, shanghai),
		TimeZone:    "Asia/Shanghai",
		Location:    shanghai,
		DefaultTier: core.TierRegular,
		Rules: []TierRule{
			{Tier: core.TierCore, Teams: []string{"1", "3"}},
			{Tier: core.TierCore, MinGPUs: 16},
			{Tier: core.TierOffline, MaxGPUs: 2, MinDuration: 6 * 3600},
			{Tier: core.TierRegular, Users: []string{"ann"}, MaxDuration: 2 * 86400},
		},
		Tiers: map[core.Tier]TierPolicy{
			core.TierCore:    {},
			core.TierRegular: {InterruptiblePPM: 250_000, DeadlineSlackMilli: 1500},
			core.TierOffline: {InterruptiblePPM: 900_000, DeadlineSlackMilli: 3000, Deferrable: true},
		},
		CheckpointInterval:  3600,
		DefaultTeam:         "research",
		DefaultGPUModels:    []string{"A100", "H100"},
		DefaultGPUMemMiB:    40960,
		IgnoreTraceGPUModel: true,
		Seed:                42,
		Estimates:           Estimates{Mode: EstimatesExact},
	}
	if diff := cmp.Diff(want, got, cmpProfile); diff != "" {
		t.Errorf("profile (-want +got):\n%s", diff)
	}
	back, err := ParseProfile("describe.yaml", []byte(got.Describe()))
	if err != nil {
		t.Fatalf("%v\n%s", err, got.Describe())
	}
	if diff := cmp.Diff(got, back, cmpProfile); diff != "" {
		t.Errorf("Describe round trip (-want +got):\n%s", diff)
	}
	if d := got.Describe(); !strings.Contains(d, "start: 2024-01-01T09:00:00+08:00\n") || !strings.Contains(d, "interruptible: 25%\n") {
		t.Errorf("Describe:\n%s", d)
	}
}

func TestParseProfileValues(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want func(*Profile)
	}{
		{"percent with decimals", "tiers: {core: {interruptible: 12.5%}}", func(p *Profile) {
			p.Tiers[core.TierCore] = TierPolicy{InterruptiblePPM: 125_000}
		}},
		{"fraction", "tiers: {core: {interruptible: 0.000001}}", func(p *Profile) {
			p.Tiers[core.TierCore] = TierPolicy{InterruptiblePPM: 1}
		}},
		{"slack as a factor", "tiers: {core: {deadline_slack: 2x}}", func(p *Profile) {
			p.Tiers[core.TierCore] = TierPolicy{DeadlineSlackMilli: 2000}
		}},
		{"no checkpoints", "checkpoint_interval: 0", func(p *Profile) { p.CheckpointInterval = 0 }},
		{"seconds", "checkpoint_interval: 900", func(p *Profile) { p.CheckpointInterval = 900 }},
		{"no rules", "tier_rules: []\ndefault_tier: offline", func(p *Profile) { p.Rules, p.DefaultTier = nil, core.TierOffline }},
		{"one model", "default_gpu_model: H100", func(p *Profile) { p.DefaultGPUModels = []string{"H100"} }},
		{"fixed offset", "time_zone: UTC+8", func(p *Profile) {
			p.TimeZone, p.Location = "+08:00", time.FixedZone("+08:00", 8*3600)
		}},
		{"negative offset", "time_zone: \"-05:30\"", func(p *Profile) {
			p.TimeZone, p.Location = "-05:30", time.FixedZone("-05:30", -(5*3600+30*60))
		}},
		{"start with its own offset, read in the zone", "start: 2024-03-01T00:00:00Z\ntime_zone: +01:00", func(p *Profile) {
			p.TimeZone, p.Location = "+01:00", time.FixedZone("+01:00", 3600)
			p.Start = time.Date(2024, 3, 1, 1, 0, 0, 0, p.Location)
		}},
		{"start as a date in the zone, zone given after", "start: 2024-03-01\ntime_zone: +01:00", func(p *Profile) {
			p.TimeZone, p.Location = "+01:00", time.FixedZone("+01:00", 3600)
			p.Start = time.Date(2024, 3, 1, 0, 0, 0, 0, p.Location)
		}},
		{"a null value keeps the default", "default_team:\nseed: 7", func(p *Profile) { p.Seed = 7 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProfile("p.yaml", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultProfile()
			tt.want(want)
			if diff := cmp.Diff(want, got, cmpProfile); diff != "" {
				t.Errorf("profile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProfileErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown key", "name: x\ntier_rule: []\n", `p.yaml:2: unknown key "tier_rule": want one of name, start, time_zone`},
		{"duplicate key", "seed: 1\nseed: 2\n", `p.yaml:2: duplicate key "seed": want each key once (first at line 1)`},
		{"not a mapping", "- a\n- b\n", `p.yaml:1: got a list: want a mapping with keys name,`},
		{"bad tier", "default_tier: gold\n", `p.yaml:1: default_tier: invalid value "gold": want core, regular or offline`},
		{"rule without tier", "tier_rules:\n  - min_gpus: 8\n", `p.yaml:2: tier_rules[0].tier: missing: want core, regular or offline`},
		{"negative GPUs", "tier_rules:\n  - tier: core\n    min_gpus: -1\n", `p.yaml:3: tier_rules[0].min_gpus: invalid value "-1": want a whole number of GPUs 1..1024`},
		{"max below min", "tier_rules:\n  - tier: core\n    min_gpus: 8\n    max_gpus: 4\n", `p.yaml:4: tier_rules[0].max_gpus: invalid value "4": want >= min_gpus 8`},
		{"unknown rule key", "tier_rules:\n  - tier: core\n    gpus: 8\n", `p.yaml:3: tier_rules[0]: unknown key "gpus"`},
		{"rules not a list", "tier_rules:\n  tier: core\n", `p.yaml:2: tier_rules: got a mapping: want a list of rules`},
		{"bad duration", "tier_rules:\n  - tier: core\n    min_duration: soon\n", `p.yaml:3: tier_rules[0].min_duration: invalid value "soon": want a duration`},
		{"unknown tier policy", "tiers:\n  gold: {}\n", `p.yaml:2: tiers: unknown key "gold": want one of core, regular, offline`},
		{"share over 100%", "tiers:\n  core:\n    interruptible: 150%\n", `p.yaml:3: tiers.core.interruptible: invalid value "150%": want a share of the tier's jobs`},
		{"share too precise", "tiers:\n  core:\n    interruptible: 0.0000001\n", `p.yaml:3: tiers.core.interruptible: invalid value "0.0000001"`},
		{"slack below one", "tiers:\n  core:\n    deadline_slack: 0.5\n", `p.yaml:3: tiers.core.deadline_slack: invalid value "0.5": want 0 (no deadline) or a factor 1..1000`},
		{"bad boolean", "tiers:\n  core:\n    deferrable: sometimes\n", `p.yaml:3: tiers.core.deferrable: invalid value "sometimes": want true or false`},
		{"bad zone", "time_zone: Mars/Olympus\n", `p.yaml:1: time_zone: invalid value "Mars/Olympus": want a time zone`},
		{"local zone", "time_zone: Local\n", `p.yaml:1: time_zone: invalid value "Local"`},
		{"offset out of range", "time_zone: +15:00\n", `p.yaml:1: time_zone: invalid value "+15:00"`},
		{"bad start", "start: yesterday\n", `p.yaml:1: start: invalid value "yesterday": want an RFC 3339 time`},
		{"fractional start", "start: 2024-01-01T00:00:00.5Z\n", `p.yaml:1: start: invalid value "2024-01-01T00:00:00.5Z"`},
		{"list for a scalar", "seed: [1]\n", `p.yaml:1: seed: got a list: want a whole number`},
		{"negative memory", "default_gpu_mem_mib: -1\n", `p.yaml:1: default_gpu_mem_mib: invalid value "-1"`},
		{"empty team", "default_team: \"\"\n", `p.yaml:1: default_team: invalid value "": want a non-empty team name`},
		{"alias", "name: &n x\ndefault_team: *n\n", `p.yaml:2: default_team: an alias "n": want the value written out`},
		{"two documents", "seed: 1\n---\nseed: 2\n", `p.yaml:2: a second YAML document: want one profile per file`},
		{"syntax", "seed: 1\n  name: [\n", `p.yaml:2: YAML syntax error`},
		{"tagged value", "seed: !!binary aGVsbG8=\n", `p.yaml:1: seed: a value tagged !!binary "aGVsbG8="`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProfile("p.yaml", []byte(tt.in))
			var pe *ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ProfileError", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n %s\nwant prefix\n %s", err, tt.want)
			}
		})
	}
}

func TestTierRules(t *testing.T) {
	p := DefaultProfile()
	p.Rules = []TierRule{
		{Tier: core.TierCore, Teams: []string{"vision"}},
		{Tier: core.TierOffline, Users: []string{"bob"}, MinGPUs: 2},
		{Tier: core.TierCore, MinGPUs: 8, MaxGPUs: 16},
		{Tier: core.TierOffline, MinDuration: 3600, MaxDuration: 7200},
	}
	tests := []struct {
		team, user string
		gpus       int
		dur        int64
		want       core.Tier
	}{
		{"vision", "bob", 64, 5000, core.TierCore}, // first match wins
		{"nlp", "bob", 2, 10, core.TierOffline},
		{"nlp", "bob", 1, 10, core.TierRegular},
		{"nlp", "ann", 8, 10, core.TierCore},
		{"nlp", "ann", 16, 10, core.TierCore},
		{"nlp", "ann", 17, 10, core.TierRegular},
		{"nlp", "ann", 1, 3600, core.TierOffline},
		{"nlp", "ann", 1, 7200, core.TierOffline},
		{"nlp", "ann", 1, 7201, core.TierRegular},
	}
	for _, tt := range tests {
		if got := p.TierOf(tt.team, tt.user, tt.gpus, tt.dur); got != tt.want {
			t.Errorf("TierOf(%s, %s, %d GPUs, %d s) = %s, want %s", tt.team, tt.user, tt.gpus, tt.dur, got, tt.want)
		}
	}
}

func TestWorkload(t *testing.T) {
	p := DefaultProfile()
	p.Location, p.TimeZone = time.FixedZone("+08:00", 8*3600), "+08:00"
	p.DefaultGPUModels = []string{"A100"}
	p.DefaultGPUMemMiB = 16384
	tr := Trace{Name: "t", Jobs: []Job{
		{ID: "big", Submit: 0, Duration: 600, GPUs: 8, GPUMilli: 1000, User: "u1", CPUMilli: 4000, MemMiB: 1024},
		{ID: "cpu", Submit: 1, Duration: 60, User: "u1"},
		{ID: "long", Submit: 10, Duration: 5 * 3600, GPUs: 1, GPUMilli: 500, Team: "nlp", User: "u2"},
		{ID: "said", Submit: 20, Duration: 100, GPUs: 2, GPUMilli: 1000, Tier: core.TierOffline, Interruptible: FlagFalse,
			Deadline: 1000, Models: []string{"T4"}, GPUMemMiB: 8192, Shards: 3},
	}}
	w, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, p.Location)
	at := func(s int64) time.Time { return start.Add(time.Duration(s) * time.Second) }
	want := Workload{
		Start: start,
		Jobs: []core.Job{
			{ID: "big", Team: "u1", User: "u1", Tier: core.TierCore, State: core.JobPending, Submit: at(0), EstDuration: 600 * time.Second,
				Request:            core.Request{GPUs: 8, MilliPerGPU: 1000, MemPerGPUMiB: 16384, Models: []string{"A100"}, CPUMilli: 4000, MemMiB: 1024},
				CheckpointInterval: 30 * time.Minute},
			{ID: "long", Team: "nlp", User: "u2", Tier: core.TierOffline, State: core.JobPending, Submit: at(10), EstDuration: 5 * time.Hour,
				Request:       core.Request{GPUs: 1, MilliPerGPU: 500, MemPerGPUMiB: 16384, Models: []string{"A100"}},
				Interruptible: true, Deferrable: true, Deadline: at(10 + 3*5*3600), CheckpointInterval: 30 * time.Minute},
			{ID: "said", Team: "default", Tier: core.TierOffline, State: core.JobPending, Submit: at(20), EstDuration: 100 * time.Second,
				Request: core.Request{GPUs: 2, MilliPerGPU: 1000, MemPerGPUMiB: 8192, Models: []string{"T4"}},
				Shards:  3, Deferrable: true, Deadline: at(1000), CheckpointInterval: 30 * time.Minute},
		},
		Skipped: []Skip{{ID: "cpu", Reason: "cpu-only job (no GPUs)"}},
		Actual:  []time.Duration{600 * time.Second, 5 * time.Hour, 100 * time.Second},
	}
	if diff := cmp.Diff(want, w, cmpProfile); diff != "" {
		t.Errorf("workload (-want +got):\n%s", diff)
	}

	// The trace's model constraint yields to the default when asked.
	p.IgnoreTraceGPUModel = true
	w, err = tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Jobs[2].Request.Models; !cmp.Equal(got, []string{"A100"}) {
		t.Errorf("models with ignore_trace_gpu_model: %v", got)
	}
}

func TestWorkloadStart(t *testing.T) {
	p := DefaultProfile()
	tr := Trace{Jobs: []Job{job("a", 60, 1)}}
	def := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := p.StartFor(&tr); !got.Equal(def) {
		t.Errorf("default start %v", got)
	}
	tr.Start = time.Date(2020, 7, 1, 8, 0, 0, 0, PAIZone)
	if got := p.StartFor(&tr); !got.Equal(tr.Start) || got.Location() != time.UTC {
		t.Errorf("trace's start %v", got)
	}
	p.Start = time.Date(2025, 5, 5, 5, 0, 0, 0, time.UTC)
	w, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Start.Equal(p.Start) || !w.Jobs[0].Submit.Equal(p.Start.Add(time.Minute)) {
		t.Errorf("profile's start: workload at %v, job at %v", w.Start, w.Jobs[0].Submit)
	}
}

// TestDeadlineSlackRoundsUp: a slack of 1.5 on 3 s is 4.5 s, so the
// deadline is 5 s after submission, never before the job could be done.
func TestDeadlineSlackRoundsUp(t *testing.T) {
	p := DefaultProfile()
	p.Rules = nil
	p.Tiers[core.TierRegular] = TierPolicy{DeadlineSlackMilli: 1500}
	tr := Trace{Jobs: []Job{job("a", 10, 3), job("b", 10, 0)}}
	w, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	start := p.StartFor(&tr)
	if got := w.Jobs[0].Deadline.Sub(start); got != 15*time.Second {
		t.Errorf("deadline at %v, want 15s", got)
	}
	if got := w.Jobs[1].Deadline.Sub(start); got != 10*time.Second {
		t.Errorf("zero-duration deadline at %v, want 10s", got)
	}
}

// TestPick: the interruptible share is deterministic per job id, near
// the asked share, independent of the rest of the trace, and changes
// with the seed.
func TestPick(t *testing.T) {
	p := DefaultProfile()
	n, picked := 100_000, 0
	for i := range n {
		if p.Pick(strconv.Itoa(i), 300_000) {
			picked++
		}
	}
	if picked < 29_000 || picked > 31_000 {
		t.Errorf("picked %d of %d at 30%%", picked, n)
	}
	if p.Pick("x", 0) || !p.Pick("x", PPM) {
		t.Error("0% picked or 100% did not")
	}
	q := DefaultProfile()
	q.Seed = 1
	same := 0
	for i := range 1000 {
		id := strconv.Itoa(i)
		first := p.Pick(id, PPM/2)
		if again := p.Pick(id, PPM/2); again != first {
			t.Fatalf("Pick(%q) changed from %v to %v between calls", id, first, again)
		}
		if first == q.Pick(id, PPM/2) {
			same++
		}
	}
	if same < 400 || same > 600 {
		t.Errorf("seed 0 and seed 1 agree on %d of 1000, want about half", same)
	}

	// A job's choice does not depend on which other jobs are there.
	tr := Trace{Jobs: []Job{job("a", 0, 1), job("b", 0, 1), job("c", 0, 1)}}
	p.Rules = nil
	full, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	tr.Jobs = tr.Jobs[1:]
	part, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	if full.Jobs[1].Interruptible != part.Jobs[0].Interruptible || full.Jobs[2].Interruptible != part.Jobs[1].Interruptible {
		t.Error("a job's interruptible flag changed with the rest of the trace")
	}
}

// genProfile draws a valid profile.
func genProfile(t *rapid.T) *Profile {
	p := DefaultProfile()
	name := rapid.StringMatching(`[ -~]{0,12}`)
	p.Name = name.Draw(t, "name")
	zones := []string{"UTC", "+08:00", "-05:30", "+00:45"}
	z := rapid.SampledFrom(zones).Draw(t, "zone")
	p.Location, p.TimeZone, _ = parseZone(z)
	if rapid.Bool().Draw(t, "start?") {
		p.Start = time.Unix(rapid.Int64Range(0, 4_000_000_000).Draw(t, "start"), 0).In(p.Location)
	}
	tiersGen := rapid.SampledFrom(tiers)
	p.DefaultTier = tiersGen.Draw(t, "default")
	p.Rules = nil
	for range rapid.IntRange(0, 4).Draw(t, "rules") {
		r := TierRule{Tier: tiersGen.Draw(t, "tier")}
		r.Teams = rapid.SliceOfN(rapid.StringMatching(`[a-z0-9][a-z0-9 "\\-]{0,5}[a-z0-9]`), 0, 3).Draw(t, "teams")
		r.Users = rapid.SliceOfN(rapid.StringMatching(`[a-z0-9]{1,5}`), 0, 2).Draw(t, "users")
		if len(r.Teams) == 0 {
			r.Teams = nil
		}
		if len(r.Users) == 0 {
			r.Users = nil
		}
		r.MinGPUs = rapid.IntRange(0, 64).Draw(t, "min gpus")
		if rapid.Bool().Draw(t, "max gpus?") {
			r.MaxGPUs = rapid.IntRange(max(1, r.MinGPUs), MaxGPUs).Draw(t, "max gpus")
		}
		r.MinDuration = rapid.Int64Range(0, 10*86400).Draw(t, "min dur")
		if rapid.Bool().Draw(t, "max dur?") {
			r.MaxDuration = rapid.Int64Range(max(1, r.MinDuration), MaxSeconds).Draw(t, "max dur")
		}
		p.Rules = append(p.Rules, r)
	}
	for _, tier := range tiers {
		pol := TierPolicy{
			InterruptiblePPM: rapid.Int64Range(0, PPM).Draw(t, "ppm"),
			Deferrable:       rapid.Bool().Draw(t, "deferrable"),
		}
		if rapid.Bool().Draw(t, "slack?") {
			pol.DeadlineSlackMilli = rapid.Int64Range(1000, MaxSlackMilli).Draw(t, "slack")
		}
		p.Tiers[tier] = pol
	}
	p.CheckpointInterval = rapid.Int64Range(0, MaxSeconds).Draw(t, "checkpoint")
	p.DefaultTeam = rapid.StringMatching(`[a-z][a-z0-9 ]{0,6}`).Draw(t, "team")
	p.DefaultGPUModels = rapid.SliceOfN(rapid.StringMatching(`[A-Z][A-Za-z0-9]{0,5}`), 0, 3).Draw(t, "models")
	if len(p.DefaultGPUModels) == 0 {
		p.DefaultGPUModels = nil
	}
	p.DefaultGPUMemMiB = rapid.Int64Range(0, MaxGPUMemMiB).Draw(t, "mem")
	p.IgnoreTraceGPUModel = rapid.Bool().Draw(t, "ignore")
	p.Seed = rapid.Uint64().Draw(t, "seed")
	p.Estimates = Estimates{Mode: rapid.SampledFrom([]string{EstimatesExact, EstimatesNone, EstimatesScaled}).Draw(t, "estimates"),
		MissingPPM: rapid.Int64Range(0, PPM).Draw(t, "missing")}
	if p.Estimates.Mode == EstimatesScaled {
		p.Estimates.FactorMilli = rapid.Int64Range(1, MaxFactorMilli).Draw(t, "factor")
		p.Estimates.NoiseMilli = rapid.Int64Range(0, MaxNoiseMilli).Draw(t, "noise")
	}
	return p
}

// TestDescribeRoundTrip: every valid profile is described as YAML that
// reads back to the same profile.
func TestDescribeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProfile(t)
		if err := p.Validate(); err != nil {
			t.Fatalf("generator made an invalid profile: %v", err)
		}
		d := p.Describe()
		back, err := ParseProfile("describe.yaml", []byte(d))
		if err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		if diff := cmp.Diff(p, back, cmpProfile); diff != "" {
			t.Fatalf("round trip (-described +read):\n%s\n%s", diff, d)
		}
	})
}

func FuzzParseProfile(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input it finds, slowly
	// on long ones (TestDescribeRoundTrip covers whole profiles).
	f.Add([]byte("tiers:\n  core:\n    interruptible: 0%\n    deadline_slack: 0\n    deferrable: false\ndefault_gpu_model: [] # any\nseed: 0\n"))
	f.Add([]byte("name: x\ntier_rules:\n  - tier: core\n    teams: [a, b]\n    min_gpus: 8\ntiers: {offline: {interruptible: 50%, deadline_slack: 2}}\n"))
	f.Add([]byte("start: 2024-01-01T09:00:00\ntime_zone: UTC+8\ncheckpoint_interval: 0\n"))
	f.Add([]byte("name: &n x\ndefault_team: *n\n"))
	f.Add([]byte("seed: 1\n---\nseed: 2\n"))
	f.Add([]byte("estimates: {mode: scaled, factor: 2.5, noise: 0.25, missing: 10%}\n"))
	f.Add([]byte("estimates: none\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := ParseProfile("fuzz.yaml", in)
		if err != nil {
			var pe *ProfileError
			if !errors.As(err, &pe) || pe.File != "fuzz.yaml" || !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %v (%T) is not a *ProfileError naming the file", err, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid profile: %v", err)
		}
		d := p.Describe()
		back, err := ParseProfile("describe.yaml", []byte(d))
		if err != nil {
			t.Fatalf("Describe does not read back: %v\n%s", err, d)
		}
		if diff := cmp.Diff(p, back, cmpProfile); diff != "" {
			t.Fatalf("Describe round trip (-parsed +described):\n%s\n%s", diff, d)
		}
	})
}

// TestWorkloadFarDeadline: the longest job at the largest slack gets a
// deadline past what a time.Duration can hold, exactly.
func TestWorkloadFarDeadline(t *testing.T) {
	p := DefaultProfile()
	p.Rules = nil
	p.Tiers[core.TierRegular] = TierPolicy{DeadlineSlackMilli: MaxSlackMilli}
	tr := Trace{Jobs: []Job{job("a", MaxSeconds, MaxSeconds)}}
	w, err := tr.Workload(p)
	if err != nil {
		t.Fatal(err)
	}
	start := p.StartFor(&tr)
	if got, want := w.Jobs[0].Deadline.Unix()-start.Unix(), MaxSeconds+MaxSeconds*1000; got != want {
		t.Errorf("deadline %d s after the start, want %d", got, want)
	}
	if !w.Jobs[0].Submit.Equal(start.Add(time.Duration(MaxSeconds) * time.Second)) {
		t.Errorf("submit %v", w.Jobs[0].Submit)
	}
}

// TestEstimates: the profile's estimates mode gives jobs their
// duration, none, or a scaled and noisy one, the same for a job however
// the rest of the trace looks and across runs, different across seeds;
// the actual durations are kept beside.
func TestEstimates(t *testing.T) {
	var jobs []Job
	for i := range 2000 {
		jobs = append(jobs, Job{ID: fmt.Sprintf("j%d", i), Submit: int64(i), Duration: 3600, GPUs: 1, GPUMilli: 1000})
	}
	tr := Trace{Name: "t", Jobs: jobs}
	load := func(yaml string) Workload {
		t.Helper()
		p, err := ParseProfile("p.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		w, err := tr.Workload(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range w.Jobs {
			if w.Actual[i] != time.Hour {
				t.Fatalf("%s: actual %s, want the trace's hour", yaml, w.Actual[i])
			}
		}
		return w
	}
	for _, j := range load("estimates: exact\n").Jobs {
		if j.EstDuration != time.Hour {
			t.Fatalf("exact: %s", j.EstDuration)
		}
	}
	for _, j := range load("estimates: none\n").Jobs {
		if j.EstDuration != 0 {
			t.Fatalf("none: %s", j.EstDuration)
		}
	}
	for _, j := range load("estimates: {mode: scaled, factor: 2}\n").Jobs {
		if j.EstDuration != 2*time.Hour {
			t.Fatalf("scaled 2 without noise: %s", j.EstDuration)
		}
	}
	noisy := "estimates:\n  mode: scaled\n  factor: 2\n  noise: 0.5\n  missing: 10%\n"
	w := load(noisy)
	missing, lo, hi := 0, 0, 0
	var sum time.Duration
	for _, j := range w.Jobs {
		switch d := j.EstDuration; {
		case d == 0:
			missing++
		case d < time.Hour || d > 3*time.Hour:
			t.Fatalf("factor 2 ± 50%%: %s", d)
		case d < 2*time.Hour:
			lo++
			sum += d
		default:
			hi++
			sum += d
		}
	}
	if missing < 150 || missing > 250 || lo < 800 || hi < 800 {
		t.Errorf("2000 jobs: %d without an estimate (want about 200), %d below 2h and %d above", missing, lo, hi)
	}
	if mean := sum / time.Duration(lo+hi); mean < 115*time.Minute || mean > 125*time.Minute {
		t.Errorf("mean estimate %s, want about 2h", mean)
	}
	again := load(noisy)
	other := load(noisy + "seed: 7\n")
	same := 0
	for i := range w.Jobs {
		if w.Jobs[i].EstDuration != again.Jobs[i].EstDuration {
			t.Fatal("the same profile estimated a job differently twice")
		}
		if w.Jobs[i].EstDuration == other.Jobs[i].EstDuration {
			same++
		}
	}
	if same > 400 {
		t.Errorf("seeds 0 and 7 agree on %d of 2000 estimates", same)
	}
	// A job's estimate does not depend on the other jobs.
	tr.Jobs = jobs[1000:]
	if part := load(noisy); part.Jobs[0].EstDuration != w.Jobs[1000].EstDuration {
		t.Error("a job's estimate changed with the rest of the trace")
	}
}

// TestEstimatesErrors: bad estimates name the field, the value and what
// is allowed.
func TestEstimatesErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"estimates: guess\n", `p.yaml:1: estimates.mode: invalid value "guess": want exact, none or scaled`},
		{"estimates: {mode: scaled, factor: 0}\n", `p.yaml:1: estimates.factor: invalid value "0": want a factor 0.001..1000 of the duration`},
		{"estimates: {mode: scaled, factor: 2, noise: 1}\n", `p.yaml:1: estimates.noise: invalid value "1": want a spread 0..0.999 around the factor`},
		{"estimates: {mode: exact, factor: 2}\n", `p.yaml:1: estimates.mode: invalid value "exact": want scaled when a factor or noise is set`},
		{"estimates: {missing: 120%}\n", `p.yaml:1: estimates.missing: invalid value "120%": want a share of the jobs`},
		{"estimates: {mode: none, spread: 2}\n", `p.yaml:1: estimates: unknown key "spread": want one of mode, factor, noise, missing`},
	} {
		_, err := ParseProfile("p.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}
