package billing

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestQuoteLease(t *testing.T) {
	o := &core.Offer{ID: "idc/cd/v100x8", Provider: "idc", GPUModel: "V100", GPUs: 8, Currency: "CNY", Plans: []core.PricePlan{
		*plan(core.Weekly, "450").per(core.Week).term(week).build(t),
		*plan(core.Monthly, "1800").per(core.Month).term(month).build(t),
		*plan(core.Spot, "1").gran(1).reclaim(2500).build(t),
	}}
	two := Span{Start: t0, End: at(14 * 24 * time.Hour)}
	q, err := QuoteLease(o, core.Weekly, two, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Total != money("900") || q.Net != money("900") || q.PaidMilliGPUHours != 8*1000*14*24 {
		t.Errorf("weekly quote %+v", q)
	}
	vouchers := []core.Voucher{{ID: "v", ShareBP: 5000, Cap: money("1000"), ValidFrom: t0, ValidTo: t0.AddDate(1, 0, 0)}}
	q, err = QuoteLease(o, core.Monthly, two, 2, vouchers)
	if err != nil {
		t.Fatal(err)
	}
	if q.Total != money("3600") || q.Credits["v"] != money("1000") || q.Net != money("2600") {
		t.Errorf("monthly ×2 with voucher: total %s credits %v net %s", q.Total, q.Credits, q.Net)
	}
	q, _ = QuoteLease(o, core.Spot, Span{Start: t0, End: t0.Add(core.Month.Duration() * 2)}, 1, nil)
	if q.ExpectedReclaimsBP != 5000 {
		t.Errorf("two months of spot at 25%%/month: %d bp reclaims, want 5000", q.ExpectedReclaimsBP)
	}
	if _, err := QuoteLease(o, core.OnDemand, two, 1, nil); err == nil {
		t.Error("quoted a mode the offer does not sell")
	}
	if _, err := QuoteLease(o, core.Weekly, two, 0, nil); err == nil {
		t.Error("quoted zero machines")
	}
}

func TestDayCuts(t *testing.T) {
	sh := loc("Asia/Shanghai")
	from := time.Date(2026, 3, 2, 23, 0, 0, 0, sh)
	cuts := DayCuts(from, from.Add(50*time.Hour), sh)
	if len(cuts) != 3 || !cuts[0].Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, sh)) {
		t.Errorf("DayCuts = %v", cuts)
	}
}

// TestQuoteSlicePaidGPUHours: a quarter-GPU machine pays 0.25 GPU-hours
// an hour, an eighth 0.125.
func TestQuoteSlicePaidGPUHours(t *testing.T) {
	for _, tc := range []struct {
		slice core.Milli
		count int
		want  int64
	}{{250, 1, 250 * 10}, {125, 3, 3 * 125 * 10}, {0, 2, 2 * 1000 * 10}} {
		o := &core.Offer{ID: "cloud/l4", Provider: "cloud", GPUModel: "NVIDIA L4", GPUs: 1, SliceMilli: tc.slice, Currency: "USD",
			Plans: []core.PricePlan{*plan(core.OnDemand, "0.2").gran(1).build(t)}}
		q, err := QuoteLease(o, core.OnDemand, Span{Start: t0, End: at(10 * time.Hour)}, tc.count, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.PaidMilliGPUHours != tc.want {
			t.Errorf("slice %d × %d for 10 h: %d paid milli-GPU-hours, want %d", tc.slice, tc.count, q.PaidMilliGPUHours, tc.want)
		}
	}
}
