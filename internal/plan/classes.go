package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ErrUnknownClass is wrapped by errors for a GPU class that no offer of the
// catalog rents.
var ErrUnknownClass = fmt.Errorf("plan: unknown GPU class")

// ClassPrices is what one GPU of a class (an offer's GPU model) costs, the
// cheapest the catalog's offers give, per GPU: a machine's price divided by
// its GPUs, rounded half to even to a micro-unit.
type ClassPrices struct {
	// GPUModel names the class, as the offers spell it.
	GPUModel string
	// Periods are the on-demand hour and the committed terms, per GPU, for
	// [ChooseTerm]: for each period name the cheapest offer's. Empty when
	// no offer of the class has an on-demand or committed plan.
	Periods []PeriodPrice
	// OnDemand lists the class's on-demand plans, one per offer.
	OnDemand []HourlyRate
	// Spot lists the class's spot plans, one per offer.
	Spot []HourlyRate
}

// HourlyRate is one offer's pay-as-you-go plan (on demand or spot), to be
// priced per GPU-hour at a given instant.
type HourlyRate struct {
	// OfferID names the offer.
	OfferID string
	// GPUs is the offer's GPUs per machine.
	GPUs int
	// Plan is the offer's plan; its time-of-use windows and spot price
	// series apply.
	Plan *core.PricePlan
}

// At returns the price of one GPU for the hour that starts at t: the plan's
// price in effect at t (a spot series point, else Price), per hour, times
// the time-of-use multiplier of t's local weekday and hour, divided by the
// machine's GPUs, half to even. The windows are read as the billing engine
// reads them: the first window containing the hour sets the multiplier; a
// window that wraps past midnight belongs to the weekday it starts on.
func (h HourlyRate) At(t time.Time) core.Micros {
	p := h.Plan
	price := p.Price
	if n := len(p.Series); n > 0 {
		i, _ := slices.BinarySearchFunc(p.Series, t, func(pt core.PricePoint, t time.Time) int { return pt.At.Compare(t) })
		if i < n && p.Series[i].At.Equal(t) {
			price = p.Series[i].Price
		} else if i > 0 {
			price = p.Series[i-1].Price
		}
	}
	mult := int64(bpOne)
	if tou := p.TimeOfUse; tou != nil && tou.Location != nil && len(tou.Windows) > 0 {
		mult = tou.MultiplierAt(t)
	}
	// price × 3600/Per × mult/10000 / GPUs, rounded once. The catalog's
	// bounds keep the product within 128 bits and the result within int64.
	num := core.Mul64(uint64(price), uint64(core.Hour.Seconds())).MulU64(uint64(mult))
	den := uint64(p.Per.Seconds()) * bpOne * uint64(max(1, h.GPUs))
	return core.Micros(core.DivHalfEven(num, den, false))
}

const bpOne = 10_000

// HasTimeOfUse reports whether any on-demand plan of the class has
// time-of-use windows: only then can shifting work in time lower its price.
func (c ClassPrices) HasTimeOfUse() bool {
	for _, r := range c.OnDemand {
		if t := r.Plan.TimeOfUse; t != nil && len(t.Windows) > 0 {
			return true
		}
	}
	return false
}

// Committed returns the class's committed terms (the fixed periods of
// Periods).
func (c ClassPrices) Committed() []PeriodPrice {
	var out []PeriodPrice
	for _, p := range c.Periods {
		if !p.PayAsYouGo() {
			out = append(out, p)
		}
	}
	return out
}

// Period returns the class's price of the named period.
func (c ClassPrices) Period(name string) (PeriodPrice, bool) {
	for _, p := range c.Periods {
		if p.Name == name {
			return p, true
		}
	}
	return PeriodPrice{}, false
}

// Classes groups offers by GPU model and returns each class's prices, in
// the order the models first appear. Offers without GPUs are skipped. An
// invalid plan is an error naming its offer.
func Classes(offers []core.Offer) ([]ClassPrices, error) {
	var out []ClassPrices
	index := map[string]int{}
	for i := range offers {
		o := &offers[i]
		if o.GPUs <= 0 || o.GPUModel == "" {
			continue
		}
		j, ok := index[o.GPUModel]
		if !ok {
			j = len(out)
			index[o.GPUModel] = j
			out = append(out, ClassPrices{GPUModel: o.GPUModel})
		}
		c := &out[j]
		periods, err := PricesFromOffer(o)
		if err != nil {
			return nil, err
		}
		for _, p := range periods {
			// Per whole GPU: a quarter-GPU slice's price times four.
			p.Price = core.Micros(core.MulDivHalfEven(int64(p.Price), int64(core.WholeGPU), int64(o.CapMilli())))
			if k := slices.IndexFunc(c.Periods, func(q PeriodPrice) bool { return q.Name == p.Name }); k >= 0 {
				if p.Price < c.Periods[k].Price {
					c.Periods[k] = p
				}
				continue
			}
			c.Periods = append(c.Periods, p)
		}
		for k := range o.Plans {
			p := &o.Plans[k]
			switch p.Mode {
			case core.OnDemand:
				c.OnDemand = append(c.OnDemand, HourlyRate{OfferID: o.ID, GPUs: o.GPUs, Plan: p})
			case core.Spot:
				c.Spot = append(c.Spot, HourlyRate{OfferID: o.ID, GPUs: o.GPUs, Plan: p})
			}
		}
	}
	for i := range out {
		slices.SortStableFunc(out[i].Periods, func(a, b PeriodPrice) int { return cmpInt(a.Seconds, b.Seconds) })
	}
	return out, nil
}

// FindClass resolves a GPU class name against the known classes: an exact
// match ignoring case, else the one class whose name contains it ("V100"
// for "NVIDIA Tesla V100"). The error wraps [ErrUnknownClass] and lists
// the classes, or the ambiguous candidates.
func FindClass(classes []string, name string) (string, error) {
	want := strings.ToLower(strings.TrimSpace(name))
	if want == "" {
		return "", fmt.Errorf("%w %q: want one of %s", ErrUnknownClass, name, quoteList(classes))
	}
	for _, c := range classes {
		if strings.ToLower(c) == want {
			return c, nil
		}
	}
	var hits []string
	for _, c := range classes {
		if strings.Contains(strings.ToLower(c), want) {
			hits = append(hits, c)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return "", fmt.Errorf("%w %q: the catalog rents %s", ErrUnknownClass, name, quoteList(classes))
	}
	return "", fmt.Errorf("%w %q: ambiguous, matches %s", ErrUnknownClass, name, quoteList(hits))
}

func quoteList(xs []string) string {
	if len(xs) == 0 {
		return "no GPUs"
	}
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
