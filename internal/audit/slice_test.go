package audit_test

import (
	"testing"
	"time"

	. "github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/core"

	. "github.com/gpufleet/gpufleet/internal/audit/audittest"
)

// TestSlicePaidCapacity: a quarter-GPU lease held 10 hours pays 2.5
// GPU-hours, and a job that fills it for 5 of them leaves half idle.
func TestSlicePaidCapacity(t *testing.T) {
	quarter := NewOffer("l4q", "NVIDIA L4", 1, 24576).Hourly("0.2").Build()
	quarter.SliceMilli = 250
	in := Input{From: Nov, To: Nov.AddDate(0, 1, 0), Period: Month, Currency: "USD", Offers: []core.Offer{quarter}, Location: time.UTC}
	in.Jobs = []core.Job{NewJob("serve", "web").Milli(250).Build()}
	in.Leases = []Lease{NewLease("l1", "l4q", core.OnDemand, At(2, 0), At(2, 10))}
	run := NewRun("serve", "l1", []int{0}, At(2, 0), At(2, 5))
	run.Milli = 250
	in.Runs = []Run{run}
	p := mustAudit(t, in).Periods[0]
	if w := int64(10*250) * 3600; p.Summary.PaidMilliSeconds != w {
		t.Errorf("paid %d milli-GPU-seconds, want %d (2.5 GPU-hours)", p.Summary.PaidMilliSeconds, w)
	}
	if p.Summary.IdleCost != Money("1") || p.Summary.Cost != Money("2") {
		t.Errorf("cost %s, idle %s; want 2 and 1", p.Summary.Cost, p.Summary.IdleCost)
	}
}
