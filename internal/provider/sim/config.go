package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Config is what a Cloud rents and how it behaves.
//
// A spot machine whose offer no availability series covers is reclaimed
// at its plan's rate: its time from ready to reclaim notice is
// exponential with rate -ln(1 - MonthlyRateBP/10000) per 730-hour month,
// so that it gets a notice within a month of running with probability
// MonthlyRateBP/10000, and it is reclaimed a notice lead time later. A
// spot plan without a reclaim model is reclaimed at DefaultReclaimBP, or
// never when that is zero.
//
// Settings are resolved per offer in three layers: ByOffer[offer.ID], then
// ByProvider[offer.Provider], then Default; the first layer that sets a
// field wins. Fields left unset everywhere mean: ready at once, no
// capacity limit, no failures, the plan's notice lead time.
type Config struct {
	// Offers is the catalog (pass pricing.Catalog.Offers). Acquire of an
	// offer not here, or in a mode the offer has no plan for, fails.
	Offers []core.Offer
	// Source is the only randomness the Cloud uses, for example
	// rand.NewPCG(seed, 0). The Cloud must own it: sharing it with other
	// code makes runs depend on that code's draws.
	Source rand.Source
	// Clock gives Acquire its launch time and List and Release the time
	// they look at. The simulator passes a *clock.Manual.
	Clock clock.Clock
	// Default applies to every offer.
	Default Settings
	// ByProvider overrides Default for the offers of a provider, keyed by
	// core.Offer.Provider ("aws").
	ByProvider map[string]Settings
	// ByOffer overrides both for one offer, keyed by core.Offer.ID.
	ByOffer map[string]Settings
	// Availability, when set, decides the reclaims of the spot machines
	// of every offer it covers (names, or "*" for all), in place of their
	// plan's monthly rate: when an offer becomes unavailable each of its
	// spot machines gets a reclaim notice, and while it is unavailable a
	// spot Acquire fails with provider.ErrCapacity.
	Availability *Availability
	// DefaultReclaimBP is the monthly reclaim rate, in basis points, of a
	// spot plan that has no reclaim model and no availability series;
	// zero: such a plan is never reclaimed. The simulator sets
	// ConservativeReclaimBP.
	DefaultReclaimBP int64
	// SeriesStart is the time a series written in seconds from start
	// counts from; zero means the clock's time when New is called.
	SeriesStart time.Time
	// Incarnation names this Cloud among the Clouds that rent for one
	// store: machine ids are sim-INCARNATION-000001 and on, or
	// sim-000001 and on when it is empty. The machines of a Cloud die
	// with its process, and the store keeps their leases: a server sets a
	// new incarnation at every start so that its machines' ids are not
	// those of the machines its previous process rented. The simulator
	// leaves it empty (its ids, and so its runs, depend on nothing else).
	// At most 16 lowercase letters and digits.
	Incarnation string
}

// maxIncarnation is the longest Config.Incarnation.
const maxIncarnation = 16

// Settings is the behaviour of the offers one layer of Config applies to.
type Settings struct {
	// Delay is the provisioning delay from launch to ready (or failed);
	// the zero Delay is unset.
	Delay Delay
	// Capacity is the most machines of one offer that may be held at
	// once, in any billing mode; 0 is unset, and unset everywhere means
	// no limit.
	Capacity int
	// FailureBP is the probability, in basis points, that an acquired
	// machine fails at the end of its provisioning delay instead of
	// becoming ready; nil is unset (new(int64(100)) sets 1%).
	FailureBP *int64
	// Notice is the lead time of a reclaim notice; nil is unset, which
	// means the plan's Reclaim.NoticeSeconds, or DefaultNotice for a spot
	// plan without a reclaim model.
	Notice *time.Duration
}

// ConservativeReclaimBP is the reclaim rate the simulator assumes of a
// spot plan whose catalog gives none: 25% a month, the rate the AWS
// importer gives the Spot Advisor's worst bucket (">20%"), so that spot
// of unknown reliability is never simulated as more reliable than the
// least reliable spot AWS lists.
const ConservativeReclaimBP = 2500

// DefaultNotice is the reclaim notice for a spot plan that has no reclaim
// model and no configured notice: AWS's two minutes.
const DefaultNotice = 2 * time.Minute

// DemoConfig returns a Config for the demo server and quick experiments:
// provisioning takes about two minutes (lognormal, mean 2 min, p95 5 min),
// one acquisition in 200 fails, at most 16 machines of an offer at once,
// and spot machines are reclaimed at their plan's rate.
func DemoConfig(offers []core.Offer, src rand.Source, clk clock.Clock) Config {
	return Config{
		Offers: offers,
		Source: src,
		Clock:  clk,
		Default: Settings{
			Delay:     LogNormal(2*time.Minute, 5*time.Minute),
			Capacity:  16,
			FailureBP: new(int64(50)),
		},
	}
}

// resolved is the Settings of one offer after layering.
type resolved struct {
	delay     Delay
	capacity  int // 0: no limit
	failureBP int64
	notice    *time.Duration // nil: from the plan
}

// resolve layers settings, the first that sets a field winning.
func resolve(layers ...Settings) resolved {
	var r resolved
	failureSet := false
	for _, s := range layers {
		if r.delay.IsZero() {
			r.delay = s.Delay
		}
		if r.capacity == 0 {
			r.capacity = s.Capacity
		}
		if !failureSet && s.FailureBP != nil {
			r.failureBP, failureSet = *s.FailureBP, true
		}
		if r.notice == nil && s.Notice != nil {
			n := *s.Notice
			r.notice = &n
		}
	}
	if r.delay.IsZero() {
		r.delay = Fixed(0)
	}
	return r
}

func validateSettings(path string, s Settings) error {
	if err := s.Delay.validate(); err != nil {
		return fmt.Errorf("%s.delay: %w", path, err)
	}
	if s.Capacity < 0 {
		return &core.FieldError{Field: path + ".capacity", Value: fmt.Sprint(s.Capacity), Allowed: "machines >= 0 (0: unset)"}
	}
	if s.FailureBP != nil && (*s.FailureBP < 0 || *s.FailureBP > 10000) {
		return &core.FieldError{Field: path + ".failure_bp", Value: fmt.Sprint(*s.FailureBP), Allowed: "basis points 0..10000"}
	}
	if s.Notice != nil && *s.Notice < 0 {
		return &core.FieldError{Field: path + ".notice", Value: s.Notice.String(), Allowed: "a duration >= 0"}
	}
	return nil
}

// Delay is a distribution of provisioning delays. Make one with Fixed,
// Uniform or LogNormal; the zero Delay is unset. Drawn delays are rounded
// to whole seconds.
type Delay struct {
	kind     delayKind
	min, max time.Duration // fixed: min; uniform: [min, max]
	mean     time.Duration // lognormal
	p95      time.Duration // lognormal
}

type delayKind int

const (
	delayUnset delayKind = iota
	delayFixed
	delayUniform
	delayLogNormal
)

// z95 is the standard normal's 95th percentile.
const z95 = 1.6448536269514722

// Fixed is a delay of exactly d.
func Fixed(d time.Duration) Delay { return Delay{kind: delayFixed, min: d, max: d} }

// Uniform is a delay drawn uniformly from [min, max].
func Uniform(min, max time.Duration) Delay { return Delay{kind: delayUniform, min: min, max: max} }

// LogNormal is a right-skewed delay with the given mean and 95th
// percentile, the shape real provisioning times have: most machines near
// the mean, a few much later. p95 must be at least mean and at most about
// 3.87 times it (exp(z²/2) for the 95th percentile's z: beyond that no
// lognormal has both).
func LogNormal(mean, p95 time.Duration) Delay {
	return Delay{kind: delayLogNormal, mean: mean, p95: p95}
}

// maxP95Ratio is the largest p95/mean a LogNormal delay can have.
var maxP95Ratio = math.Exp(z95 * z95 / 2)

// IsZero reports whether d is unset.
func (d Delay) IsZero() bool { return d.kind == delayUnset }

// String describes d: "fixed 30s", "uniform 1m0s..3m0s",
// "lognormal mean 2m0s p95 5m0s", or "unset".
func (d Delay) String() string {
	switch d.kind {
	case delayFixed:
		return "fixed " + d.min.String()
	case delayUniform:
		return "uniform " + d.min.String() + ".." + d.max.String()
	case delayLogNormal:
		return "lognormal mean " + d.mean.String() + " p95 " + d.p95.String()
	}
	return "unset"
}

func (d Delay) validate() error {
	switch d.kind {
	case delayUnset:
		return nil
	case delayFixed:
		if d.min < 0 {
			return &core.FieldError{Field: "fixed", Value: d.min.String(), Allowed: "a duration >= 0"}
		}
	case delayUniform:
		if d.min < 0 || d.max < d.min {
			return &core.FieldError{Field: "uniform", Value: d.min.String() + ".." + d.max.String(), Allowed: "0 <= min <= max"}
		}
	case delayLogNormal:
		if d.mean <= 0 {
			return &core.FieldError{Field: "lognormal.mean", Value: d.mean.String(), Allowed: "a duration > 0"}
		}
		if r := float64(d.p95) / float64(d.mean); d.p95 < d.mean || r > maxP95Ratio {
			return &core.FieldError{Field: "lognormal.p95", Value: d.p95.String(),
				Allowed: fmt.Sprintf("mean..%.2f×mean (%s..%s)", maxP95Ratio, d.mean, time.Duration(float64(d.mean)*maxP95Ratio).Truncate(time.Second))}
		}
	default:
		return &core.FieldError{Field: "kind", Value: fmt.Sprint(d.kind), Allowed: "fixed, uniform or lognormal"}
	}
	return nil
}

// draw returns a delay from d, in whole seconds.
func (d Delay) draw(r *rand.Rand) time.Duration {
	var secs float64
	switch d.kind {
	case delayFixed:
		return d.min
	case delayUniform:
		secs = (d.min + time.Duration(r.Float64()*float64(d.max-d.min))).Seconds()
	case delayLogNormal:
		// mean = exp(mu + s²/2), p95 = exp(mu + z·s): s is the smaller
		// root of s²/2 - z·s + ln(p95/mean) = 0.
		k := math.Log(float64(d.p95) / float64(d.mean))
		s := z95 - math.Sqrt(math.Max(0, z95*z95-2*k))
		mu := math.Log(d.mean.Seconds()) - s*s/2
		secs = math.Exp(mu + s*r.NormFloat64())
	default:
		return 0
	}
	const maxSecs = 365 * 24 * 3600 // a year: a bound, not a model
	return time.Duration(math.Round(math.Min(secs, maxSecs))) * time.Second
}

// validate reports the first problem with c.
func (c *Config) validate() error {
	if c.Source == nil {
		return &core.FieldError{Field: "source", Value: "nil", Allowed: "a seeded math/rand/v2 source such as rand.NewPCG(seed, 0)"}
	}
	if c.DefaultReclaimBP < 0 || c.DefaultReclaimBP > 10000 {
		return &core.FieldError{Field: "default_reclaim_bp", Value: fmt.Sprint(c.DefaultReclaimBP), Allowed: "basis points 0..10000 a month"}
	}
	if c.Clock == nil {
		return &core.FieldError{Field: "clock", Value: "nil", Allowed: "a clock.Clock (clock.Real{} live, clock.NewManual in tests and the simulator)"}
	}
	if len(c.Incarnation) > maxIncarnation || strings.IndexFunc(c.Incarnation, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) >= 0 {
		return &core.FieldError{Field: "incarnation", Value: c.Incarnation, Allowed: fmt.Sprintf("at most %d lowercase letters and digits", maxIncarnation)}
	}
	ids := map[string]bool{}
	providers := map[string]bool{}
	for i := range c.Offers {
		o := &c.Offers[i]
		if o.ID == "" {
			return &core.FieldError{Field: fmt.Sprintf("offers[%d].id", i), Value: "", Allowed: "a non-empty offer id"}
		}
		if ids[o.ID] {
			return &core.FieldError{Field: fmt.Sprintf("offers[%d].id", i), Value: o.ID, Allowed: "a unique offer id"}
		}
		ids[o.ID] = true
		providers[o.Provider] = true
	}
	if err := validateSettings("default", c.Default); err != nil {
		return err
	}
	for _, name := range sortedKeys(c.ByProvider) {
		if !providers[name] {
			return &core.FieldError{Field: "by_provider", Value: name, Allowed: "a provider of an offer: " + strings.Join(sortedKeys(providers), ", ")}
		}
		if err := validateSettings(fmt.Sprintf("by_provider[%s]", name), c.ByProvider[name]); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(c.ByOffer) {
		if !ids[id] {
			return &core.FieldError{Field: "by_offer", Value: id, Allowed: fmt.Sprintf("the id of one of the %d offers", len(c.Offers))}
		}
		if err := validateSettings(fmt.Sprintf("by_offer[%s]", id), c.ByOffer[id]); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
