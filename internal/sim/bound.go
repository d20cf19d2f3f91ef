package sim

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/bound"
	"github.com/gpufleet/gpufleet/internal/core"
)

// PriceBound is the simplest lower bound on any policy's cost: every
// GPU-second of work at the cheapest price per GPU-second any admissible
// offer (bound.Admissible: GPU model, memory, machine size) and mode could
// give it — a committed term as if used fully, spot
// for interruptible work, the lowest time-of-use multiplier — with no
// idle time, no rounding and no provisioning. No policy pays less.
func PriceBound(w *Workload, offers []core.Offer, tou *core.TimeOfUse) (core.Micros, error) {
	minMult := tou.FloorBP()
	var total core.U128
	const den = uint64(10000) * 1000 // per milli-GPU-second at price in micros per GPU-second ×1e4
	for _, j := range w.Jobs {
		best := int64(-1) // micros per GPU-hour ×1e4 (with multiplier)
		for _, i := range bound.Admissible(j, offers) {
			o := &offers[i]
			for _, p := range o.Plans {
				if p.Mode == core.Spot && !j.Interruptible {
					continue
				}
				// Price per GPU-hour, exact to the micro.
				perHour := core.MulDivHalfEven(int64(p.Price), 3600*int64(core.WholeGPU), p.Per.Seconds()*int64(o.CapMilli()))
				mult := p.TimeOfUse.FloorBP()
				if j.Deferrable || j.Tier == core.TierOffline {
					mult = min(mult, minMult)
				}
				if v := perHour * mult; best < 0 || v < best {
					best = v
				}
			}
		}
		if best < 0 {
			return 0, fmt.Errorf("job %s: no admissible offer", j.ID)
		}
		milliSec := uint64(j.Request.GPUs) * uint64(j.Request.MilliPerGPU) * uint64(max(j.Shards, 1)) * uint64(w.Actual[j.ID]/time.Second)
		total = total.Add(core.Mul64(uint64(best), milliSec))
	}
	return core.Micros(core.DivHalfEven(total, den*3600, false)), nil
}

// LPBound is the LP relaxation lower bound of w on offers (package
// bound): jobs × markets × hourly slots, each job's work inside its
// window, committed terms bought whole, spot only for interruptible work,
// time-of-use prices where the work runs. It is at least as tight as
// PriceBound in practice; Bound reports the larger of the two.
func LPBound(w *Workload, offers []core.Offer, opt bound.Options) (bound.Result, error) {
	return bound.LP(bound.Input{Jobs: w.Jobs, Actual: w.Actual, Offers: offers}, opt)
}

// Bounds are the lower bounds of one workload on one catalog.
type Bounds struct {
	// Cost is the best lower bound: the larger of Price and LP.Cost (both
	// are lower bounds, so the larger is one too).
	Cost  core.Micros
	Price core.Micros
	LP    bound.Result
}

// Bound computes both lower bounds.
func Bound(w *Workload, offers []core.Offer, tou *core.TimeOfUse, opt bound.Options) (Bounds, error) {
	price, err := PriceBound(w, offers, tou)
	if err != nil {
		return Bounds{}, err
	}
	lp, err := LPBound(w, offers, opt)
	if err != nil {
		return Bounds{}, err
	}
	return Bounds{Cost: max(price, lp.Cost), Price: price, LP: lp}, nil
}
