package billing

import (
	"math"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// bpOne is a multiplier of 1 in basis points.
const bpOne = 10_000

const (
	hourSec = 3600
	weekSec = 7 * 24 * hourSec
	// epochWeekday: 1970-01-01 was a Thursday.
	epochWeekday = 4
)

// rater integrates a plan's price over time. The price is piecewise
// constant: it changes at spot series points, and the time-of-use
// multiplier changes only at local hour boundaries. Time is whole Unix
// seconds throughout, so every integral is an exact integer.
type rater struct {
	p *core.PricePlan
	// week is the multiplier for each local hour of the week (index
	// weekday*24+hour), and weekSum their sum, when the plan has windows.
	week    *[168]int64
	weekSum int64
}

func newRater(p *core.PricePlan) rater {
	r := rater{p: p}
	if tou := p.TimeOfUse; tou != nil && len(tou.Windows) > 0 {
		var w [168]int64
		for d := 0; d < 7; d++ {
			for h := 0; h < 24; h++ {
				w[d*24+h] = tou.MultiplierBP(time.Weekday(d), h)
				r.weekSum += w[d*24+h]
			}
		}
		r.week = &w
	}
	return r
}

// denominator is what an integral of price×multiplier×seconds is divided
// by to give micros.
func (r rater) denominator() uint64 { return uint64(r.p.Per.Seconds()) * bpOne }

// priceAt returns the price in effect at Unix second t and the second it
// next changes (math.MaxInt64: never).
func (r rater) priceAt(t int64) (core.Micros, int64) {
	s := r.p.Series
	if len(s) == 0 {
		return r.p.Price, math.MaxInt64
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].At.Unix() > t })
	next := int64(math.MaxInt64)
	if i < len(s) {
		next = s[i].At.Unix()
	}
	if i == 0 {
		return r.p.Price, next
	}
	return s[i-1].Price, next
}

// integral returns Σ price×multiplier×seconds over [from, to), exactly.
// Dividing by denominator gives micros.
func (r rater) integral(from, to time.Time) core.U128 {
	return r.integralSec(from.Unix(), to.Unix())
}

func (r rater) integralSec(from, to int64) core.U128 {
	var acc core.U128
	for t := from; t < to; {
		price, next := r.priceAt(t)
		end := min(to, next)
		if r.week == nil {
			acc = acc.Add(core.Mul64(uint64(price), uint64(end-t)).MulU64(bpOne))
			t = end
			continue
		}
		// Split further where the zone's UTC offset changes (DST).
		at := time.Unix(t, 0).In(r.p.TimeOfUse.Location)
		_, offset := at.Zone()
		if _, zoneEnd := at.ZoneBounds(); !zoneEnd.IsZero() {
			end = min(end, zoneEnd.Unix())
		}
		acc = acc.Add(core.Mul64(uint64(price), r.weekIntegral(t+int64(offset), end+int64(offset))))
		t = end
	}
	return acc
}

// weekIntegral returns Σ multiplier×seconds over local seconds [a, b) at a
// fixed UTC offset: whole weeks in one product, the rest hour by hour.
func (r rater) weekIntegral(a, b int64) uint64 {
	var acc uint64
	if weeks := (b - a) / weekSec; weeks > 0 {
		acc += uint64(weeks) * uint64(r.weekSum) * hourSec
		a += weeks * weekSec
	}
	for a < b {
		hourStart := floorDiv(a, hourSec) * hourSec
		end := min(b, hourStart+hourSec)
		days := floorDiv(a, 86400)
		wd := ((days+epochWeekday)%7 + 7) % 7
		h := (a - days*86400) / hourSec
		acc += uint64(r.week[wd*24+h]) * uint64(end-a)
		a = end
	}
	return acc
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// secondsBetween is the whole seconds in [a, b). Billing times are whole
// seconds (see Span), so this is exact.
func secondsBetween(a, b time.Time) int64 { return b.Unix() - a.Unix() }
