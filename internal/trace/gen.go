package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Weighted is one value of a mix and its relative weight.
type Weighted struct {
	// Value is what is drawn; Weight its relative chance (>= 0).
	Value  int64
	Weight int64
}

// TierMix gives the relative weights of the tiers in a synthetic trace;
// all zero leaves every job's tier to the profile.
type TierMix struct {
	// Core, Regular and Offline are the weights (>= 0) of the tiers.
	Core, Regular, Offline int64
}

// GenConfig describes a synthetic trace. Start from DefaultGenConfig and
// change what you need; Generate uses the config as it is.
type GenConfig struct {
	// Name names the trace; Generate adds the seed.
	Name string
	// Start is the trace's Start; zero leaves it to the profile.
	Start time.Time
	// Jobs is the number of jobs.
	Jobs int
	// RatePerHour is the mean number of arrivals per hour over a day.
	RatePerHour int64
	// The arrival rate follows the hour of the day, counted from the
	// trace's start: RatePerHour × (1 + Amplitude/1000 × cos(2π(h −
	// PeakHour)/24)), highest at PeakHour, lowest twelve hours later.
	// Hourly, when any of it is non-zero, replaces the sinusoid with
	// relative weights for each hour (the mean still RatePerHour).
	PeakHour  int
	Amplitude int64
	Hourly    [24]int64
	// Tiers is the tier mix.
	Tiers TierMix
	// GPUs is the mix of GPU counts (values 1..MaxGPUs).
	GPUs []Weighted
	// FractionalPermille is the share, in thousandths, of single-GPU jobs
	// that ask for part of a GPU; Fractions is the mix of their shares in
	// milli-GPUs (values 1..999).
	FractionalPermille int64
	Fractions          []Weighted
	// Durations are lognormal with this median and 95th percentile, in
	// seconds, cut to 1..MaxDuration.
	MedianDuration, P95Duration, MaxDuration int64
	// Teams is the number of teams, named team-01, team-02…; team k
	// submits in proportion to 1/k (Zipf), as a few teams dominate real
	// clusters.
	Teams int
	// DeadlinePermille is the share of jobs, in thousandths, that carry a
	// deadline: submit + duration × a slack factor drawn uniformly from
	// DeadlineSlackMin..DeadlineSlackMax (thousandths: 1500 = 1.5×),
	// rounded up, + DeadlineGrace seconds. Zero: no deadlines (the
	// profile may still give some). Deadlines are drawn from their own
	// stream, so the rest of the trace is the same with or without them.
	DeadlinePermille                   int64
	DeadlineSlackMin, DeadlineSlackMax int64
	DeadlineGrace                      int64
}

// DefaultGenConfig is a day-shaped workload fitted to the Helios excerpt
// (../shared/data/helios-venus-excerpt-dirlab/): 31 arrivals per hour on
// average, peaking at hour 22 from the start with a strong daily swing;
// its GPU-count mix and duration median (277 s) and 95th percentile
// (53,785 s) as measured on its GPU jobs, at most 30 days; a fifth of the
// single-GPU jobs share a GPU (as in Alibaba's openb, where most
// single-GPU pods ask for a fraction); tiers 30% core, 50% regular, 20%
// offline; 8 teams.
func DefaultGenConfig() GenConfig {
	return GenConfig{
		Name:        "synthetic",
		Jobs:        1000,
		RatePerHour: 31,
		PeakHour:    22,
		Amplitude:   700,
		Tiers:       TierMix{Core: 30, Regular: 50, Offline: 20},
		GPUs: []Weighted{
			{1, 5939}, {2, 544}, {4, 647}, {8, 2382}, {16, 579}, {32, 246},
		},
		FractionalPermille: 200,
		Fractions:          []Weighted{{250, 1}, {500, 2}},
		MedianDuration:     277,
		P95Duration:        53785,
		MaxDuration:        30 * 86400,
		Teams:              8,
	}
}

// MaxGenJobs is the most jobs Generate makes.
const MaxGenJobs = 100_000_000

// Validate reports the first problem with c, naming the field.
func (c *GenConfig) Validate() error {
	bad := func(field string, v any, allowed string) error {
		return fmt.Errorf("generator config: %w", &core.FieldError{Field: field, Value: fmt.Sprint(v), Allowed: allowed})
	}
	switch {
	case c.Jobs < 0 || c.Jobs > MaxGenJobs:
		return bad("jobs", c.Jobs, fmt.Sprintf("0..%d", MaxGenJobs))
	case c.RatePerHour < 1 || c.RatePerHour > 1_000_000_000:
		return bad("rate_per_hour", c.RatePerHour, "1..1000000000 arrivals per hour")
	case int64(c.Jobs)*3600/c.RatePerHour > MaxSeconds/2:
		return bad("rate_per_hour", c.RatePerHour, "a rate at which the jobs arrive within 50 years")
	case c.PeakHour < 0 || c.PeakHour > 23:
		return bad("peak_hour", c.PeakHour, "0..23")
	case c.Amplitude < 0 || c.Amplitude > 1000:
		return bad("amplitude", c.Amplitude, "0..1000 thousandths of the mean rate")
	case c.Tiers.Core < 0 || c.Tiers.Regular < 0 || c.Tiers.Offline < 0:
		return bad("tiers", c.Tiers, "weights >= 0")
	case c.FractionalPermille < 0 || c.FractionalPermille > 1000:
		return bad("fractional_permille", c.FractionalPermille, "0..1000")
	case c.MedianDuration < 1 || c.MedianDuration > MaxSeconds:
		return bad("median_duration", c.MedianDuration, fmt.Sprintf("1..%d seconds", MaxSeconds))
	case c.P95Duration < c.MedianDuration || c.P95Duration > MaxSeconds:
		return bad("p95_duration", c.P95Duration, fmt.Sprintf("median_duration..%d seconds", MaxSeconds))
	case c.MaxDuration < 1 || c.MaxDuration > MaxSeconds:
		return bad("max_duration", c.MaxDuration, fmt.Sprintf("1..%d seconds", MaxSeconds))
	case c.Teams < 1 || c.Teams > 1_000_000:
		return bad("teams", c.Teams, "1..1000000")
	case c.DeadlinePermille < 0 || c.DeadlinePermille > 1000:
		return bad("deadline_permille", c.DeadlinePermille, "0..1000 thousandths of the jobs")
	case c.DeadlinePermille > 0 && (c.DeadlineSlackMin < 1000 || c.DeadlineSlackMin > 1_000_000):
		return bad("deadline_slack_min", c.DeadlineSlackMin, "1000..1000000 thousandths (1× to 1000× the duration)")
	case c.DeadlinePermille > 0 && (c.DeadlineSlackMax < c.DeadlineSlackMin || c.DeadlineSlackMax > 1_000_000):
		return bad("deadline_slack_max", c.DeadlineSlackMax, "deadline_slack_min..1000000 thousandths")
	case c.DeadlineGrace < 0 || c.DeadlineGrace > 30*86400:
		return bad("deadline_grace", c.DeadlineGrace, "0..2592000 seconds")
	}
	for h, w := range c.Hourly { // all zero means the sinusoid
		if w < 0 || w > 1_000_000 {
			return bad(fmt.Sprintf("hourly[%d]", h), w, "a weight 0..1000000")
		}
	}
	if err := checkMix("gpus", c.GPUs, 1, MaxGPUs, true); err != nil {
		return err
	}
	return checkMix("fractions", c.Fractions, 1, int64(core.WholeGPU)-1, c.FractionalPermille > 0)
}

func checkMix(field string, mix []Weighted, lo, hi int64, needed bool) error {
	var total int64
	for i, w := range mix {
		if w.Value < lo || w.Value > hi || w.Weight < 0 || w.Weight > 1_000_000_000 {
			return fmt.Errorf("generator config: %w", &core.FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Value: fmt.Sprintf("%d:%d", w.Value, w.Weight),
				Allowed: fmt.Sprintf("a value %d..%d with a weight 0..1000000000", lo, hi)})
		}
		total += w.Weight
	}
	if needed && total == 0 {
		return fmt.Errorf("generator config: %w", &core.FieldError{Field: field, Value: fmt.Sprint(mix), Allowed: "at least one value with a weight > 0"})
	}
	return nil
}

// Generate makes a synthetic trace of cfg.Jobs jobs. The same config and
// seed give the same trace (on the same platform: the float functions
// math uses may differ in the last bit between architectures). It
// panics if cfg does not Validate: check a config from users first.
//
// Arrivals are a Poisson process whose rate changes each hour (see
// GenConfig), drawn exactly by inverting the piecewise-constant
// cumulative rate. Jobs carry a tier when the tier mix is set, and leave
// interruptible, deadline, GPU model and memory to the profile.
func Generate(cfg GenConfig, seed uint64) Trace { return GenerateProgress(cfg, seed, nil) }

// progressEvery is how many jobs pass between two calls of a progress
// callback: rarely enough to cost nothing next to the jobs' work.
const progressEvery = 10_000

// GenerateProgress is Generate that calls progress, when not nil, with
// the jobs made so far and cfg.Jobs, every few thousand jobs and at the
// end.
func GenerateProgress(cfg GenConfig, seed uint64, progress func(done, total int)) Trace {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := Trace{Name: cfg.Name + "-seed" + strconv.FormatUint(seed, 10), Start: cfg.Start}
	if cfg.Jobs > 0 {
		out.Jobs = make([]Job, 0, cfg.Jobs)
	}

	// Rate per second in each hour of the day.
	var weights [24]float64
	var sum float64
	custom := false
	for _, w := range cfg.Hourly {
		custom = custom || w > 0
	}
	for h := range 24 {
		if custom {
			weights[h] = float64(cfg.Hourly[h])
		} else {
			weights[h] = 1 + float64(cfg.Amplitude)/1000*math.Cos(2*math.Pi*float64(h-cfg.PeakHour)/24)
			weights[h] = max(weights[h], 0)
		}
		sum += weights[h]
	}
	var rate [24]float64
	for h := range 24 {
		rate[h] = float64(cfg.RatePerHour) * weights[h] / (sum / 24) / 3600
	}

	mu := math.Log(float64(cfg.MedianDuration))
	sigma := (math.Log(float64(cfg.P95Duration)) - mu) / 1.6448536269514722 // z of the 95th percentile

	teams := make([]string, cfg.Teams)
	teamWeights := make([]float64, cfg.Teams)
	var teamTotal float64
	for k := range teams {
		teams[k] = fmt.Sprintf("team-%02d", k+1)
		teamTotal += 1 / float64(k+1)
		teamWeights[k] = teamTotal
	}
	tierMix := []Weighted{{0, cfg.Tiers.Core}, {1, cfg.Tiers.Regular}, {2, cfg.Tiers.Offline}}
	tierSet := cfg.Tiers.Core+cfg.Tiers.Regular+cfg.Tiers.Offline > 0

	// Deadlines have their own stream: turning them on changes no other
	// field of the trace.
	drng := rand.New(rand.NewPCG(seed, 0xd1b54a32d192ed03))
	t := 0.0 // seconds from the start
	for i := range cfg.Jobs {
		// Next arrival: spend an Exp(1) amount of cumulative rate.
		e := rng.ExpFloat64()
		for {
			hour := math.Floor(t / 3600)
			h := int(math.Mod(hour, 24))
			end := (hour + 1) * 3600
			if r := rate[h]; r > 0 && e <= r*(end-t) {
				t += e / r
				break
			} else {
				e -= r * (end - t)
			}
			t = end
		}
		j := Job{
			ID:     strconv.Itoa(i),
			Submit: min(int64(t), MaxSeconds),
			Team:   teams[pickFloat(rng, teamWeights)],
		}
		d := math.Exp(mu + sigma*rng.NormFloat64())
		j.Duration = int64(math.Round(min(max(d, 1), float64(cfg.MaxDuration))))
		j.GPUs = int(pick(rng, cfg.GPUs))
		j.GPUMilli = int64(core.WholeGPU)
		if j.GPUs == 1 && rng.Int64N(1000) < cfg.FractionalPermille {
			j.GPUMilli = pick(rng, cfg.Fractions)
		}
		if tierSet {
			j.Tier = tiers[pick(rng, tierMix)]
		}
		if cfg.DeadlinePermille > 0 && drng.Int64N(1000) < cfg.DeadlinePermille {
			slack := cfg.DeadlineSlackMin + drng.Int64N(cfg.DeadlineSlackMax-cfg.DeadlineSlackMin+1)
			j.Deadline = min(j.Submit+(j.Duration*slack+999)/1000+cfg.DeadlineGrace, MaxSeconds)
		}
		out.Jobs = append(out.Jobs, j)
		if progress != nil && (i+1)%progressEvery == 0 {
			progress(i+1, cfg.Jobs)
		}
	}
	if progress != nil {
		progress(cfg.Jobs, cfg.Jobs)
	}
	return out
}

// pick draws a value from a mix with a positive total weight.
func pick(rng *rand.Rand, mix []Weighted) int64 {
	var total int64
	for _, w := range mix {
		total += w.Weight
	}
	r := rng.Int64N(total)
	for _, w := range mix {
		if r < w.Weight {
			return w.Value
		}
		r -= w.Weight
	}
	return mix[len(mix)-1].Value
}

// pickFloat draws an index from cumulative weights.
func pickFloat(rng *rand.Rand, cum []float64) int {
	r := rng.Float64() * cum[len(cum)-1]
	lo, hi := 0, len(cum)-1
	for lo < hi {
		m := (lo + hi) / 2
		if cum[m] > r {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}
