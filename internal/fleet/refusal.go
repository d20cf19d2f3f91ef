package fleet

import (
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A provider that refuses a machine for lack of capacity (an offer at
// its limit, spot withdrawn) will most likely refuse it again a moment
// later: asking at every step only fills the trail with failures (one
// replay of 2,000 jobs with 12 machines per offer made 291,682 of them).
// So an offer's mode refused for capacity is not asked for again for a
// while — RefusalWait at first, doubling at each further refusal up to
// RefusalWaitMax — unless a machine of the offer ends meanwhile (its
// place is free), and what would have been rented on it goes to the next
// cheapest admissible offer and mode meanwhile (Acquire, ReservedBase).
// The rule is a pure function of the refusals, the machines that ended
// and the time: the simulator and the server keep the same list
// (engine.State.Refused, in the server's loop state) and decide alike.

// RefusalWait is how long an offer's mode is not asked for after its
// first refusal for capacity; RefusalWaitMax is the most a wait grows to.
const (
	RefusalWait    = 30 * time.Second
	RefusalWaitMax = 10 * time.Minute
)

// Refused returns refusals with offer's mode refused for capacity at
// now: not asked for again before now plus RefusalWait, or twice the
// last wait (at most RefusalWaitMax) when it was refused before and
// nothing has cleared it since. The list is kept in offer and mode
// order; refusals is not changed.
func Refused(refusals []core.Refusal, offer string, mode core.BillingMode, now time.Time) []core.Refusal {
	out := slices.Clone(refusals)
	i, found := slices.BinarySearchFunc(out, core.Refusal{Offer: offer, Mode: mode}, cmpRefusal)
	wait := RefusalWait
	if found {
		if !out[i].Until.Add(-out[i].Wait).Before(now) {
			return out // refused at now already: several machines asked for in one step are one refusal
		}
		wait = min(max(2*out[i].Wait, RefusalWait), RefusalWaitMax)
		out[i].Until, out[i].Wait = now.Add(wait), wait
		return out
	}
	return slices.Insert(out, i, core.Refusal{Offer: offer, Mode: mode, Until: now.Add(wait), Wait: wait})
}

// Launched returns refusals without offer's mode: the provider rented a
// machine of it, so it has room again and its next refusal starts the
// wait afresh.
func Launched(refusals []core.Refusal, offer string, mode core.BillingMode) []core.Refusal {
	return slices.DeleteFunc(slices.Clone(refusals), func(r core.Refusal) bool { return r.Offer == offer && r.Mode == mode })
}

// Freed returns refusals without offer's: a machine of it ended
// (released, reclaimed, failed), so its place is free and any of its
// modes may be asked for at once.
func Freed(refusals []core.Refusal, offer string) []core.Refusal {
	return slices.DeleteFunc(slices.Clone(refusals), func(r core.Refusal) bool { return r.Offer == offer })
}

// Holds reports whether refusals keep offer's mode from being asked for
// at now.
func Holds(refusals []core.Refusal, offer string, mode core.BillingMode, now time.Time) bool {
	i, found := slices.BinarySearchFunc(refusals, core.Refusal{Offer: offer, Mode: mode}, cmpRefusal)
	return found && refusals[i].Until.After(now)
}

// held is Holds for the offers Acquire and ReservedBase weigh: nil when
// nothing is held at now (most steps), so that they check nothing.
func held(refusals []core.Refusal, now time.Time) func(offer string, mode core.BillingMode) bool {
	for _, r := range refusals {
		if r.Until.After(now) {
			return func(offer string, mode core.BillingMode) bool { return Holds(refusals, offer, mode, now) }
		}
	}
	return nil
}

func cmpRefusal(a, b core.Refusal) int {
	if a.Offer != b.Offer {
		if a.Offer < b.Offer {
			return -1
		}
		return 1
	}
	switch {
	case a.Mode < b.Mode:
		return -1
	case a.Mode > b.Mode:
		return 1
	}
	return 0
}
