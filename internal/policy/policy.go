package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// Policy is every knob of the fleet's policy. The zero value is not a
// policy: start from a preset (Preset, Default) or a file (Parse), which
// set every field; Validate says what a hand-made one gets wrong. Its
// JSON form (GET /api/v1/policy) and its YAML form (the policy file) have
// the same keys.
type Policy struct {
	// Name names the policy in reports; Doc says what it does.
	Name string `json:"name" yaml:"name"`
	Doc  string `json:"doc,omitempty" yaml:"doc"` // written even when empty: an empty doc in a file overrides the preset's
	// Base is the preset a file starts from: keys it leaves out keep the
	// preset's values (gpufleet when empty).
	Base string `json:"base,omitempty" yaml:"base,omitempty"`
	// WaitTargets is how long pending work of each tier may wait for the
	// current fleet before more is rented.
	WaitTargets map[core.Tier]Duration `json:"wait_targets" yaml:"wait_targets"`
	// WaitP99 is each tier's p99 wait target, from submission (or
	// requeue) to start; 0s or missing: none. Work whose wait comes
	// within deadlines.margin plus the provisioning delay of it goes
	// ahead of its tier and is rented for, and is never deferred past it.
	WaitP99 map[core.Tier]Duration `json:"wait_p99" yaml:"wait_p99"`
	// Deadlines is deadline-aware ordering and renting.
	Deadlines Deadlines `json:"deadlines" yaml:"deadlines"`
	// BillingModes limits the modes rented in; empty: every mode.
	BillingModes []core.BillingMode `json:"billing_modes" yaml:"billing_modes"`
	TimeOfUse    TimeOfUse          `json:"time_of_use" yaml:"time_of_use"`
	Reserved     Reserved           `json:"reserved" yaml:"reserved"`
	Renting      Renting            `json:"renting" yaml:"renting"`
	Release      Release            `json:"release" yaml:"release"`
	Idle         Idle               `json:"idle" yaml:"idle"`
	Spot         Spot               `json:"spot" yaml:"spot"`
	// Consolidation moves work off sparse machines so they can go.
	Consolidation Consolidation `json:"consolidation" yaml:"consolidation"`
	Preemption    Preemption    `json:"preemption" yaml:"preemption"`
	Backfill      Backfill      `json:"backfill" yaml:"backfill"`
	FairShare     FairShare     `json:"fair_share" yaml:"fair_share"`
	// Durations is whether work is planned on durations learned from
	// history rather than on its users' estimates as given.
	Durations Durations `json:"durations" yaml:"durations"`
	// Kubernetes is what serve --kubernetes reads besides the engine's
	// knobs (docs/kubernetes.md); empty elsewhere.
	Kubernetes Kubernetes `json:"kubernetes,omitzero" yaml:"kubernetes,omitempty"`
	// Source is where the policy came from: "preset NAME" or the file's
	// path. Not part of the file.
	Source string `json:"source" yaml:"-"`
}

// TimeOfUse is off-peak shifting: deferrable work waits for a cheaper
// window of the catalog's time-of-use tariff.
type TimeOfUse struct {
	Shift bool `json:"shift" yaml:"shift"`
	// MinSavingBP is the least saving worth waiting for, in basis points.
	MinSavingBP int64 `json:"min_saving_bp" yaml:"min_saving_bp"`
	// Horizon is how far ahead a cheaper window is looked for.
	Horizon Duration `json:"horizon" yaml:"horizon"`
}

// Deadlines orders each tier by urgency — work at risk of missing its
// deadline or wait target first, then the rest with a deadline, earliest
// first, then fair share — and rents for work at risk whatever the wait
// targets say (docs/scheduler.md). Work is at risk when its latest start
// (deadline less its remaining work; its p99 wait target) is within
// Margin plus the provisioning delay of now.
type Deadlines struct {
	Aware  bool     `json:"aware" yaml:"aware"`
	Margin Duration `json:"margin" yaml:"margin"`
}

// Reserved is the committed base: GPUs per GPU model kept on a committed
// term whatever the load, in whole machines of the cheapest offer per GPU
// on Mode (rounded up). "gpufleet plan portfolio --policy-out F" writes it.
type Reserved struct {
	Mode core.BillingMode `json:"mode" yaml:"mode"`
	GPUs map[string]int   `json:"gpus" yaml:"gpus"`
	// PeakSized sizes the base, before a simulated run, to the workload's
	// peak concurrent GPU demand (the static-peak baseline); the
	// simulator only, since a live server does not know its workload.
	PeakSized bool `json:"peak_sized" yaml:"peak_sized"`
}

// Renting is when and how machines are rented for waiting work.
type Renting struct {
	// Enabled false rents nothing for demand (the reserved base is still
	// kept): a static fleet.
	Enabled bool `json:"enabled" yaml:"enabled"`
	// Packing packs waiting units into machines being rented; false rents
	// one machine per waiting unit (the autostop baseline).
	Packing bool `json:"packing" yaml:"packing"`
	// ScaleOutBP: rent ahead of the wait targets when the allocated share
	// of paid GPUs is above this, in basis points.
	ScaleOutBP int64 `json:"scale_out_bp" yaml:"scale_out_bp"`
	// MaxPerStep caps the machines rented in one step.
	MaxPerStep int `json:"max_per_step" yaml:"max_per_step"`
	// OutlookHorizon is how much recent demand prices a committed term;
	// 0: terms are priced on the job they are rented for alone.
	OutlookHorizon Duration `json:"outlook_horizon" yaml:"outlook_horizon"`
	// ProvisioningDelay is the expected time from rent to ready per offer
	// ID; DefaultDelay for the rest.
	ProvisioningDelay map[string]Duration `json:"provisioning_delay,omitempty" yaml:"provisioning_delay"`
	DefaultDelay      Duration            `json:"default_delay" yaml:"default_delay"`
	// DefaultDuration is assumed for work without an estimate.
	DefaultDuration Duration `json:"default_duration" yaml:"default_duration"`
	// Prescale rents ahead of the daily peak (fleet.Prescale); off when
	// its lead is 0.
	Prescale Prescale `json:"prescale,omitzero" yaml:"prescale"`
}

// Prescale is renting ahead of the daily peak on the demand forecast:
// capacity for the demand the recent days reached within Lead of the time
// of day, on Quantile percent of them counted from the least (0: every
// day reached it; 50: the median day).
type Prescale struct {
	Lead     Duration `json:"lead" yaml:"lead"`
	Quantile int      `json:"quantile" yaml:"quantile"`
}

// Release is when idle machines go.
type Release struct {
	// Enabled false keeps every machine: a static fleet.
	Enabled bool `json:"enabled" yaml:"enabled"`
	// AtBoundary releases an idle machine just before its billing
	// boundary; false releases it after MinIdle whatever the boundary (the
	// cluster-autoscaler baseline).
	AtBoundary bool `json:"at_boundary" yaml:"at_boundary"`
	// Margin is how long before the boundary the machine is released.
	Margin Duration `json:"margin" yaml:"margin"`
	// MinIdle is the least idle time before a machine billed per second
	// or minute goes; MinHold the least time after renting.
	MinIdle Duration `json:"min_idle" yaml:"min_idle"`
	MinHold Duration `json:"min_hold" yaml:"min_hold"`
}

// Idle is the idle ladder: a GPU whose mean utilization over Window, its
// busiest BurstToleranceBP of the window's time left out, is under
// UtilPct (fleet.IdleLow) for For raises the alert; NotifyAfter and
// ActAfter later the next rungs, the last doing Action. A GPU whose unit
// shows no process for ZombieAfter is a zombie.
type Idle struct {
	UtilPct          int              `json:"util_pct" yaml:"util_pct"`
	Window           Duration         `json:"window" yaml:"window"`
	BurstToleranceBP int              `json:"burst_tolerance_bp" yaml:"burst_tolerance_bp"`
	For              Duration         `json:"for" yaml:"for"`
	NotifyAfter      Duration         `json:"notify_after" yaml:"notify_after"`
	ActAfter         Duration         `json:"act_after" yaml:"act_after"`
	Action           fleet.IdleAction `json:"action" yaml:"action"`
	ZombieAfter      Duration         `json:"zombie_after" yaml:"zombie_after"`
	// Notify is where serve sends the notify and action rungs and zombies
	// as signed webhooks; empty: nowhere (the events alone).
	Notify Notify `json:"notify,omitzero" yaml:"notify,omitempty"`
}

// Notify is the idle ladder's webhook: each notice is POSTed to URL as
// JSON, signed with the secret read from the environment variable
// SecretEnv (the file names the variable, never the secret). Where it is
// sent does not change what is decided, so Hash leaves it out.
type Notify struct {
	URL       string `json:"url,omitempty" yaml:"url,omitempty"`
	SecretEnv string `json:"secret_env,omitempty" yaml:"secret_env,omitempty"`
}

// Spot is the spot fallback: after MaxReclaims reclaims a unit runs on
// demand.
type Spot struct {
	MaxReclaims int `json:"max_reclaims" yaml:"max_reclaims"`
	// Rule is how deadline work leaves spot: SpotFallback (the fallback
	// above, and off spot when a reclaim leaves too little slack) or
	// SpotUniformProgress (Can't Be Late's Uniform Progress: on demand
	// while behind the uniform line, spot while ahead; a simulator
	// baseline, internal/sim/uniform.go, refused by serve).
	Rule string `json:"rule" yaml:"rule"`
}

// The spot rules.
const (
	SpotFallback        = "fallback"
	SpotUniformProgress = "uniform-progress"
)

// Consolidation moves units off machines allocated below ScaleInBP when
// the machine time saved is worth more than MoveOverhead of GPU time.
type Consolidation struct {
	Enabled      bool     `json:"enabled" yaml:"enabled"`
	ScaleInBP    int64    `json:"scale_in_bp" yaml:"scale_in_bp"`
	MoveOverhead Duration `json:"move_overhead" yaml:"move_overhead"`
}

// Preemption lets higher tiers take GPUs from lower ones, once a unit has
// run MinRuntime.
type Preemption struct {
	Enabled    bool     `json:"enabled" yaml:"enabled"`
	MinRuntime Duration `json:"min_runtime" yaml:"min_runtime"`
}

// Backfill runs smaller work ahead of a reservation when it ends in time.
type Backfill struct {
	Enabled bool `json:"enabled" yaml:"enabled"`
}

// Durations is learning how long work runs ("feedback"): with Learn, a
// job is planned on its user's estimate corrected by the ratio of actual
// to estimated run time its team's last jobs showed, and a job without
// an estimate on the median run of its team's command; without, on the
// estimate as given (none: renting.default_duration). The engine learns
// from every job that succeeds either way (engine.Config.LearnDurations).
type Durations struct {
	Learn bool `json:"learn" yaml:"learn"`
}

// FairShare is the fair-share history's half-life.
type FairShare struct {
	HalfLife Duration `json:"half_life" yaml:"half_life"`
}

// Kubernetes is the cluster side of the policy. Teams maps a namespace
// to the team its pods are (fair share, quotas, budgets); a namespace
// not named is its own team. serve's --kube-team flags override it key
// by key. Quotas caps what a team's pods hold at once: whole GPUs per
// GPU model (the node's nvidia.com/gpu.product); a team or a model not
// named is not capped. There is no borrowing between teams.
type Kubernetes struct {
	Teams  map[string]string         `json:"teams,omitempty" yaml:"teams,omitempty"`
	Quotas map[string]map[string]int `json:"quotas,omitempty" yaml:"quotas,omitempty"`
}

// QuotaTeams is the engine's teams for Quotas: each a team of its own cohort,
// guaranteed its GPUs of each model and nothing more, in team order.
func (k Kubernetes) QuotaTeams() []core.Team {
	var out []core.Team
	for _, id := range slices.Sorted(maps.Keys(k.Quotas)) {
		t := core.Team{ID: id, Weight: 1}
		for _, model := range slices.Sorted(maps.Keys(k.Quotas[id])) {
			t.Quotas = append(t.Quotas, core.Quota{GPUClass: model, Guaranteed: core.Milli(k.Quotas[id][model]) * core.WholeGPU})
		}
		out = append(out, t)
	}
	return out
}

// Validate checks each namespace is a namespace name (a DNS label, as
// the apiserver allows) and each team a name on one line.
func (k Kubernetes) Validate() error {
	for _, ns := range slices.Sorted(maps.Keys(k.Teams)) {
		f := "kubernetes.teams." + ns
		if !dnsLabel(ns) {
			return &core.FieldError{Field: f, Value: ns, Allowed: "a namespace name: 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"}
		}
		if t := k.Teams[ns]; !teamName(t) {
			return &core.FieldError{Field: f, Value: t, Allowed: "a team name of 1 to 100 characters on one line, no leading or trailing space"}
		}
	}
	for _, team := range slices.Sorted(maps.Keys(k.Quotas)) {
		f := "kubernetes.quotas." + team
		if !teamName(team) {
			return &core.FieldError{Field: f, Value: team, Allowed: "a team name of 1 to 100 characters on one line, no leading or trailing space"}
		}
		if len(k.Quotas[team]) == 0 {
			return &core.FieldError{Field: f, Value: "", Allowed: "GPU models and the whole GPUs of each the team may hold (NVIDIA-A100-SXM4-80GB: 32)"}
		}
		for _, model := range slices.Sorted(maps.Keys(k.Quotas[team])) {
			if n := k.Quotas[team][model]; n < 0 || n > 1_000_000 || !teamName(model) {
				return &core.FieldError{Field: f + "." + model, Value: fmt.Sprint(n), Allowed: "a GPU model and a count of whole GPUs 0..1000000"}
			}
		}
	}
	return nil
}

// teamName reports whether s names a team (or a GPU model): 1 to 100
// characters on one line, no leading or trailing space.
func teamName(s string) bool {
	return strings.TrimSpace(s) != "" && len(s) <= 100 && !strings.ContainsAny(s, "\n\r\t") && strings.TrimSpace(s) == s
}

// dnsLabel reports whether s is an RFC 1123 label, a namespace's name.
func dnsLabel(s string) bool {
	if len(s) < 1 || len(s) > 63 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// Duration is a time.Duration written as Go writes one ("90s", "1h30m")
// in both the file and JSON.
type Duration time.Duration

// String is time.Duration's text.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Default is gpufleet's own policy.
func Default() Policy {
	p, _ := Preset(DefaultName)
	return p
}

// DefaultName is the preset Default returns and a file's base.
const DefaultName = "gpufleet"

// PresetNames lists the presets, ours first, then the baselines.
var PresetNames = []string{"gpufleet", "static-peak", "reactive", "autostop"}

// Preset returns the named preset. gpufleet's values are the engine's
// documented defaults (fleet.Config.Defaults, sched's Config); the
// baselines differ from it only where their docs say.
func Preset(name string) (Policy, error) {
	p := Policy{
		Name: DefaultName, Source: "preset " + name,
		WaitTargets:  map[core.Tier]Duration{core.TierCore: Duration(time.Minute), core.TierRegular: Duration(10 * time.Minute), core.TierOffline: Duration(time.Hour)},
		BillingModes: []core.BillingMode{},
		TimeOfUse:    TimeOfUse{Shift: true, MinSavingBP: 500, Horizon: Duration(7 * 24 * time.Hour)},
		Reserved:     Reserved{Mode: core.Monthly, GPUs: map[string]int{}},
		Renting: Renting{Enabled: true, Packing: true, ScaleOutBP: 8000, MaxPerStep: 64, OutlookHorizon: Duration(24 * time.Hour),
			ProvisioningDelay: map[string]Duration{}, DefaultDelay: Duration(3 * time.Minute), DefaultDuration: Duration(time.Hour)},
		Release: Release{Enabled: true, AtBoundary: true, Margin: Duration(2 * time.Minute), MinIdle: Duration(5 * time.Minute), MinHold: Duration(10 * time.Minute)},
		Idle: Idle{UtilPct: 20, Window: Duration(30 * time.Minute), BurstToleranceBP: 1000, For: Duration(30 * time.Minute), NotifyAfter: Duration(15 * time.Minute), ActAfter: Duration(30 * time.Minute),
			Action: fleet.IdleShare, ZombieAfter: Duration(10 * time.Minute)},
		Spot:          Spot{MaxReclaims: 3, Rule: SpotFallback},
		Consolidation: Consolidation{Enabled: true, ScaleInBP: 3000, MoveOverhead: Duration(5 * time.Minute)},
		Preemption:    Preemption{Enabled: true, MinRuntime: Duration(10 * time.Minute)},
		Backfill:      Backfill{Enabled: true},
		FairShare:     FairShare{HalfLife: Duration(24 * time.Hour)},
	}
	zeroWait := func() map[core.Tier]Duration {
		return map[core.Tier]Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}
	}
	switch name {
	case "gpufleet":
		p.Doc = "gpufleet's default: cost- and fragmentation-aware placement, sharing, preemption, backfill, cheapest offer and term per useful GPU-hour (spot for interruptible work), release just before the billing boundary, consolidation, off-peak deferral, deadlines and p99 wait targets kept"
		p.WaitP99 = map[core.Tier]Duration{core.TierCore: Duration(15 * time.Minute), core.TierRegular: Duration(time.Hour), core.TierOffline: Duration(4 * time.Hour)}
		p.Deadlines = Deadlines{Aware: true, Margin: Duration(5 * time.Minute)}
		p.Durations.Learn = true
	case "static-peak":
		p.Doc = "a fixed fleet sized for the peak concurrent GPU demand, on monthly terms, rented from the start"
		p.BillingModes = []core.BillingMode{core.Monthly}
		p.TimeOfUse.Shift = false
		p.Reserved.PeakSized = true
		p.Renting.Enabled, p.Release.Enabled, p.Consolidation.Enabled = false, false, false
	case "reactive":
		p.Doc = "cluster-autoscaler style: on-demand only, scale up on pending work, scale down after 10 idle minutes"
		p.WaitTargets, p.BillingModes = zeroWait(), []core.BillingMode{core.OnDemand}
		p.TimeOfUse.Shift = false
		p.Release.AtBoundary, p.Release.MinIdle = false, Duration(10*time.Minute)
		p.Consolidation.Enabled = false
	case "autostop":
		p.Doc = "autostop style: one on-demand machine rented per waiting job, released 10 minutes after it goes idle (an idle machine may be reused meanwhile)"
		p.WaitTargets, p.BillingModes = zeroWait(), []core.BillingMode{core.OnDemand}
		p.TimeOfUse.Shift = false
		p.Release.AtBoundary, p.Release.MinIdle = false, Duration(10*time.Minute)
		p.Renting.Packing = false
		p.Consolidation.Enabled = false
	default:
		return Policy{}, &core.FieldError{Field: "policy", Value: name, Allowed: "one of " + strings.Join(PresetNames, ", ")}
	}
	if p.WaitP99 == nil {
		p.WaitP99 = zeroWait() // the baselines keep no p99 wait target
	}
	p.Name = name
	return p, nil
}

// Validate checks every knob, naming the first bad one's field path (as
// in the file), its value and what is allowed.
func (p Policy) Validate() error {
	bad := func(field, value, allowed string) error {
		return &core.FieldError{Field: field, Value: value, Allowed: allowed}
	}
	positive := func(field string, d Duration) error {
		if d <= 0 {
			return bad(field, d.String(), "a duration > 0 (30s, 5m, 1h)")
		}
		return nil
	}
	bp := func(field string, v int64) error {
		if v < 1 || v > 10000 {
			return bad(field, fmt.Sprint(v), "basis points 1..10000")
		}
		return nil
	}
	if strings.TrimSpace(p.Name) == "" || len(p.Name) > 100 || strings.ContainsAny(p.Name, "\n\r\t") {
		return bad("name", p.Name, "a name of 1 to 100 characters on one line")
	}
	if p.Base != "" && !slices.Contains(PresetNames, p.Base) {
		return bad("base", p.Base, "one of "+strings.Join(PresetNames, ", "))
	}
	for _, t := range slices.Sorted(maps.Keys(p.WaitTargets)) {
		if _, err := core.ParseTier(string(t)); err != nil {
			return bad("wait_targets."+string(t), string(t), "a tier: core, regular or offline")
		}
		if d := p.WaitTargets[t]; d < 0 {
			return bad("wait_targets."+string(t), d.String(), "a duration >= 0 (0s, 5m, 1h)")
		}
	}
	for _, t := range []core.Tier{core.TierCore, core.TierRegular, core.TierOffline} {
		if _, ok := p.WaitTargets[t]; !ok {
			return bad("wait_targets."+string(t), "", "a duration >= 0 for every tier (core, regular, offline)")
		}
	}
	for _, t := range slices.Sorted(maps.Keys(p.WaitP99)) {
		if _, err := core.ParseTier(string(t)); err != nil {
			return bad("wait_p99."+string(t), string(t), "a tier: core, regular or offline")
		}
		if d := p.WaitP99[t]; d < 0 {
			return bad("wait_p99."+string(t), d.String(), "a duration >= 0 (0s: no target; 15m, 12h)")
		}
	}
	for _, t := range []core.Tier{core.TierCore, core.TierRegular, core.TierOffline} {
		if _, ok := p.WaitP99[t]; !ok {
			return bad("wait_p99."+string(t), "", "a duration >= 0 for every tier (core, regular, offline; 0s: no target)")
		}
	}
	if d := p.Deadlines.Margin; d < 0 {
		return bad("deadlines.margin", d.String(), "a duration >= 0 (0s, 5m)")
	}
	for i, m := range p.BillingModes {
		f := fmt.Sprintf("billing_modes[%d]", i)
		if _, err := core.ParseBillingMode(string(m)); err != nil || !slices.Contains(core.BillingModes, m) {
			return bad(f, string(m), "one of on-demand, spot, daily, weekly, monthly")
		}
		if slices.Index(p.BillingModes, m) != i {
			return bad(f, string(m), "each mode once")
		}
	}
	if err := bp("time_of_use.min_saving_bp", p.TimeOfUse.MinSavingBP); err != nil {
		return err
	}
	if err := positive("time_of_use.horizon", p.TimeOfUse.Horizon); err != nil {
		return err
	}
	if m := p.Reserved.Mode; m != core.Daily && m != core.Weekly && m != core.Monthly {
		return bad("reserved.mode", string(m), "a committed mode: daily, weekly or monthly")
	}
	for _, model := range slices.Sorted(maps.Keys(p.Reserved.GPUs)) {
		if n := p.Reserved.GPUs[model]; n < 0 || n > 1_000_000 || strings.TrimSpace(model) == "" {
			return bad("reserved.gpus."+model, fmt.Sprint(n), "a GPU model and a count of GPUs 0..1000000")
		}
	}
	if p.Reserved.PeakSized && len(p.Reserved.GPUs) > 0 {
		return bad("reserved.peak_sized", "true", "false when reserved.gpus is set (the base is sized one way)")
	}
	if len(p.BillingModes) > 0 && (len(p.Reserved.GPUs) > 0 || p.Reserved.PeakSized) && !slices.Contains(p.BillingModes, p.Reserved.Mode) {
		return bad("reserved.mode", string(p.Reserved.Mode), fmt.Sprintf("one of billing_modes %v", p.BillingModes))
	}
	r := p.Renting
	if err := bp("renting.scale_out_bp", r.ScaleOutBP); err != nil {
		return err
	}
	if r.MaxPerStep < 1 || r.MaxPerStep > 100_000 {
		return bad("renting.max_per_step", fmt.Sprint(r.MaxPerStep), "1..100000 machines")
	}
	if r.Prescale.Lead < 0 || r.Prescale.Lead > Duration(24*time.Hour) {
		return bad("renting.prescale.lead", r.Prescale.Lead.String(), "a duration from 0 (off) to 24h")
	}
	if q := r.Prescale.Quantile; q < 0 || q > 100 {
		return bad("renting.prescale.quantile", fmt.Sprint(q), "a percent from 0 (the least of the days) to 100")
	}
	if r.OutlookHorizon < 0 {
		return bad("renting.outlook_horizon", r.OutlookHorizon.String(), "a duration >= 0 (0: price terms on the job alone)")
	}
	for _, id := range slices.Sorted(maps.Keys(r.ProvisioningDelay)) {
		if d := r.ProvisioningDelay[id]; d < 0 {
			return bad("renting.provisioning_delay."+id, d.String(), "a duration >= 0")
		}
	}
	for _, c := range []struct {
		f string
		d Duration
	}{{"renting.default_delay", r.DefaultDelay}, {"renting.default_duration", r.DefaultDuration},
		{"release.margin", p.Release.Margin}, {"release.min_idle", p.Release.MinIdle}, {"release.min_hold", p.Release.MinHold},
		{"idle.window", p.Idle.Window}, {"idle.for", p.Idle.For}, {"idle.notify_after", p.Idle.NotifyAfter}, {"idle.act_after", p.Idle.ActAfter}, {"idle.zombie_after", p.Idle.ZombieAfter},
		{"consolidation.move_overhead", p.Consolidation.MoveOverhead}, {"preemption.min_runtime", p.Preemption.MinRuntime},
		{"fair_share.half_life", p.FairShare.HalfLife}} {
		if err := positive(c.f, c.d); err != nil {
			return err
		}
	}
	if u := p.Idle.UtilPct; u < 1 || u > 100 {
		return bad("idle.util_pct", fmt.Sprint(u), "a percentage 1..100")
	}
	if b := p.Idle.BurstToleranceBP; b < 0 || b > 5000 {
		return bad("idle.burst_tolerance_bp", fmt.Sprint(b), "basis points 0..5000 of idle.window (at most half the window left out as bursts)")
	}
	switch p.Idle.Action {
	case fleet.IdleShare, fleet.IdleDownsize, fleet.IdleStop, fleet.IdleNone:
	default:
		return bad("idle.action", string(p.Idle.Action), "one of share, downsize, stop, none")
	}
	if err := p.Idle.Notify.validate(); err != nil {
		return err
	}
	if p.Idle.ActAfter < p.Idle.NotifyAfter {
		return bad("idle.act_after", p.Idle.ActAfter.String(), "a duration >= idle.notify_after ("+p.Idle.NotifyAfter.String()+")")
	}
	if n := p.Spot.MaxReclaims; n < 1 || n > 1000 {
		return bad("spot.max_reclaims", fmt.Sprint(n), "1..1000 reclaims")
	}
	if r := p.Spot.Rule; r != SpotFallback && r != SpotUniformProgress {
		return bad("spot.rule", r, "fallback or uniform-progress")
	}
	if err := p.Kubernetes.Validate(); err != nil {
		return err
	}
	return bp("consolidation.scale_in_bp", p.Consolidation.ScaleInBP)
}

// Hash is a short digest of every knob (not Name, Doc, Base or Source):
// two policies with one hash decide alike.
func (p Policy) Hash() string {
	p.Name, p.Doc, p.Base, p.Source = "", "", "", ""
	p.Idle.Notify = Notify{} // where notices go decides nothing
	// Nil and empty say the same; JSON would tell them apart.
	if p.BillingModes == nil {
		p.BillingModes = []core.BillingMode{}
	}
	if p.Reserved.GPUs == nil {
		p.Reserved.GPUs = map[string]int{}
	}
	if len(p.Kubernetes.Teams) == 0 {
		p.Kubernetes.Teams = nil // no section, as in every preset
	}
	if len(p.Kubernetes.Quotas) == 0 {
		p.Kubernetes.Quotas = nil
	}
	b, _ := json.Marshal(p) // maps marshal in key order
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:6])
}

// Label names the policy in one short line: the name, and for a policy
// that is not an unchanged preset, where it came from and its hash.
func (p Policy) Label() string {
	if pr, err := Preset(p.Name); err == nil && p.Source == pr.Source && p.Hash() == pr.Hash() {
		return p.Name
	}
	return fmt.Sprintf("%s (%s, %s)", p.Name, p.Source, p.Hash())
}

// Offers keeps of offers the plans in the policy's billing modes, and the
// offers that still have one: what the engine may rent. Every offer when
// the policy allows every mode.
func (p Policy) Offers(offers []core.Offer) []core.Offer {
	if len(p.BillingModes) == 0 {
		return offers
	}
	var out []core.Offer
	for _, o := range offers {
		var plans []core.PricePlan
		for _, pl := range o.Plans {
			if slices.Contains(p.BillingModes, pl.Mode) {
				plans = append(plans, pl)
			}
		}
		if len(plans) > 0 {
			o.Plans = plans
			out = append(out, o)
		}
	}
	return out
}

// Modes is what the policy may rent in: nil for every mode.
func (p Policy) Modes() []core.BillingMode {
	if len(p.BillingModes) == 0 {
		return nil
	}
	return slices.Clone(p.BillingModes)
}

// Tariff is the time-of-use tariff the policy shifts deferrable work
// into: the first one in the catalog's offers, or nil when the policy
// does not shift or the catalog has none.
func (p Policy) Tariff(offers []core.Offer) *core.TimeOfUse {
	if !p.TimeOfUse.Shift {
		return nil
	}
	return SiteTariff(offers)
}

// SiteTariff is the first time-of-use tariff in the offers' plans: the
// off-peak windows deferrable work may wait for.
func SiteTariff(offers []core.Offer) *core.TimeOfUse {
	for _, o := range offers {
		for _, pl := range o.Plans {
			if pl.TimeOfUse != nil {
				return pl.TimeOfUse
			}
		}
	}
	return nil
}

// Engine is the engine's configuration for p over the catalog's offers
// at now: every field set, so fleet.Config's defaults change nothing.
// The reserved base's GPUs become whole machines of the offer
// fleet.ReservedBase rents (the cheapest per GPU on the reserved mode);
// a model with no such offer is an error naming it. PeakSized is left to
// the simulator, which knows the workload.
func (p Policy) Engine(offers []core.Offer, now time.Time) (engine.Config, error) {
	if err := p.Validate(); err != nil {
		return engine.Config{}, err
	}
	wait := make(map[core.Tier]time.Duration, len(p.WaitTargets))
	for t, d := range p.WaitTargets {
		wait[t] = time.Duration(d)
	}
	delays := make(map[string]time.Duration, len(p.Renting.ProvisioningDelay))
	for id, d := range p.Renting.ProvisioningDelay {
		delays[id] = time.Duration(d)
	}
	if len(delays) == 0 {
		delays = nil
	}
	outlook := time.Duration(p.Renting.OutlookHorizon)
	if outlook == 0 {
		outlook = -1 // fleet: negative is off, zero the default
	}
	fc := fleet.Config{
		WaitTarget: wait, ScaleOutBP: p.Renting.ScaleOutBP, ScaleInBP: p.Consolidation.ScaleInBP,
		ReleaseMargin: time.Duration(p.Release.Margin), MinIdle: time.Duration(p.Release.MinIdle), MinHold: time.Duration(p.Release.MinHold),
		IdleUtilPct: p.Idle.UtilPct, IdleFor: time.Duration(p.Idle.For), IdleWindow: time.Duration(p.Idle.Window), IdleBurstBP: burstBP(p.Idle.BurstToleranceBP), NotifyAfter: time.Duration(p.Idle.NotifyAfter), ActAfter: time.Duration(p.Idle.ActAfter),
		IdleAction: p.Idle.Action, ZombieAfter: time.Duration(p.Idle.ZombieAfter), MaxReclaims: p.Spot.MaxReclaims,
		ProvisioningDelay: delays, DefaultDelay: time.Duration(p.Renting.DefaultDelay), DefaultDuration: time.Duration(p.Renting.DefaultDuration),
		ReservedMode: p.Reserved.Mode, MaxAcquire: p.Renting.MaxPerStep, MoveOverhead: time.Duration(p.Consolidation.MoveOverhead),
		NoConsolidation: !p.Consolidation.Enabled, IgnoreBoundary: !p.Release.AtBoundary, NoPacking: !p.Renting.Packing,
		OutlookHorizon: outlook, PrescaleLead: time.Duration(p.Renting.Prescale.Lead), PrescaleQuantile: p.Renting.Prescale.Quantile,
	}
	for _, model := range slices.Sorted(maps.Keys(p.Reserved.GPUs)) {
		gpus := p.Reserved.GPUs[model]
		if gpus == 0 {
			continue
		}
		o := fleet.ReservedOffer(now, model, p.Reserved.Mode, offers)
		if o == nil {
			return engine.Config{}, &core.FieldError{Field: "reserved.gpus." + model, Value: fmt.Sprint(gpus),
				Allowed: fmt.Sprintf("a GPU model with a %s plan in the catalog (%s)", p.Reserved.Mode, strings.Join(committedModels(offers, p.Reserved.Mode), ", "))}
		}
		per := max(int64(o.CapMilli()), 1)
		machines := (int64(gpus)*int64(core.WholeGPU) + per - 1) / per
		if machines > math.MaxInt32 {
			machines = math.MaxInt32
		}
		if fc.Reserved == nil {
			fc.Reserved = map[string]int{}
		}
		fc.Reserved[model] = int(machines)
	}
	sc := sched.Config{
		MinRuntime: time.Duration(p.Preemption.MinRuntime), HalfLife: time.Duration(p.FairShare.HalfLife),
		DeferMinSavingBP: p.TimeOfUse.MinSavingBP, DeferHorizon: time.Duration(p.TimeOfUse.Horizon),
		NoPreemption: !p.Preemption.Enabled, NoBackfill: !p.Backfill.Enabled,
		NoDeadlines: !p.Deadlines.Aware, DefaultDuration: time.Duration(p.Renting.DefaultDuration),
		WaitP99: make(map[core.Tier]time.Duration, len(p.WaitP99)),
	}
	for t, d := range p.WaitP99 {
		sc.WaitP99[t] = time.Duration(d)
	}
	// At risk this long before the latest start: the slowest
	// provisioning the policy expects, and the margin.
	lead := time.Duration(p.Renting.DefaultDelay)
	for _, d := range p.Renting.ProvisioningDelay {
		lead = max(lead, time.Duration(d))
	}
	sc.RiskLead = lead + time.Duration(p.Deadlines.Margin)
	if sc.RiskLead == 0 {
		sc.RiskLead = -1 // sched: zero is the default, negative none
	}
	return engine.Config{Sched: sc, Fleet: fc, NoAcquire: !p.Renting.Enabled, NoRelease: !p.Release.Enabled, LearnDurations: p.Durations.Learn}, nil
}

// committedModels lists the GPU models with a plan in mode.
func committedModels(offers []core.Offer, mode core.BillingMode) []string {
	var out []string
	for _, o := range offers {
		if _, ok := o.Plan(mode); ok && !slices.Contains(out, o.GPUModel) {
			out = append(out, o.GPUModel)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// validate reports the first field of n that serve could not send with:
// an absolute http(s) URL, and the name of the variable holding the
// secret whenever a URL is set.
func (n Notify) validate() error {
	if n.URL == "" && n.SecretEnv == "" {
		return nil
	}
	u, err := url.Parse(n.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &core.FieldError{Field: "idle.notify.url", Value: n.URL, Allowed: "an absolute http or https URL with a host and no user info"}
	}
	if !envName(n.SecretEnv) {
		return &core.FieldError{Field: "idle.notify.secret_env", Value: n.SecretEnv, Allowed: "the name of the environment variable holding the signing secret ([A-Za-z_][A-Za-z0-9_]*)"}
	}
	return nil
}

// envName reports whether s is an environment variable's name.
func envName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// burstBP is the fleet's IdleBurstBP for a policy's burst tolerance: the
// fleet reads zero as its default, so none is said as -1.
func burstBP(bp int) int {
	if bp == 0 {
		return -1
	}
	return bp
}
