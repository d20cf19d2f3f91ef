package billing

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ChargeKind says what a ledger line is for.
type ChargeKind string

// The kinds of ledger lines.
const (
	// Usage is rental time, committed terms included.
	Usage ChargeKind = "usage"
	// Fee is an early-termination fee.
	Fee ChargeKind = "fee"
	// Credit is a voucher's offset: a negative amount.
	Credit ChargeKind = "credit"
)

// Charge is one line of the ledger.
type Charge struct {
	LeaseID  string
	OfferID  string
	Provider string
	GPUModel string
	Mode     core.BillingMode
	Kind     ChargeKind
	// From and To are the billed time the line covers.
	From, To time.Time
	Amount   core.Micros
	// VoucherID names the voucher of a credit line.
	VoucherID string
}

// Ledger is a list of charges in one currency.
type Ledger struct {
	Currency core.Currency
	Charges  []Charge
}

// Total sums every line, credits included.
func (l *Ledger) Total() core.Micros {
	var t core.Micros
	for _, c := range l.Charges {
		t += c.Amount
	}
	return t
}

// TotalOf sums the lines of one kind.
func (l *Ledger) TotalOf(k ChargeKind) core.Micros {
	var t core.Micros
	for _, c := range l.Charges {
		if c.Kind == k {
			t += c.Amount
		}
	}
	return t
}

// Meter appends the charges of a lease over s to the ledger, one usage
// line per interval between cuts (for example one per day) that holds
// billed time, and a fee line if one is due. It returns the lease's bill.
func (l *Ledger) Meter(o *core.Offer, lease *core.Lease, p *core.PricePlan, s Span, cuts []time.Time) (Bill, error) {
	if o.Currency != l.Currency {
		return Bill{}, &core.FieldError{Field: "currency", Value: string(o.Currency), Allowed: fmt.Sprintf("the ledger's currency %s", l.Currency)}
	}
	parts, b, err := Split(p, s, cuts)
	if err != nil {
		return b, fmt.Errorf("meter lease %s: %w", lease.ID, err)
	}
	base := Charge{LeaseID: lease.ID, OfferID: o.ID, Provider: o.Provider, GPUModel: o.GPUModel, Mode: p.Mode, Kind: Usage}
	ns, _ := normalize(s)
	from := ns.Start
	feeAt := feeIndex(cuts, ns.End)
	for i, amt := range parts {
		to := b.PaidUntil
		if i < len(cuts) && cuts[i].Before(to) {
			to = cuts[i]
		}
		if i == feeAt {
			amt -= b.Fee // Split put the fee in this part; it gets its own line
		}
		if to.After(from) {
			c := base
			c.From, c.To, c.Amount = from, to, amt
			l.Charges = append(l.Charges, c)
			from = to
		}
	}
	if b.Fee != 0 {
		f := base
		f.Kind, f.From, f.To, f.Amount = Fee, ns.End, ns.End, b.Fee
		l.Charges = append(l.Charges, f)
	}
	return b, nil
}

// ApplyVouchers appends a credit line for every usage line a voucher
// covers. Lines are taken in time order (then by lease) so that a cap is
// consumed first by the earliest cost, deterministically. A line is
// eligible when it starts within the voucher's validity and matches its
// filters; several vouchers stack on what earlier ones left uncovered. It
// returns what each voucher credited.
func (l *Ledger) ApplyVouchers(vs []core.Voucher) map[string]core.Micros {
	idx := make([]int, 0, len(l.Charges))
	for i, c := range l.Charges {
		if c.Kind == Usage && c.Amount > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ca, cb := l.Charges[idx[a]], l.Charges[idx[b]]
		if !ca.From.Equal(cb.From) {
			return ca.From.Before(cb.From)
		}
		return ca.LeaseID < cb.LeaseID
	})
	used := map[string]core.Micros{}
	for _, i := range idx {
		c := l.Charges[i]
		left := c.Amount
		for _, v := range vs {
			if left <= 0 {
				break
			}
			o := core.Offer{Provider: c.Provider, GPUModel: c.GPUModel}
			if !v.Eligible(&o, c.Mode) || c.From.Before(v.ValidFrom) || !c.From.Before(v.ValidTo) {
				continue
			}
			credit := core.Micros(core.MulDivHalfEven(int64(c.Amount), v.ShareBP, bpOne))
			credit = min(credit, left, v.Cap-used[v.ID])
			if credit <= 0 {
				continue
			}
			used[v.ID] += credit
			left -= credit
			cr := c
			cr.Kind, cr.Amount, cr.VoucherID = Credit, -credit, v.ID
			l.Charges = append(l.Charges, cr)
		}
	}
	return used
}
