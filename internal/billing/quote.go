package billing

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// MaxQuoteSpan is the longest span QuoteLease prices: 3650 days. Pricing
// one machine is bounded by the days vouchers cover and the zone changes
// and price points in the span, so the span is the one input the work
// still grows with.
const MaxQuoteSpan = 3650 * 24 * time.Hour

// Quote is the price of renting count machines of one offer in one mode
// over a span, before and after vouchers.
type Quote struct {
	OfferID  string
	Mode     core.BillingMode
	Count    int
	Currency core.Currency
	Start    time.Time
	End      time.Time
	// Bill is one machine's bill; Total is Count machines' bills.
	Bill  Bill
	Total core.Micros
	// Credits is what vouchers cover of Total, Net what remains to pay.
	Credits map[string]core.Micros
	Net     core.Micros
	// ExpectedReclaimsBP is, for spot, the expected number of reclaims of
	// one machine over the billed time, in basis points (2500 = 0.25).
	ExpectedReclaimsBP int64
	// GPUHours is Count × GPUs × billed hours, in milli-GPU-hours.
	PaidMilliGPUHours int64
}

// QuoteLease prices count machines of offer o in mode over s, applying
// vouchers as a ledger metering each machine in daily lines would (see
// Ledger.Meter, DayCuts and Ledger.ApplyVouchers), to the micro-unit.
//
// The machines are identical, so one is priced and the bill multiplied:
// the work does not grow with count. Vouchers round their credit per
// daily line and consume their caps line by line, so credits are worked
// out over one machine's daily lines, and only over the days an eligible
// voucher covers; the count lines of a day are taken in as few batches as
// the caps allow. A span over MaxQuoteSpan, or a count whose total or
// GPU-hours do not fit in int64, is a *core.FieldError.
func QuoteLease(o *core.Offer, mode core.BillingMode, s Span, count int, vouchers []core.Voucher) (Quote, error) {
	p, ok := o.Plan(mode)
	if !ok {
		return Quote{}, &core.FieldError{Field: "mode", Value: string(mode), Allowed: fmt.Sprintf("a mode offer %s is sold in: %v", o.ID, o.Modes())}
	}
	if count < 1 {
		return Quote{}, &core.FieldError{Field: "count", Value: fmt.Sprint(count), Allowed: ">= 1"}
	}
	if s.End.Sub(s.Start) > MaxQuoteSpan {
		return Quote{}, &core.FieldError{Field: "end", Value: s.End.Format(time.RFC3339),
			Allowed: fmt.Sprintf("at most %d days after start %s", MaxQuoteSpan/(24*time.Hour), s.Start.Format(time.RFC3339))}
	}
	b, err := Cost(p, s)
	if err != nil {
		return Quote{}, err
	}
	total, ok := mulInt(int64(b.Amount), int64(count))
	if !ok {
		return Quote{}, &core.FieldError{Field: "count", Value: strconv.Itoa(count),
			Allowed: fmt.Sprintf("at most %d machines: at %s %s each the total must not exceed %s %s", math.MaxInt64/int64(b.Amount), b.Amount, o.Currency, core.Micros(math.MaxInt64), o.Currency)}
	}
	milliGPUs, ok := mulInt(int64(count), int64(o.CapMilli()))
	var paid int64
	if ok {
		paid, ok = mulDiv(milliGPUs, b.Billed, 3600)
	}
	if !ok {
		return Quote{}, &core.FieldError{Field: "count", Value: strconv.Itoa(count),
			Allowed: fmt.Sprintf("a count whose paid GPU-hours (%d milli-GPUs each, %d s billed) fit in int64 milli-GPU-hours", o.CapMilli(), b.Billed)}
	}
	credits := quoteCredits(o, p, s, b, int64(count), vouchers)
	net := core.Micros(total)
	for _, c := range credits {
		net -= c
	}
	q := Quote{
		OfferID: o.ID, Mode: mode, Count: count, Currency: o.Currency,
		Start: s.Start, End: s.End, Bill: b, Total: core.Micros(total), Credits: credits, Net: net,
		PaidMilliGPUHours: paid,
	}
	if p.Reclaim != nil && !s.Reclaimed {
		q.ExpectedReclaimsBP = core.MulDivHalfEven(p.Reclaim.MonthlyRateBP, b.Billed, core.Month.Seconds())
	}
	return q, nil
}

// quoteCredits returns what each voucher credits count identical machines
// of o under p over s, whose one bill is b: what Ledger.ApplyVouchers
// returns for their daily usage lines. Those lines are taken in time
// order and, within a day, machine by machine, all of the same amount;
// consecutive machines get the same credits until a cap runs short, so a
// day's machines are credited in batches, a new batch only where a cap
// binds. The days walked are those an eligible voucher's validity holds.
func quoteCredits(o *core.Offer, p *core.PricePlan, s Span, b Bill, count int64, vs []core.Voucher) map[string]core.Micros {
	used := map[string]core.Micros{}
	filter := core.Offer{Provider: o.Provider, GPUModel: o.GPUModel}
	var elig []*core.Voucher
	var lo, hi time.Time
	for i := range vs {
		v := &vs[i]
		if !v.Eligible(&filter, p.Mode) || !v.ValidFrom.Before(v.ValidTo) {
			continue
		}
		if len(elig) == 0 || v.ValidFrom.Before(lo) {
			lo = v.ValidFrom
		}
		if len(elig) == 0 || v.ValidTo.After(hi) {
			hi = v.ValidTo
		}
		elig = append(elig, v)
	}
	if len(elig) == 0 {
		return used
	}
	ns, _ := normalize(s) // Cost accepted s
	// The ledger's lines start at ns.Start and at each UTC midnight after
	// it; the first one an eligible voucher may take starts at or after lo.
	from := ns.Start
	if from.Before(lo) {
		from = lo.UTC().Truncate(24 * time.Hour)
		if from.Before(lo) {
			from = from.Add(24 * time.Hour)
		}
	}
	r := newRater(p)
	den := r.denominator()
	// A line's amount is the rounded cumulative cost at its end less that
	// at its start, as Split makes it; the fee has a line of its own.
	upto := from
	if upto.After(b.PaidUntil) {
		upto = b.PaidUntil
	}
	acc := r.integral(ns.Start, upto)
	prev := core.Micros(core.DivHalfEven(acc, den, false))
	c := voucherRun{vs: elig, used: used, credit: make([]core.Micros, len(elig)), inLine: map[string]core.Micros{}, before: map[string]core.Micros{}}
	for from.Before(b.PaidUntil) && from.Before(hi) {
		u := from.UTC()
		to := time.Date(u.Year(), u.Month(), u.Day()+1, 0, 0, 0, 0, time.UTC)
		if to.After(b.PaidUntil) {
			to = b.PaidUntil
		}
		acc = acc.Add(r.integral(from, to))
		cur := core.Micros(core.DivHalfEven(acc, den, false))
		if amt := cur - prev; amt > 0 {
			c.lines(amt, from, count)
		}
		prev, from = cur, to
	}
	return used
}

// voucherRun applies vouchers to runs of identical usage lines, keeping
// what each voucher id has credited so far in used.
type voucherRun struct {
	vs     []*core.Voucher
	used   map[string]core.Micros
	credit []core.Micros          // one line's credit per voucher
	inLine map[string]core.Micros // one line's credit per voucher id
	before map[string]core.Micros // scratch: inLine up to a voucher
}

// lines credits n consecutive usage lines of amount amt starting at from,
// as Ledger.ApplyVouchers would one after the other: it works out one
// line's credits, and how many lines in a row get the same ones before a
// cap would cut a credit short, and takes them at once.
func (c *voucherRun) lines(amt core.Micros, from time.Time, n int64) {
	for n > 0 {
		clear(c.inLine)
		clear(c.credit)
		left := amt
		for k, v := range c.vs {
			if left <= 0 {
				break
			}
			if from.Before(v.ValidFrom) || !from.Before(v.ValidTo) {
				continue
			}
			cr := core.Micros(core.MulDivHalfEven(int64(amt), v.ShareBP, bpOne))
			cr = min(cr, left, v.Cap-c.used[v.ID]-c.inLine[v.ID])
			if cr <= 0 {
				continue
			}
			c.credit[k] = cr
			c.inLine[v.ID] += cr
			left -= cr
		}
		// Line j of the batch (from 0) sees its voucher's cap reduced by j
		// lines' credits under that id more than the first line did; its
		// credit is the same while what remains covers it.
		batch := n
		clear(c.before)
		for k, v := range c.vs {
			cr := c.credit[k]
			if cr == 0 {
				continue
			}
			slack := v.Cap - c.used[v.ID] - c.before[v.ID] - cr
			c.before[v.ID] += cr
			batch = min(batch, 1+int64(slack/c.inLine[v.ID]))
		}
		for id, cr := range c.inLine {
			c.used[id] += core.Micros(batch) * cr
		}
		n -= batch
	}
}

// DayCuts returns the local midnights in loc strictly inside (from, to),
// for per-day ledger lines.
func DayCuts(from, to time.Time, loc *time.Location) []time.Time {
	var cuts []time.Time
	lf := from.In(loc)
	for d := time.Date(lf.Year(), lf.Month(), lf.Day()+1, 0, 0, 0, 0, loc); d.Before(to); d = d.AddDate(0, 0, 1) {
		cuts = append(cuts, d)
	}
	return cuts
}

// mulInt returns a*b for a, b >= 0, and false when it does not fit in
// int64.
func mulInt(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// mulDiv returns a*b/c half to even for a, b >= 0 and c > 0, and false
// when it does not fit in int64.
func mulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	if q, _ := bits.Div64(hi, lo, uint64(c)); q >= math.MaxInt64 {
		return 0, false // rounding up could overflow
	}
	return core.MulDivHalfEven(a, b, c), true
}
