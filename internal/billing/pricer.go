package billing

import "github.com/gpufleet/gpufleet/internal/core"

// Pricer prices as Cost does, keeping the weekly time-of-use table of the
// last tariff it met. Building that table (the multiplier of each of the
// week's 168 hours) was most of the cost of pricing a short span under a
// tariff, and the callers that price many spans — the deferral trying
// every start hour of a week, the fleet pricing every offer for every
// waiting unit — price them under one or two tariffs. It knows a tariff
// by its pointer, so a tariff must not change while a Pricer is used with
// it. The zero value is ready; a Pricer serves one caller at a time.
type Pricer struct {
	tou     *core.TimeOfUse
	week    *[168]int64
	weekSum int64
}

// Cost is billing.Cost(p, s).
func (pr *Pricer) Cost(p *core.PricePlan, s Span) (Bill, error) {
	return cost(pr.rater(p), s)
}

func (pr *Pricer) rater(p *core.PricePlan) rater {
	tou := p.TimeOfUse
	if tou == nil || len(tou.Windows) == 0 {
		return rater{p: p}
	}
	if tou != pr.tou || pr.week == nil {
		r := newRater(p)
		pr.tou, pr.week, pr.weekSum = tou, r.week, r.weekSum
		return r
	}
	return rater{p: p, week: pr.week, weekSum: pr.weekSum}
}
