package core

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Milli is a share of one GPU in thousandths: 1000 is a whole GPU.
type Milli int64

// WholeGPU is the share of one whole GPU.
const WholeGPU Milli = 1000

// BillingMode is how a lease is paid for.
type BillingMode string

// The billing modes. OnDemand is pay-as-you-go at the plan's granularity;
// Daily, Weekly and Monthly are committed terms of that length, charged in
// full; Spot is interruptible capacity at a (possibly varying) spot price.
const (
	OnDemand BillingMode = "on-demand"
	Spot     BillingMode = "spot"
	Daily    BillingMode = "daily"
	Weekly   BillingMode = "weekly"
	Monthly  BillingMode = "monthly"
)

// BillingModes lists every billing mode.
var BillingModes = []BillingMode{OnDemand, Spot, Daily, Weekly, Monthly}

// ParseBillingMode validates a billing mode name.
func ParseBillingMode(s string) (BillingMode, error) {
	for _, m := range BillingModes {
		if string(m) == s {
			return m, nil
		}
	}
	switch s {
	case "ondemand", "hourly", "od":
		return OnDemand, nil
	}
	return "", &FieldError{Field: "mode", Value: s, Allowed: "one of on-demand, spot, daily, weekly, monthly"}
}

// PricePoint is one step of a price series: from At on, the price is Price
// per the plan's Per period.
type PricePoint struct {
	At    time.Time
	Price Micros
}

// ReclaimModel describes how often a spot lease is taken back and how much
// warning is given.
type ReclaimModel struct {
	// Bucket is the provider's label, e.g. AWS Spot Advisor's ">20%".
	Bucket string
	// MonthlyRateBP is the probability, in basis points, that a lease is
	// reclaimed within a month (730 h) of running.
	MonthlyRateBP int64
	// NoticeSeconds is the warning given before a reclaim (AWS: 120).
	NoticeSeconds int64
}

// Window is one time-of-use window: on the given weekdays, from StartHour
// (inclusive) to EndHour (exclusive) in local time, prices are multiplied
// by MultiplierBP/10000. EndHour <= StartHour wraps past midnight, and the
// weekday is that of the window's start.
type Window struct {
	Weekdays     []time.Weekday
	StartHour    int
	EndHour      int
	MultiplierBP int64
}

// TimeOfUse is a set of windows in one time zone. The first window that
// contains an instant sets its multiplier; outside every window it is 1.
type TimeOfUse struct {
	Location *time.Location
	Windows  []Window
}

// MultiplierBP returns the multiplier in basis points of the first window
// containing local weekday wd and hour h, or 10000 (×1) outside every
// window. A window that wraps past midnight belongs, in its morning part,
// to the weekday it started on.
func (t *TimeOfUse) MultiplierBP(wd time.Weekday, h int) int64 {
	prev := (wd + 6) % 7
	for _, w := range t.Windows {
		if w.StartHour < w.EndHour {
			if h >= w.StartHour && h < w.EndHour && slices.Contains(w.Weekdays, wd) {
				return w.MultiplierBP
			}
			continue
		}
		if h >= w.StartHour && slices.Contains(w.Weekdays, wd) || h < w.EndHour && slices.Contains(w.Weekdays, prev) {
			return w.MultiplierBP
		}
	}
	return 10000
}

// WeekRangeBP returns the lowest and highest multipliers in effect over
// the hours of the week (10000 each for a nil t or one without windows).
func (t *TimeOfUse) WeekRangeBP() (lo, hi int64) {
	if t == nil || len(t.Windows) == 0 {
		return 10000, 10000
	}
	lo, hi = math.MaxInt64, 0
	for d := range 7 {
		for h := range 24 {
			m := t.MultiplierBP(time.Weekday(d), h)
			lo, hi = min(lo, m), max(hi, m)
		}
	}
	return lo, hi
}

// FloorBP is a floor under every multiplier t can apply: the lowest of its
// windows' multipliers and 10000 (×1), so 10000 for a nil t. Bounds use
// it where any hour of the week may be chosen.
func (t *TimeOfUse) FloorBP() int64 {
	m := int64(10000)
	if t != nil {
		for _, w := range t.Windows {
			m = min(m, w.MultiplierBP)
		}
	}
	return m
}

// MultiplierAt returns the multiplier in effect at instant at.
func (t *TimeOfUse) MultiplierAt(at time.Time) int64 {
	lt := at.In(t.Location)
	return t.MultiplierBP(lt.Weekday(), lt.Hour())
}

// EarlyTermination is a committed plan's rule for leaving before the term
// ends: the used time is charged at the plan's pro-rata rate, rounded up to
// Granularity seconds, plus Fee. Without such a rule the full term is due.
type EarlyTermination struct {
	Granularity int64
	Fee         Micros
}

// PricePlan is one way to pay for an offer.
type PricePlan struct {
	Mode BillingMode
	// Price is what one Per period costs (for Spot: the price before the
	// first point of Series, or the fixed spot price).
	Price Micros
	Per   Period
	// Granularity is the billing increment in seconds: a started increment
	// is charged in full. 1 is per-second billing.
	Granularity int64
	// MinCharge is the least billed time in seconds.
	MinCharge int64
	// Term is the committed length in seconds (0: none). A committed term
	// is charged in full whether used or not.
	Term             int64
	EarlyTermination *EarlyTermination
	Series           []PricePoint
	Reclaim          *ReclaimModel
	TimeOfUse        *TimeOfUse
}

// Validate reports the first problem with p.
func (p *PricePlan) Validate() error {
	if _, err := ParseBillingMode(string(p.Mode)); err != nil {
		return err
	}
	if p.Price < 0 {
		return &FieldError{Field: "price", Value: p.Price.String(), Allowed: "a price >= 0"}
	}
	if p.Per.Seconds() == 0 {
		return &FieldError{Field: "per", Value: string(p.Per), Allowed: "one of second, minute, hour, day, week, month"}
	}
	if p.Granularity <= 0 {
		return &FieldError{Field: "granularity", Value: fmt.Sprint(p.Granularity), Allowed: "a positive number of seconds"}
	}
	if p.MinCharge < 0 {
		return &FieldError{Field: "min_charge", Value: fmt.Sprint(p.MinCharge), Allowed: "seconds >= 0"}
	}
	if p.Term < 0 {
		return &FieldError{Field: "term", Value: fmt.Sprint(p.Term), Allowed: "seconds >= 0"}
	}
	if et := p.EarlyTermination; et != nil {
		if et.Granularity <= 0 {
			return &FieldError{Field: "early_termination.granularity", Value: fmt.Sprint(et.Granularity), Allowed: "a positive number of seconds"}
		}
		if et.Fee < 0 {
			return &FieldError{Field: "early_termination.fee", Value: et.Fee.String(), Allowed: "a fee >= 0"}
		}
	}
	for i, pt := range p.Series {
		if pt.Price < 0 {
			return &FieldError{Field: fmt.Sprintf("series[%d].price", i), Value: pt.Price.String(), Allowed: "a price >= 0"}
		}
		if i > 0 && !pt.At.After(p.Series[i-1].At) {
			return &FieldError{Field: fmt.Sprintf("series[%d].at", i), Value: pt.At.Format(time.RFC3339), Allowed: "times in increasing order"}
		}
	}
	if r := p.Reclaim; r != nil {
		if r.MonthlyRateBP < 0 || r.MonthlyRateBP > 10000 {
			return &FieldError{Field: "reclaim.monthly_rate", Value: fmt.Sprint(r.MonthlyRateBP), Allowed: "basis points 0..10000"}
		}
		if r.NoticeSeconds < 0 {
			return &FieldError{Field: "reclaim.notice", Value: fmt.Sprint(r.NoticeSeconds), Allowed: "seconds >= 0"}
		}
	}
	if t := p.TimeOfUse; t != nil {
		if t.Location == nil {
			return &FieldError{Field: "time_of_use.timezone", Value: "", Allowed: "an IANA time zone such as Asia/Shanghai"}
		}
		for i, w := range t.Windows {
			if w.StartHour < 0 || w.StartHour > 23 {
				return &FieldError{Field: fmt.Sprintf("time_of_use.windows[%d].start", i), Value: fmt.Sprint(w.StartHour), Allowed: "an hour 0..23"}
			}
			if w.EndHour < 0 || w.EndHour > 24 {
				return &FieldError{Field: fmt.Sprintf("time_of_use.windows[%d].end", i), Value: fmt.Sprint(w.EndHour), Allowed: "an hour 0..24"}
			}
			if w.MultiplierBP < 0 || w.MultiplierBP > 1_000_000 {
				return &FieldError{Field: fmt.Sprintf("time_of_use.windows[%d].multiplier", i), Value: fmt.Sprint(w.MultiplierBP), Allowed: "basis points 0..1000000 (0x..100x)"}
			}
			if len(w.Weekdays) == 0 {
				return &FieldError{Field: fmt.Sprintf("time_of_use.windows[%d].weekdays", i), Value: "", Allowed: "at least one weekday"}
			}
		}
	}
	return nil
}

// Committed reports whether p is a committed term.
func (p *PricePlan) Committed() bool { return p.Term > 0 }

// Offer is what a provider rents: one machine type in one region, with the
// ways to pay for it.
type Offer struct {
	// ID is unique in a catalog, by convention provider/region/instance_type.
	ID           string
	Provider     string
	Region       string
	InstanceType string
	GPUModel     string
	// GPUs is the number of GPUs per machine; 1 for a GPU slice.
	GPUs int
	// SliceMilli, when above 0, makes a machine a slice of one GPU: that
	// many milli-GPUs of it (250: a quarter-GPU VM) and the same share of
	// its memory. 0 is whole GPUs.
	SliceMilli Milli
	// GPUMemMiB is the memory of each (whole) GPU.
	GPUMemMiB int64
	VCPUs     int
	MemoryMiB int64
	Currency  Currency
	Plans     []PricePlan
	// Accelerator is the accelerators' family; empty is NVIDIA.
	Accelerator Accelerator
	// Capability is the most demanding workload they run; empty is
	// Training.
	Capability Capability
}

// MilliPerGPU is the share of each of its GPUs a machine of o has: a
// whole GPU, or its slice.
func (o *Offer) MilliPerGPU() Milli {
	if o.SliceMilli > 0 {
		return o.SliceMilli
	}
	return WholeGPU
}

// CapMilli is the GPU capacity of one machine of o in milli-GPUs: what
// paid GPU-hours count (a quarter-GPU VM pays 0.25 GPU-hours an hour).
func (o *Offer) CapMilli() Milli { return Milli(o.GPUs) * o.MilliPerGPU() }

// MemPerGPUMiB is the GPU memory a machine of o gives a job on one GPU:
// all of it, or the slice's share.
func (o *Offer) MemPerGPUMiB() int64 { return sliceMem(o.GPUMemMiB, o.SliceMilli) }

// Hardware is what of o decides which jobs may run on it.
func (o *Offer) Hardware() Hardware {
	return Hardware{Accelerator: o.Accelerator, Capability: o.Capability, GPUModel: o.GPUModel, MemPerGPUMiB: o.MemPerGPUMiB(), SliceMilli: o.SliceMilli}
}

// sliceMem is the memory of a slice of slice milli-GPUs (0: whole) of a
// GPU with mem MiB, rounded down so that slices never add up to more than
// the GPU.
func sliceMem(mem int64, slice Milli) int64 {
	if slice <= 0 || slice >= WholeGPU {
		return mem
	}
	return mem * int64(slice) / int64(WholeGPU)
}

// Plan returns the offer's plan for mode.
func (o *Offer) Plan(mode BillingMode) (*PricePlan, bool) {
	for i := range o.Plans {
		if o.Plans[i].Mode == mode {
			return &o.Plans[i], true
		}
	}
	return nil, false
}

// ShortestCommitted is the offer's committed plan with the shortest term
// (nil: it has none): what a committed machine of the offer renews on
// when no longer term pays (fleet.RenewalTerm).
func (o *Offer) ShortestCommitted() *PricePlan {
	var short *PricePlan
	for i := range o.Plans {
		if p := &o.Plans[i]; p.Committed() && (short == nil || p.Term < short.Term) {
			short = p
		}
	}
	return short
}

// Modes lists the billing modes the offer can be rented in.
func (o *Offer) Modes() []BillingMode {
	out := make([]BillingMode, 0, len(o.Plans))
	for _, p := range o.Plans {
		out = append(out, p.Mode)
	}
	return out
}

// Voucher is a subsidy such as a compute voucher: it covers ShareBP/10000
// of eligible cost incurred in [ValidFrom, ValidTo), up to Cap in total.
// Empty filters match everything.
type Voucher struct {
	ID        string
	ShareBP   int64
	Cap       Micros
	ValidFrom time.Time
	ValidTo   time.Time
	Providers []string
	GPUModels []string
	Modes     []BillingMode
}

// Eligible reports whether a charge on offer o in mode m may use v.
func (v *Voucher) Eligible(o *Offer, m BillingMode) bool {
	return matches(v.Providers, o.Provider) && matches(v.GPUModels, o.GPUModel) && matches(v.Modes, m)
}

func matches[T comparable](set []T, x T) bool {
	if len(set) == 0 {
		return true
	}
	for _, s := range set {
		if s == x {
			return true
		}
	}
	return false
}
