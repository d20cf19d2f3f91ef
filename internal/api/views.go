package api

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/readmodel"
)

// QuoteView is the JSON form of a quote.
type QuoteView struct {
	Offer    string           `json:"offer"`
	Mode     core.BillingMode `json:"mode"`
	Count    int              `json:"count"`
	Currency core.Currency    `json:"currency"`
	Start    time.Time        `json:"start"`
	End      time.Time        `json:"end"`
	// Total is the bill for all machines before vouchers.
	Total json.Number `json:"total"`
	// PerMachine is one machine's bill, Usage and Fee its parts.
	PerMachine    json.Number            `json:"per_machine"`
	Usage         json.Number            `json:"usage"`
	Fee           json.Number            `json:"fee"`
	Credits       map[string]json.Number `json:"credits,omitempty"`
	Net           json.Number            `json:"net"`
	UsedSeconds   int64                  `json:"used_seconds"`
	BilledSeconds int64                  `json:"billed_seconds"`
	PaidUntil     time.Time              `json:"paid_until"`
	PaidGPUHours  json.Number            `json:"paid_gpu_hours"`
	// ExpectedReclaims is, for spot, the expected reclaims per machine.
	ExpectedReclaims json.Number `json:"expected_reclaims,omitempty"`
}

// NewQuoteView renders q.
func NewQuoteView(q billing.Quote) QuoteView {
	v := QuoteView{
		Offer: q.OfferID, Mode: q.Mode, Count: q.Count, Currency: q.Currency,
		Start: q.Start.UTC(), End: q.End.UTC(),
		Total: readmodel.Amount(q.Total), PerMachine: readmodel.Amount(q.Bill.Amount), Usage: readmodel.Amount(q.Bill.Usage), Fee: readmodel.Amount(q.Bill.Fee),
		Net: readmodel.Amount(q.Net), UsedSeconds: q.Bill.Used, BilledSeconds: q.Bill.Billed, PaidUntil: q.Bill.PaidUntil.UTC(),
		PaidGPUHours: readmodel.Scaled(q.PaidMilliGPUHours, 1000),
	}
	if len(q.Credits) > 0 {
		v.Credits = map[string]json.Number{}
		for id, c := range q.Credits {
			v.Credits[id] = readmodel.Amount(c)
		}
	}
	if q.ExpectedReclaimsBP > 0 {
		v.ExpectedReclaims = readmodel.Scaled(q.ExpectedReclaimsBP, 10000)
	}
	return v
}

// OfferView is the JSON form of an offer, as the API serves it and
// "catalog list --json" prints it; money is an exact decimal number.
type OfferView struct {
	ID           string `json:"id"`
	Provider     string `json:"provider"`
	Region       string `json:"region"`
	InstanceType string `json:"instance_type"`
	GPUModel     string `json:"gpu_model"`
	GPUs         int    `json:"gpus"`
	// SliceMilli is set for a GPU slice: the share of its one GPU, in
	// milli-GPUs (250: a quarter-GPU machine).
	SliceMilli int64 `json:"slice_milli,omitempty"`
	// GPUMemMiB is the memory of each whole GPU (a slice has its share).
	GPUMemMiB int64         `json:"gpu_memory_mib"`
	VCPUs     int           `json:"vcpus"`
	MemoryMiB int64         `json:"memory_mib"`
	Currency  core.Currency `json:"currency"`
	Plans     []PlanView    `json:"plans"`
	// Accelerator is the accelerators' family and Capability the most
	// demanding workload they run (training also serves inference).
	Accelerator core.Accelerator `json:"accelerator"`
	Capability  core.Capability  `json:"capability"`
}

// PlanView is the JSON form of one price plan of an offer.
type PlanView struct {
	Mode        core.BillingMode `json:"mode"`
	Price       json.Number      `json:"price"`
	Per         core.Period      `json:"per"`
	Granularity int64            `json:"granularity_seconds"`
	MinCharge   int64            `json:"min_charge_seconds,omitempty"`
	Term        int64            `json:"term_seconds,omitempty"`
	// HourlyEquivalent is the price per machine-hour.
	HourlyEquivalent json.Number           `json:"hourly_equivalent"`
	EarlyTermination *EarlyTerminationView `json:"early_termination,omitempty"`
	Series           []PricePointView      `json:"series,omitempty"`
	ReclaimBucket    string                `json:"reclaim_bucket,omitempty"`
	Reclaim          *ReclaimView          `json:"reclaim,omitempty"`
	TimeOfUse        bool                  `json:"time_of_use,omitempty"`
	TimeZone         string                `json:"time_zone,omitempty"`
	Windows          []WindowView          `json:"time_of_use_windows,omitempty"`
}

// EarlyTerminationView is a committed plan's early-termination terms.
type EarlyTerminationView struct {
	Granularity int64       `json:"granularity_seconds"`
	Fee         json.Number `json:"fee"`
}

// PricePointView is one point of a plan's price series.
type PricePointView struct {
	At    time.Time   `json:"at"`
	Price json.Number `json:"price"`
}

// ReclaimView is a spot plan's reclaim model.
type ReclaimView struct {
	Bucket        string `json:"bucket,omitempty"`
	MonthlyRateBP int64  `json:"monthly_rate_bp"`
	NoticeSeconds int64  `json:"notice_seconds"`
}

// WindowView is one time-of-use window and its price multiplier.
type WindowView struct {
	Weekdays     []string `json:"weekdays"`
	StartHour    int      `json:"start_hour"`
	EndHour      int      `json:"end_hour"`
	MultiplierBP int64    `json:"multiplier_bp"`
}

// NewOfferView renders o.
func NewOfferView(o *core.Offer) OfferView {
	v := OfferView{ID: o.ID, Provider: o.Provider, Region: o.Region, InstanceType: o.InstanceType, GPUModel: o.GPUModel,
		GPUs: o.GPUs, SliceMilli: int64(o.SliceMilli), GPUMemMiB: o.GPUMemMiB, VCPUs: o.VCPUs, MemoryMiB: o.MemoryMiB, Currency: o.Currency, Plans: []PlanView{},
		Accelerator: o.Accelerator.Or(), Capability: o.Capability.Or()}
	for _, p := range o.Plans {
		pv := PlanView{Mode: p.Mode, Price: readmodel.Amount(p.Price), Per: p.Per, Granularity: p.Granularity, MinCharge: p.MinCharge, Term: p.Term,
			HourlyEquivalent: readmodel.Amount(core.Micros(core.MulDivHalfEven(int64(p.Price), 3600, p.Per.Seconds())))}
		if et := p.EarlyTermination; et != nil {
			pv.EarlyTermination = &EarlyTerminationView{Granularity: et.Granularity, Fee: readmodel.Amount(et.Fee)}
		}
		for _, pt := range p.Series {
			pv.Series = append(pv.Series, PricePointView{At: pt.At.UTC(), Price: readmodel.Amount(pt.Price)})
		}
		if r := p.Reclaim; r != nil {
			pv.ReclaimBucket = r.Bucket
			pv.Reclaim = &ReclaimView{Bucket: r.Bucket, MonthlyRateBP: r.MonthlyRateBP, NoticeSeconds: r.NoticeSeconds}
		}
		if t := p.TimeOfUse; t != nil {
			pv.TimeOfUse, pv.TimeZone = true, t.Location.String()
			for _, w := range t.Windows {
				days := make([]string, len(w.Weekdays))
				for i, d := range w.Weekdays {
					days[i] = strings.ToLower(d.String()[:3])
				}
				pv.Windows = append(pv.Windows, WindowView{Weekdays: days, StartHour: w.StartHour, EndHour: w.EndHour, MultiplierBP: w.MultiplierBP})
			}
		}
		v.Plans = append(v.Plans, pv)
	}
	return v
}
