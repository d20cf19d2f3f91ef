package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A workload profile holds the assumptions a trace lacks: which tier a
// job is in, whether it may be interrupted, its deadline, how often it
// checkpoints, when the trace starts and in which time zone, and the GPU
// model and memory it needs when the trace does not say. What the trace
// does record always wins over the profile. The YAML form and every
// default are documented in docs/traces.md.

// Profile is a workload profile. The zero value is not useful: start
// from DefaultProfile or ParseProfile.
type Profile struct {
	// Name labels the profile in reports.
	Name string
	// Start is the wall-clock time of the trace's offset 0; zero means the
	// trace's own start when it has one, else DefaultStartDate at midnight
	// in Location.
	Start time.Time
	// TimeZone is the zone as written ("UTC", "Asia/Shanghai", "+08:00"),
	// Location the zone itself; time-of-use windows are read in it.
	TimeZone string
	Location *time.Location
	// DefaultTier is the tier of a job no rule matches.
	DefaultTier core.Tier
	// Rules pick a job's tier; the first that matches wins.
	Rules []TierRule
	// Tiers holds what each tier assumes (all three are always present).
	Tiers map[core.Tier]TierPolicy
	// CheckpointInterval is how often jobs save their work, in seconds;
	// 0 = never (a preempted job loses everything since it started).
	CheckpointInterval int64
	// DefaultTeam is the team of a job whose trace names no team and no
	// user.
	DefaultTeam string
	// DefaultGPUModels are the models a job may use when the trace does
	// not say; nil = any.
	DefaultGPUModels []string
	// DefaultGPUMemMiB is the GPU memory a job needs per GPU when the
	// trace does not say; 0 = no requirement.
	DefaultGPUMemMiB int64
	// IgnoreTraceGPUModel drops the trace's own model constraints (PAI's
	// gpu_type is where a job ran, which may not be on offer), so that
	// DefaultGPUModels apply to every job.
	IgnoreTraceGPUModel bool
	// Seed varies which jobs the interruptible shares pick, and the
	// noise and the missing share of Estimates; each choice is a hash of
	// Seed and the job id, never a random draw at read time.
	Seed uint64
	// Estimates is how users estimate their jobs' durations: a trace
	// records only how long they ran.
	Estimates Estimates
}

// Estimates is how a profile's users estimate durations. A job's
// estimate is its recorded duration (EstimatesExact, the default), none
// (EstimatesNone), or its duration times FactorMilli/1000 times a draw
// uniform in 1 ± NoiseMilli/1000 (EstimatesScaled), at least a second.
// In exact and scaled modes a share MissingPPM of the jobs gives none.
// The draws are hashes of the profile's Seed and the job's id.
type Estimates struct {
	Mode        string
	FactorMilli int64
	NoiseMilli  int64
	MissingPPM  int64
}

// The estimate modes.
const (
	EstimatesExact  = "exact"
	EstimatesNone   = "none"
	EstimatesScaled = "scaled"
)

// Limits on Estimates.
const (
	// MaxFactorMilli is the largest estimate factor: 1000 × the duration.
	MaxFactorMilli = 1_000_000
	// MaxNoiseMilli is the largest noise: ± 99.9%.
	MaxNoiseMilli = 999
)

// Estimate is the estimate, in seconds, the profile's users give a job
// of id that ran duration seconds (0: none).
func (p *Profile) Estimate(id string, duration int64) int64 {
	e := p.Estimates
	switch e.Mode {
	case EstimatesNone:
		return 0
	case "", EstimatesExact:
		if e.MissingPPM > 0 && p.draw("estimate-missing", id)%PPM < uint64(e.MissingPPM) {
			return 0
		}
		return duration
	}
	if e.MissingPPM > 0 && p.draw("estimate-missing", id)%PPM < uint64(e.MissingPPM) {
		return 0
	}
	if duration <= 0 {
		return duration
	}
	// factor × (1 + noise × (2u - 1)) for u uniform in [0, 1), in millionths.
	u := int64(p.draw("estimate-noise", id) % PPM)
	scale := e.FactorMilli * (PPM + e.NoiseMilli*(2*u-PPM)/1000) / 1000 // millionths of the duration
	est := core.MulDivHalfEven(duration, scale, PPM)
	return min(max(est, 1), MaxSeconds)
}

// draw is a hash of the profile's seed, a salt and id (FNV-1a, then a
// splitmix64 finish): a draw that depends on nothing else.
func (p *Profile) draw(salt, id string) uint64 {
	h := uint64(14695981039346656037)
	for i := range 8 {
		h ^= (p.Seed >> (8 * i)) & 0xff
		h *= 1099511628211
	}
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= 1099511628211
	}
	h ^= 0xff // the salt's end
	h *= 1099511628211
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// TierRule assigns Tier to the jobs that meet all of its conditions; a
// condition left at its zero value does not constrain.
type TierRule struct {
	// Tier is the tier the rule gives.
	Tier core.Tier
	// Teams and Users match the job's team (after DefaultTeam) or user
	// exactly; empty matches any.
	Teams []string
	Users []string
	// MinGPUs and MaxGPUs bound the job's GPU count, inclusive; 0 = no
	// bound.
	MinGPUs, MaxGPUs int
	// MinDuration and MaxDuration bound its duration in seconds,
	// inclusive; 0 = no bound.
	MinDuration, MaxDuration int64
}

// TierPolicy is what a profile assumes of every job of one tier whose
// trace does not say.
type TierPolicy struct {
	// InterruptiblePPM is the share of the tier's jobs, in parts per
	// million, that may be preempted (500000 = half).
	InterruptiblePPM int64
	// DeadlineSlackMilli sets a deadline for jobs without one: submit +
	// duration × DeadlineSlackMilli/1000 (3000 = three times the
	// duration); 0 = no deadline.
	DeadlineSlackMilli int64
	// Deferrable jobs may wait for a cheaper time-of-use window.
	Deferrable bool
}

// DefaultStartDate is the date a trace without its own start begins on,
// at midnight in the profile's zone: Monday 1 January 2024, so that day 0
// is a weekday and weekday windows line up with the trace's weeks.
var DefaultStartDate = [3]int{2024, 1, 1}

// Limits on a profile's values.
const (
	// MaxSlackMilli is the largest deadline slack: 1000 × the duration.
	MaxSlackMilli = 1_000_000
	// PPM is one whole share in parts per million.
	PPM = 1_000_000
)

// tiers lists the tiers in rank order.
var tiers = []core.Tier{core.TierCore, core.TierRegular, core.TierOffline}

// DefaultProfile returns the defaults, documented in docs/traces.md:
// jobs of 8 GPUs or more are core; jobs of at most 4 GPUs running 4 hours
// or more are offline; the rest are regular. No core job is
// interruptible, half the regular jobs are, every offline job is, and
// offline jobs are deferrable with a deadline of three times their
// duration after submission. Jobs checkpoint every 30 minutes. Time is
// UTC; no GPU model or memory is assumed.
func DefaultProfile() *Profile {
	return &Profile{
		Name:        "default",
		TimeZone:    "UTC",
		Location:    time.UTC,
		DefaultTier: core.TierRegular,
		Rules: []TierRule{
			{Tier: core.TierCore, MinGPUs: 8},
			{Tier: core.TierOffline, MaxGPUs: 4, MinDuration: 4 * 3600},
		},
		Tiers: map[core.Tier]TierPolicy{
			core.TierCore:    {},
			core.TierRegular: {InterruptiblePPM: PPM / 2},
			core.TierOffline: {InterruptiblePPM: PPM, DeadlineSlackMilli: 3000, Deferrable: true},
		},
		CheckpointInterval: 30 * 60,
		DefaultTeam:        "default",
		Estimates:          Estimates{Mode: EstimatesExact},
	}
}

// StartFor is the wall-clock start the profile gives trace t: its own
// Start if set, else t's, else DefaultStartDate at midnight; in Location.
func (p *Profile) StartFor(t *Trace) time.Time {
	loc := p.loc()
	switch {
	case !p.Start.IsZero():
		return p.Start.In(loc)
	case !t.Start.IsZero():
		return t.Start.In(loc)
	}
	d := DefaultStartDate
	return time.Date(d[0], time.Month(d[1]), d[2], 0, 0, 0, 0, loc)
}

func (p *Profile) loc() *time.Location {
	if p.Location == nil {
		return time.UTC
	}
	return p.Location
}

// TierOf is the tier the profile gives a job of team, user, GPU count
// and duration (seconds): the first matching rule's, else DefaultTier.
func (p *Profile) TierOf(team, user string, gpus int, duration int64) core.Tier {
	for i := range p.Rules {
		if p.Rules[i].Matches(team, user, gpus, duration) {
			return p.Rules[i].Tier
		}
	}
	return p.DefaultTier
}

// Matches reports whether a job meets every condition of r.
func (r *TierRule) Matches(team, user string, gpus int, duration int64) bool {
	switch {
	case len(r.Teams) > 0 && !slices.Contains(r.Teams, team),
		len(r.Users) > 0 && !slices.Contains(r.Users, user),
		r.MinGPUs > 0 && gpus < r.MinGPUs,
		r.MaxGPUs > 0 && gpus > r.MaxGPUs,
		r.MinDuration > 0 && duration < r.MinDuration,
		r.MaxDuration > 0 && duration > r.MaxDuration:
		return false
	}
	return true
}

// Pick reports whether the job with this id falls in a share of ppm
// parts per million: a hash of the profile's seed and the id, so the
// same job is always picked the same way, whatever else is in the trace.
func (p *Profile) Pick(id string, ppm int64) bool {
	if ppm <= 0 {
		return false
	}
	if ppm >= PPM {
		return true
	}
	// FNV-1a over the seed's bytes and the id, then a final mix
	// (splitmix64) so that ids differing in their last byte spread.
	h := uint64(14695981039346656037)
	for i := range 8 {
		h ^= (p.Seed >> (8 * i)) & 0xff
		h *= 1099511628211
	}
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int64(h%PPM) < ppm
}

// Workload is a trace made into jobs under a profile.
type Workload struct {
	// Start is the wall-clock time of the trace's offset 0.
	Start time.Time
	// Jobs are in the trace's order (by submit time), each valid.
	Jobs []core.Job
	// Skipped are the trace's own skips and the jobs left out here
	// (CPU-only jobs: gpufleet schedules GPUs), each with its reason.
	Skipped []Skip
	// Actual is how long each job of Jobs ran (the trace's duration), by
	// index: a job's EstDuration is its users' estimate of it (the
	// profile's Estimates; the duration itself by default).
	Actual []time.Duration
}

// Workload converts t into jobs under p: what the trace records wins,
// the profile fills in the rest (team, tier, interruptible, deadline,
// deferrable, checkpoint interval, GPU model and memory). Jobs without
// GPUs are skipped and listed. It fails if a job is invalid.
func (t *Trace) Workload(p *Profile) (Workload, error) {
	start := p.StartFor(t)
	w := Workload{Start: start, Skipped: slices.Clone(t.Skipped)}
	w.Jobs = make([]core.Job, 0, len(t.Jobs))
	w.Actual = make([]time.Duration, 0, len(t.Jobs))
	// In whole seconds from start's: a derived deadline may lie further
	// out than a time.Duration reaches.
	at := func(s int64) time.Time {
		return time.Unix(start.Unix()+s, int64(start.Nanosecond())).In(start.Location())
	}
	// Team, user and tier names repeat across jobs: each distinct name is
	// kept once, so the scheduler's many comparisons of a job's team (its
	// quotas and fair share) find equal strings at the same address and
	// need not compare bytes, and a large trace holds each name once.
	names := map[string]string{}
	intern := func(s string) string {
		if v, ok := names[s]; ok {
			return v
		}
		names[s] = s
		return s
	}
	for i := range t.Jobs {
		j := &t.Jobs[i]
		if j.GPUs == 0 {
			w.Skipped = append(w.Skipped, Skip{ID: j.ID, Reason: "cpu-only job (no GPUs)"})
			continue
		}
		if err := j.Validate(); err != nil {
			return Workload{}, fmt.Errorf("trace %s: job %q: %w", t.Name, j.ID, err)
		}
		team := j.Team
		if team == "" {
			team = j.User
		}
		if team == "" {
			team = p.DefaultTeam
		}
		tier := j.Tier
		if tier == "" {
			tier = p.TierOf(team, j.User, j.GPUs, j.Duration)
		}
		pol := p.Tiers[tier]
		models := j.Models
		if len(models) == 0 || p.IgnoreTraceGPUModel {
			models = p.DefaultGPUModels
		}
		mem := j.GPUMemMiB
		if mem == 0 {
			mem = p.DefaultGPUMemMiB
		}
		cj := core.Job{
			ID:   j.ID,
			Team: intern(team),
			User: intern(j.User),
			Tier: core.Tier(intern(string(tier))),
			Request: core.Request{
				GPUs:         j.GPUs,
				MilliPerGPU:  core.Milli(j.GPUMilli),
				MemPerGPUMiB: mem,
				Models:       slices.Clone(models),
				CPUMilli:     j.CPUMilli,
				MemMiB:       j.MemMiB,
			},
			Shards:             j.Shards,
			EstDuration:        time.Duration(p.Estimate(j.ID, j.Duration)) * time.Second,
			Deferrable:         pol.Deferrable,
			CheckpointInterval: time.Duration(p.CheckpointInterval) * time.Second,
			Submit:             at(j.Submit),
			State:              core.JobPending,
		}
		switch j.Interruptible {
		case FlagTrue:
			cj.Interruptible = true
		case FlagUnset:
			cj.Interruptible = p.Pick(j.ID, pol.InterruptiblePPM)
		}
		switch {
		case j.Deadline != 0:
			cj.Deadline = at(j.Deadline)
		case pol.DeadlineSlackMilli > 0:
			// Rounded up, so a slack of 1 never sets a deadline before
			// the job could finish.
			cj.Deadline = at(j.Submit + (j.Duration*pol.DeadlineSlackMilli+999)/1000)
		}
		if err := cj.Validate(); err != nil {
			return Workload{}, fmt.Errorf("trace %s: job %q: %w", t.Name, j.ID, err)
		}
		w.Jobs = append(w.Jobs, cj)
		w.Actual = append(w.Actual, time.Duration(j.Duration)*time.Second)
	}
	return w, nil
}

// Validate reports the first problem with p as a *core.FieldError whose
// Field is the YAML key path.
func (p *Profile) Validate() error {
	bad := func(field string, v any, allowed string) error {
		return &core.FieldError{Field: field, Value: fmt.Sprint(v), Allowed: allowed}
	}
	if p.Location == nil {
		return bad("time_zone", p.TimeZone, "a time zone")
	}
	if !p.Start.IsZero() {
		if y := p.Start.UTC().Year(); y < 1970 || y > 9998 || p.Start.Nanosecond() != 0 {
			return bad("start", p.Start.Format(time.RFC3339Nano), "whole seconds in the years 1970..9998")
		}
	}
	if _, err := core.ParseTier(string(p.DefaultTier)); err != nil {
		return bad("default_tier", p.DefaultTier, "core, regular or offline")
	}
	for i, r := range p.Rules {
		f := fmt.Sprintf("tier_rules[%d]", i)
		switch {
		case r.Tier.Rank() > core.TierOffline.Rank():
			return bad(f+".tier", r.Tier, "core, regular or offline")
		case r.MinGPUs < 0 || r.MinGPUs > MaxGPUs:
			return bad(f+".min_gpus", r.MinGPUs, fmt.Sprintf("1..%d", MaxGPUs))
		case r.MaxGPUs < 0 || r.MaxGPUs > MaxGPUs:
			return bad(f+".max_gpus", r.MaxGPUs, fmt.Sprintf("1..%d", MaxGPUs))
		case r.MaxGPUs > 0 && r.MaxGPUs < r.MinGPUs:
			return bad(f+".max_gpus", r.MaxGPUs, fmt.Sprintf(">= min_gpus %d", r.MinGPUs))
		case r.MinDuration < 0 || r.MinDuration > MaxSeconds:
			return bad(f+".min_duration", r.MinDuration, "a duration up to 100 years")
		case r.MaxDuration < 0 || r.MaxDuration > MaxSeconds:
			return bad(f+".max_duration", r.MaxDuration, "a duration up to 100 years")
		case r.MaxDuration > 0 && r.MaxDuration < r.MinDuration:
			return bad(f+".max_duration", r.MaxDuration, fmt.Sprintf(">= min_duration %d s", r.MinDuration))
		}
		for _, c := range []struct {
			key   string
			names []string
		}{{"teams", r.Teams}, {"users", r.Users}} {
			key := c.key
			for _, n := range c.names {
				if n == "" || strings.IndexFunc(n, isControl) >= 0 || strings.TrimSpace(n) != n {
					return bad(f+"."+key, n, "non-empty names without control characters or surrounding space")
				}
			}
		}
	}
	for _, tier := range tiers {
		pol, ok := p.Tiers[tier]
		f := "tiers." + string(tier)
		switch {
		case !ok:
			return bad(f, "", "a policy for every tier")
		case pol.InterruptiblePPM < 0 || pol.InterruptiblePPM > PPM:
			return bad(f+".interruptible", pol.InterruptiblePPM, "a share 0..1000000 parts per million")
		case pol.DeadlineSlackMilli != 0 && (pol.DeadlineSlackMilli < 1000 || pol.DeadlineSlackMilli > MaxSlackMilli):
			return bad(f+".deadline_slack", pol.DeadlineSlackMilli, "0 (none) or 1000..1000000 thousandths")
		}
	}
	if len(p.Tiers) != len(tiers) {
		return bad("tiers", len(p.Tiers), "core, regular and offline only")
	}
	if p.CheckpointInterval < 0 || p.CheckpointInterval > MaxSeconds {
		return bad("checkpoint_interval", p.CheckpointInterval, "0 (never) or a duration up to 100 years")
	}
	if p.DefaultTeam == "" || strings.IndexFunc(p.DefaultTeam, isControl) >= 0 {
		return bad("default_team", p.DefaultTeam, "a non-empty team name")
	}
	for _, m := range p.DefaultGPUModels {
		if m == "" || strings.Contains(m, "|") || strings.IndexFunc(m, isControl) >= 0 || strings.TrimSpace(m) != m {
			return bad("default_gpu_model", m, "GPU model names without |, control characters or surrounding space")
		}
	}
	if p.DefaultGPUMemMiB < 0 || p.DefaultGPUMemMiB > MaxGPUMemMiB {
		return bad("default_gpu_mem_mib", p.DefaultGPUMemMiB, fmt.Sprintf("0..%d MiB", MaxGPUMemMiB))
	}
	e := p.Estimates
	switch e.Mode {
	case "", EstimatesExact, EstimatesNone, EstimatesScaled:
	default:
		return bad("estimates.mode", e.Mode, estimateModes)
	}
	if e.Mode != EstimatesScaled && (e.FactorMilli != 0 || e.NoiseMilli != 0) {
		return bad("estimates.mode", e.Mode, "scaled when a factor or noise is set")
	}
	if e.Mode == EstimatesScaled && (e.FactorMilli < 1 || e.FactorMilli > MaxFactorMilli) {
		return bad("estimates.factor", formatMilli(e.FactorMilli), factorText)
	}
	if e.NoiseMilli < 0 || e.NoiseMilli > MaxNoiseMilli {
		return bad("estimates.noise", formatMilli(e.NoiseMilli), noiseText)
	}
	if e.MissingPPM < 0 || e.MissingPPM > PPM {
		return bad("estimates.missing", formatShare(e.MissingPPM), missingText)
	}
	return nil
}

// ProfileError is an error in a workload profile; see core.ParseError.
type ProfileError = core.ParseError

// LoadProfile reads a profile file.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load profile: %w", err)
	}
	return ParseProfile(path, data)
}

// MaxProfileBytes bounds a profile file's size.
const MaxProfileBytes = 1 << 20

// ParseProfile reads a profile in YAML (docs/traces.md). Keys left out
// keep DefaultProfile's values; unknown keys, duplicate keys, aliases and
// a second document are errors. name is the file name used in errors,
// which are *ProfileError values with the line, the field and the value.
func ParseProfile(name string, data []byte) (*Profile, error) {
	d := &pdec{file: name}
	if len(data) > MaxProfileBytes {
		return nil, &ProfileError{File: name, Problem: "file too large", Value: strconv.Itoa(len(data)), Allowed: fmt.Sprintf("at most %d bytes", MaxProfileBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	p := DefaultProfile()
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return p, nil // an empty file is the defaults
		}
		return nil, d.syntax(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, d.syntax(err)
		}
		return nil, &ProfileError{File: name, Line: extra.Line, Problem: "a second YAML document", Allowed: "one profile per file"}
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return p, nil
		}
		root = doc.Content[0]
	}
	if isNullNode(root) {
		return p, nil
	}
	if err := d.profile(root, p); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		var fe *core.FieldError
		if errors.As(err, &fe) {
			return nil, &ProfileError{File: name, Line: d.lines[fe.Field], Field: fe.Field, Value: fe.Value, Allowed: fe.Allowed, Err: err}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// pdec walks a profile's YAML nodes.
type pdec struct {
	file  string
	lines map[string]int // field path → line, for Validate's errors
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *pdec) syntax(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ProfileError{File: d.file, Line: line, Problem: "YAML syntax error: " + m[2], Err: err}
	}
	return &ProfileError{File: d.file, Problem: "YAML syntax error: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
}

func (d *pdec) fail(n *yaml.Node, field, value, problem, allowed string) error {
	return &ProfileError{File: d.file, Line: n.Line, Field: field, Value: value, Problem: problem, Allowed: allowed}
}

func isNullNode(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// entry is one key of a mapping with its value.
type entry struct {
	key   string
	field string
	val   *yaml.Node
}

// mapping checks that n is a mapping whose keys are all in allowed, each
// once, and returns its entries in order; null values are left out (a
// key with no value keeps its default).
func (d *pdec) mapping(n *yaml.Node, field string, allowed []string) ([]entry, error) {
	if n.Kind != yaml.MappingNode {
		what := "a mapping"
		if field != "" {
			what = field + ": a mapping"
		}
		return nil, d.fail(n, field, "", "got "+kindOf(n), what+" with keys "+strings.Join(allowed, ", "))
	}
	var out []entry
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, d.fail(k, field, "", "a key that is "+kindOf(k), "keys "+strings.Join(allowed, ", "))
		}
		f := k.Value
		if field != "" {
			f = field + "." + k.Value
		}
		if !slices.Contains(allowed, k.Value) {
			return nil, d.fail(k, field, k.Value, "unknown key", "one of "+strings.Join(allowed, ", "))
		}
		if l, dup := first[k.Value]; dup {
			return nil, d.fail(k, field, k.Value, "duplicate key", fmt.Sprintf("each key once (first at line %d)", l))
		}
		first[k.Value] = k.Line
		if v.Kind == yaml.AliasNode {
			return nil, d.fail(v, f, v.Value, "an alias", "the value written out (aliases are not supported)")
		}
		d.lines[f] = v.Line
		if isNullNode(v) {
			continue
		}
		out = append(out, entry{key: k.Value, field: f, val: v})
	}
	return out, nil
}

// scalar is e's text; e must be a plain value.
func (d *pdec) scalar(e entry, allowed string) (string, error) {
	if e.val.Kind != yaml.ScalarNode {
		return "", d.fail(e.val, e.field, "", "got "+kindOf(e.val), allowed)
	}
	switch e.val.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
	default:
		return "", d.fail(e.val, e.field, e.val.Value, "a value tagged "+e.val.Tag, allowed)
	}
	return e.val.Value, nil
}

// names is e's list of plain values (a single value is a list of one).
func (d *pdec) names(e entry, allowed string) ([]string, error) {
	items := []*yaml.Node{e.val}
	if e.val.Kind == yaml.SequenceNode {
		items = e.val.Content
	}
	var out []string
	for i, it := range items {
		f := e.field
		if e.val.Kind == yaml.SequenceNode {
			f = fmt.Sprintf("%s[%d]", e.field, i)
		}
		if it.Kind != yaml.ScalarNode || isNullNode(it) {
			return nil, d.fail(it, f, "", "got "+kindOf(it), allowed)
		}
		s, err := d.scalar(entry{field: f, val: it}, allowed)
		if err != nil {
			return nil, err
		}
		if s == "" || strings.IndexFunc(s, isControl) >= 0 || strings.TrimSpace(s) != s {
			return nil, d.fail(it, f, s, "", allowed)
		}
		out = append(out, s)
	}
	return out, nil
}

// integer is e as a whole number in lo..hi.
func (d *pdec) integer(e entry, lo, hi int64, allowed string) (int64, error) {
	s, err := d.scalar(e, allowed)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, &ProfileError{File: d.file, Line: e.val.Line, Field: e.field, Value: s, Allowed: allowed, Err: err}
	}
	return v, nil
}

// boolean is e as true or false.
func (d *pdec) boolean(e entry) (bool, error) {
	const allowed = "true or false"
	s, err := d.scalar(e, allowed)
	if err != nil {
		return false, err
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, nil
	case "false", "no", "off":
		return false, nil
	}
	return false, d.fail(e.val, e.field, s, "", allowed)
}

const spanText = "a duration: a Go duration (90s, 4h, 1h30m), a count of periods (2 days), or whole seconds"

// span is e as a duration in seconds; zeroOK allows "0".
func (d *pdec) span(e entry, zeroOK bool) (int64, error) {
	allowed := spanText
	if zeroOK {
		allowed += ", or 0 for never"
	}
	s, err := d.scalar(e, allowed)
	if err != nil {
		return 0, err
	}
	if zeroOK && strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	v, err := core.ParseSpan(s)
	if err != nil || v > MaxSeconds {
		return 0, &ProfileError{File: d.file, Line: e.val.Line, Field: e.field, Value: s, Allowed: allowed + " up to 100 years", Err: err}
	}
	return v, nil
}

const (
	estimateModes = "exact, none or scaled"
	factorText    = "a factor 0.001..1000 of the duration, such as 2 or 0.5 (at most 3 decimals)"
	noiseText     = "a spread 0..0.999 around the factor, such as 0.5 for ± 50% (at most 3 decimals)"
	missingText   = "a share of the jobs: a percentage (10%) or a fraction 0..1 (0.1), at most 4 decimals of a percent"
)

var (
	profileKeys = []string{"name", "start", "time_zone", "default_tier", "tier_rules", "tiers", "checkpoint_interval",
		"default_team", "default_gpu_model", "default_gpu_mem_mib", "ignore_trace_gpu_model", "seed", "estimates"}
	estimateKeys = []string{"mode", "factor", "noise", "missing"}
	ruleKeys     = []string{"tier", "teams", "users", "min_gpus", "max_gpus", "min_duration", "max_duration"}
	policyKeys   = []string{"interruptible", "deadline_slack", "deferrable"}
	tierNames    = []string{"core", "regular", "offline"}
)

const tierText = "core, regular or offline"

func (d *pdec) profile(n *yaml.Node, p *Profile) error {
	d.lines = map[string]int{}
	entries, err := d.mapping(n, "", profileKeys)
	if err != nil {
		return err
	}
	var startText string
	var startEntry entry
	for _, e := range entries {
		switch e.key {
		case "name":
			if p.Name, err = d.scalar(e, "a name for the profile"); err != nil {
				return err
			}
			if strings.IndexFunc(p.Name, isControl) >= 0 {
				return d.fail(e.val, e.field, p.Name, "", "a name without control characters")
			}
		case "start":
			if startText, err = d.scalar(e, startAllowed); err != nil {
				return err
			}
			startEntry = e
		case "time_zone":
			s, err := d.scalar(e, zoneText)
			if err != nil {
				return err
			}
			loc, name, err := parseZone(s)
			if err != nil {
				return &ProfileError{File: d.file, Line: e.val.Line, Field: e.field, Value: s, Allowed: zoneText, Err: err}
			}
			p.Location, p.TimeZone = loc, name
		case "default_tier":
			if p.DefaultTier, err = d.tier(e); err != nil {
				return err
			}
		case "tier_rules":
			if e.val.Kind != yaml.SequenceNode {
				return d.fail(e.val, e.field, "", "got "+kindOf(e.val), "a list of rules, each a mapping with keys "+strings.Join(ruleKeys, ", "))
			}
			p.Rules = nil
			for i, it := range e.val.Content {
				r, err := d.rule(it, fmt.Sprintf("%s[%d]", e.field, i))
				if err != nil {
					return err
				}
				p.Rules = append(p.Rules, r)
			}
		case "tiers":
			tes, err := d.mapping(e.val, e.field, tierNames)
			if err != nil {
				return err
			}
			for _, te := range tes {
				tier := core.Tier(te.key)
				pol, err := d.policy(te, p.Tiers[tier])
				if err != nil {
					return err
				}
				p.Tiers[tier] = pol
			}
		case "checkpoint_interval":
			if p.CheckpointInterval, err = d.span(e, true); err != nil {
				return err
			}
		case "default_team":
			if p.DefaultTeam, err = d.scalar(e, "a team name"); err != nil {
				return err
			}
		case "default_gpu_model":
			if p.DefaultGPUModels, err = d.names(e, "a GPU model name, or a list of them (any of which will do)"); err != nil {
				return err
			}
		case "default_gpu_mem_mib":
			if p.DefaultGPUMemMiB, err = d.integer(e, 0, MaxGPUMemMiB, fmt.Sprintf("MiB of GPU memory per GPU, 0..%d", MaxGPUMemMiB)); err != nil {
				return err
			}
		case "ignore_trace_gpu_model":
			if p.IgnoreTraceGPUModel, err = d.boolean(e); err != nil {
				return err
			}
		case "estimates":
			if p.Estimates, err = d.estimates(e); err != nil {
				return err
			}
		case "seed":
			s, err := d.scalar(e, "a whole number 0..18446744073709551615")
			if err != nil {
				return err
			}
			if p.Seed, err = strconv.ParseUint(strings.TrimSpace(s), 10, 64); err != nil {
				return &ProfileError{File: d.file, Line: e.val.Line, Field: e.field, Value: s, Allowed: "a whole number 0..18446744073709551615", Err: err}
			}
		}
	}
	if startText != "" {
		t, err := parseStart(startText, p.loc())
		if err != nil {
			return &ProfileError{File: d.file, Line: startEntry.val.Line, Field: startEntry.field, Value: startText, Allowed: startAllowed, Err: err}
		}
		p.Start = t
	}
	return nil
}

// estimates reads estimates: a mode alone (exact, none, scaled) or a
// mapping of mode, factor, noise and missing.
func (d *pdec) estimates(e entry) (Estimates, error) {
	var out Estimates
	mode := func(e entry) (string, error) {
		s, err := d.scalar(e, estimateModes)
		if err != nil {
			return "", err
		}
		m := strings.ToLower(strings.TrimSpace(s))
		if m != EstimatesExact && m != EstimatesNone && m != EstimatesScaled {
			return "", d.fail(e.val, e.field, s, "", estimateModes)
		}
		return m, nil
	}
	if e.val.Kind == yaml.ScalarNode {
		m, err := mode(entry{key: e.key, field: e.field + ".mode", val: e.val})
		out.Mode = m
		if m == EstimatesScaled {
			out.FactorMilli = 1000
		}
		return out, err
	}
	entries, err := d.mapping(e.val, e.field, estimateKeys)
	if err != nil {
		return out, err
	}
	out.Mode = EstimatesExact
	for _, x := range entries {
		switch x.key {
		case "mode":
			if out.Mode, err = mode(x); err != nil {
				return out, err
			}
		case "factor", "noise":
			allowed := factorText
			if x.key == "noise" {
				allowed = noiseText
			}
			s, err := d.scalar(x, allowed)
			if err != nil {
				return out, err
			}
			v, exact, ok := parseFixed(strings.TrimSuffix(strings.TrimSpace(s), "x"), 3)
			if !ok || !exact || x.key == "factor" && (v < 1 || v > MaxFactorMilli) || x.key == "noise" && v > MaxNoiseMilli {
				return out, d.fail(x.val, x.field, s, "", allowed)
			}
			if x.key == "factor" {
				out.FactorMilli = v
			} else {
				out.NoiseMilli = v
			}
		case "missing":
			s, err := d.scalar(x, missingText)
			if err != nil {
				return out, err
			}
			v, ok := parseShare(s)
			if !ok {
				return out, d.fail(x.val, x.field, s, "", missingText)
			}
			out.MissingPPM = v
		}
	}
	if out.Mode == EstimatesScaled && out.FactorMilli == 0 {
		out.FactorMilli = 1000
	}
	if out.Mode != EstimatesScaled && (out.FactorMilli != 0 || out.NoiseMilli != 0) {
		return out, &ProfileError{File: d.file, Line: e.val.Line, Field: e.field + ".mode", Value: out.Mode, Allowed: "scaled when a factor or noise is set"}
	}
	return out, nil
}

func (d *pdec) tier(e entry) (core.Tier, error) {
	s, err := d.scalar(e, tierText)
	if err != nil {
		return "", err
	}
	t, err := core.ParseTier(strings.ToLower(strings.TrimSpace(s)))
	if err != nil {
		return "", &ProfileError{File: d.file, Line: e.val.Line, Field: e.field, Value: s, Allowed: tierText, Err: err}
	}
	return t, nil
}

func (d *pdec) rule(n *yaml.Node, field string) (TierRule, error) {
	var r TierRule
	if n.Kind == yaml.AliasNode {
		return r, d.fail(n, field, n.Value, "an alias", "the rule written out (aliases are not supported)")
	}
	d.lines[field] = n.Line
	entries, err := d.mapping(n, field, ruleKeys)
	if err != nil {
		return r, err
	}
	gpusText := fmt.Sprintf("a whole number of GPUs 1..%d", MaxGPUs)
	for _, e := range entries {
		var v int64
		switch e.key {
		case "tier":
			r.Tier, err = d.tier(e)
		case "teams":
			r.Teams, err = d.names(e, "a team name or a list of them")
		case "users":
			r.Users, err = d.names(e, "a user name or a list of them")
		case "min_gpus":
			v, err = d.integer(e, 1, MaxGPUs, gpusText)
			r.MinGPUs = int(v)
		case "max_gpus":
			v, err = d.integer(e, 1, MaxGPUs, gpusText)
			r.MaxGPUs = int(v)
		case "min_duration":
			r.MinDuration, err = d.span(e, false)
		case "max_duration":
			r.MaxDuration, err = d.span(e, false)
		}
		if err != nil {
			return r, err
		}
	}
	if r.Tier == "" {
		return r, &ProfileError{File: d.file, Line: n.Line, Field: field + ".tier", Problem: "missing", Allowed: tierText}
	}
	return r, nil
}

func (d *pdec) policy(te entry, pol TierPolicy) (TierPolicy, error) {
	entries, err := d.mapping(te.val, te.field, policyKeys)
	if err != nil {
		return pol, err
	}
	for _, e := range entries {
		switch e.key {
		case "interruptible":
			const allowed = "a share of the tier's jobs: a percentage (50%) or a fraction 0..1 (0.5), at most 4 decimals of a percent"
			s, err := d.scalar(e, allowed)
			if err != nil {
				return pol, err
			}
			v, ok := parseShare(s)
			if !ok {
				return pol, d.fail(e.val, e.field, s, "", allowed)
			}
			pol.InterruptiblePPM = v
		case "deadline_slack":
			const allowed = "0 (no deadline) or a factor 1..1000 of the duration, such as 3 or 1.5 (at most 3 decimals)"
			s, err := d.scalar(e, allowed)
			if err != nil {
				return pol, err
			}
			v, exact, ok := parseFixed(strings.TrimSuffix(strings.TrimSpace(s), "x"), 3)
			if !ok || !exact || (v != 0 && (v < 1000 || v > MaxSlackMilli)) {
				return pol, d.fail(e.val, e.field, s, "", allowed)
			}
			pol.DeadlineSlackMilli = v
		case "deferrable":
			if pol.Deferrable, err = d.boolean(e); err != nil {
				return pol, err
			}
		}
	}
	return pol, nil
}

// parseShare reads "50%", "12.5%" or "0.5" as parts per million.
func parseShare(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	var v int64
	var exact, ok bool
	if num, pct := strings.CutSuffix(s, "%"); pct {
		v, exact, ok = parseFixed(strings.TrimSpace(num), 4)
	} else {
		v, exact, ok = parseFixed(s, 6)
	}
	return v, ok && exact && v <= PPM
}

const zoneText = "a time zone: an IANA name (Asia/Shanghai), UTC, or a fixed offset (+08:00, UTC+8)"

var offsetZone = regexp.MustCompile(`^(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?$`)

// parseZone reads a time zone and returns it with its canonical name.
func parseZone(s string) (*time.Location, string, error) {
	s = strings.TrimSpace(s)
	switch strings.ToUpper(s) {
	case "", "UTC", "Z", "GMT":
		return time.UTC, "UTC", nil
	}
	if m := offsetZone.FindStringSubmatch(strings.ToUpper(s)); m != nil {
		h, _ := strconv.Atoi(m[2])
		mins := 0
		if m[3] != "" {
			mins, _ = strconv.Atoi(m[3])
		}
		if h > 14 || mins > 59 {
			return nil, "", errors.New("offset out of range")
		}
		off := h*3600 + mins*60
		name := fmt.Sprintf("%s%02d:%02d", m[1], h, mins)
		if m[1] == "-" {
			off = -off
		}
		return time.FixedZone(name, off), name, nil
	}
	if strings.EqualFold(s, "local") || strings.ContainsAny(s, " \\") || strings.HasPrefix(s, "/") || strings.Contains(s, "..") {
		return nil, "", errors.New("not a zone name")
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, "", err
	}
	return loc, s, nil
}

const startAllowed = "an RFC 3339 time (2024-01-01T00:00:00+08:00), or a local time (2024-01-01T09:00:00) or date (2024-01-01) in time_zone"

// parseStart reads a start time: RFC 3339 with its own offset, or a
// local date-time or date in loc.
func parseStart(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	var t time.Time
	var err error
	switch {
	case len(s) == len(time.DateOnly):
		t, err = time.ParseInLocation(time.DateOnly, s, loc)
	case len(s) == len("2006-01-02T15:04:05"):
		t, err = time.ParseInLocation("2006-01-02T15:04:05", s, loc)
	default:
		t, err = time.Parse(time.RFC3339, s)
	}
	if err != nil {
		return time.Time{}, err
	}
	if y := t.UTC().Year(); y < 1970 || y > 9998 {
		return time.Time{}, errors.New("year out of range 1970..9998")
	}
	if t.Nanosecond() != 0 {
		return time.Time{}, errors.New("not whole seconds")
	}
	return t.In(loc), nil
}

// Describe writes p as the YAML ParseProfile reads back to the same
// profile, every key present, so that a report can print the exact
// assumptions it was made under.
func (p *Profile) Describe() string {
	var b strings.Builder
	q := func(s string) string { return strconv.Quote(s) }
	fmt.Fprintf(&b, "name: %s\n", q(p.Name))
	if p.Start.IsZero() {
		fmt.Fprintf(&b, "# start: the trace's own start, else %04d-%02d-%02d at midnight in time_zone\n", DefaultStartDate[0], DefaultStartDate[1], DefaultStartDate[2])
	} else {
		fmt.Fprintf(&b, "start: %s\n", p.Start.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "time_zone: %s\n", q(p.TimeZone))
	fmt.Fprintf(&b, "default_tier: %s\n", p.DefaultTier)
	if len(p.Rules) == 0 {
		b.WriteString("tier_rules: []\n")
	} else {
		b.WriteString("tier_rules: # the first rule a job matches gives its tier\n")
	}
	list := func(xs []string) string {
		qs := make([]string, len(xs))
		for i, x := range xs {
			qs[i] = q(x)
		}
		return "[" + strings.Join(qs, ", ") + "]"
	}
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "  - tier: %s\n", r.Tier)
		if len(r.Teams) > 0 {
			fmt.Fprintf(&b, "    teams: %s\n", list(r.Teams))
		}
		if len(r.Users) > 0 {
			fmt.Fprintf(&b, "    users: %s\n", list(r.Users))
		}
		if r.MinGPUs > 0 {
			fmt.Fprintf(&b, "    min_gpus: %d\n", r.MinGPUs)
		}
		if r.MaxGPUs > 0 {
			fmt.Fprintf(&b, "    max_gpus: %d\n", r.MaxGPUs)
		}
		if r.MinDuration > 0 {
			fmt.Fprintf(&b, "    min_duration: %s\n", formatSpan(r.MinDuration))
		}
		if r.MaxDuration > 0 {
			fmt.Fprintf(&b, "    max_duration: %s\n", formatSpan(r.MaxDuration))
		}
	}
	b.WriteString("tiers:\n")
	for _, t := range tiers {
		pol := p.Tiers[t]
		fmt.Fprintf(&b, "  %s:\n    interruptible: %s\n    deadline_slack: %s\n    deferrable: %t\n",
			t, formatShare(pol.InterruptiblePPM), formatMilli(pol.DeadlineSlackMilli), pol.Deferrable)
	}
	if p.CheckpointInterval == 0 {
		b.WriteString("checkpoint_interval: 0 # never\n")
	} else {
		fmt.Fprintf(&b, "checkpoint_interval: %s\n", formatSpan(p.CheckpointInterval))
	}
	fmt.Fprintf(&b, "default_team: %s\n", q(p.DefaultTeam))
	if len(p.DefaultGPUModels) == 0 {
		b.WriteString("default_gpu_model: [] # any\n")
	} else {
		fmt.Fprintf(&b, "default_gpu_model: %s\n", list(p.DefaultGPUModels))
	}
	fmt.Fprintf(&b, "default_gpu_mem_mib: %d\n", p.DefaultGPUMemMiB)
	fmt.Fprintf(&b, "ignore_trace_gpu_model: %t\n", p.IgnoreTraceGPUModel)
	fmt.Fprintf(&b, "seed: %d\n", p.Seed)
	e := p.Estimates
	mode := e.Mode
	if mode == "" {
		mode = EstimatesExact
	}
	fmt.Fprintf(&b, "estimates: # what users estimate a job's duration as\n  mode: %s\n", mode)
	if mode == EstimatesScaled {
		fmt.Fprintf(&b, "  factor: %s\n  noise: %s\n", formatMilli(e.FactorMilli), formatMilli(e.NoiseMilli))
	}
	fmt.Fprintf(&b, "  missing: %s\n", formatShare(e.MissingPPM))
	return b.String()
}

// formatSpan writes seconds as a Go duration without zero units (4h,
// 1h30m, 90s → 1m30s).
func formatSpan(s int64) string {
	out := (time.Duration(s) * time.Second).String()
	out = strings.Replace(out, "m0s", "m", 1)
	out = strings.Replace(out, "h0m", "h", 1)
	return out
}

// formatShare writes parts per million as a percentage.
func formatShare(ppm int64) string {
	return formatFixed(ppm, 4) + "%"
}

// formatMilli writes thousandths as a decimal.
func formatMilli(v int64) string { return formatFixed(v, 3) }

// formatFixed writes v / 10^scale without trailing zeros.
func formatFixed(v int64, scale int) string {
	s := strconv.FormatInt(v, 10)
	for len(s) <= scale {
		s = "0" + s
	}
	i, f := s[:len(s)-scale], strings.TrimRight(s[len(s)-scale:], "0")
	if f == "" {
		return i
	}
	return i + "." + f
}
