package billing

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

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
// vouchers to the daily usage lines as the ledger would.
func QuoteLease(o *core.Offer, mode core.BillingMode, s Span, count int, vouchers []core.Voucher) (Quote, error) {
	p, ok := o.Plan(mode)
	if !ok {
		return Quote{}, &core.FieldError{Field: "mode", Value: string(mode), Allowed: fmt.Sprintf("a mode offer %s is sold in: %v", o.ID, o.Modes())}
	}
	if count < 1 {
		return Quote{}, &core.FieldError{Field: "count", Value: fmt.Sprint(count), Allowed: ">= 1"}
	}
	b, err := Cost(p, s)
	if err != nil {
		return Quote{}, err
	}
	cuts := DayCuts(s.Start, b.PaidUntil, time.UTC)
	l := &Ledger{Currency: o.Currency}
	for i := 0; i < count; i++ {
		lease := &core.Lease{ID: fmt.Sprintf("quote-%d", i), OfferID: o.ID, Mode: mode}
		if _, err := l.Meter(o, lease, p, s, cuts); err != nil {
			return Quote{}, err
		}
	}
	total := l.Total()
	credits := l.ApplyVouchers(vouchers)
	q := Quote{
		OfferID: o.ID, Mode: mode, Count: count, Currency: o.Currency,
		Start: s.Start, End: s.End, Bill: b, Total: total, Credits: credits, Net: l.Total(),
		PaidMilliGPUHours: core.MulDivHalfEven(int64(count)*int64(o.CapMilli()), b.Billed, 3600),
	}
	if p.Reclaim != nil && !s.Reclaimed {
		q.ExpectedReclaimsBP = core.MulDivHalfEven(p.Reclaim.MonthlyRateBP, b.Billed, core.Month.Seconds())
	}
	return q, nil
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
