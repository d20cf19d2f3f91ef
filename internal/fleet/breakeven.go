package fleet

import "github.com/gpufleet/gpufleet/internal/core"

// GPUHour is plan p's price of one GPU of o for an hour (a quarter-GPU
// slice's price times four).
func GPUHour(p *core.PricePlan, o *core.Offer) core.Micros {
	hourly := core.MulDivHalfEven(int64(p.Price), 3600, p.Per.Seconds())
	return core.Micros(hourly * int64(core.WholeGPU) / int64(max(o.CapMilli(), 1)))
}

// BreakEvenBP is the share of a committed term, in basis points, that
// demand must need a machine of o under plan p for the term to cost no
// more than renting a machine as large (one that holds the same gangs)
// on demand whenever it is needed: the term's price per GPU-hour over
// the cheapest on-demand price per GPU-hour among offers with at least
// o's GPUs. Below it the term loses to paying by the hour of use,
// whatever else it is compared with. 0 when nothing that large is rented
// on demand; at most 10000.
func BreakEvenBP(o *core.Offer, p *core.PricePlan, offers []core.Offer) int64 {
	var cheapest core.Micros
	for i := range offers {
		od := &offers[i]
		if od.GPUs < o.GPUs {
			continue
		}
		for j := range od.Plans {
			if q := &od.Plans[j]; q.Mode == core.OnDemand {
				if c := GPUHour(q, od); cheapest == 0 || c < cheapest {
					cheapest = c
				}
			}
		}
	}
	if cheapest == 0 {
		return 0
	}
	return min(core.MulDivHalfEven(int64(GPUHour(p, o)), 10000, int64(cheapest)), 10000)
}
