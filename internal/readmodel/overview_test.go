package readmodel

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/readmodel/readmodeltest"
)

// TestBuildOverviewFigures: every figure of the fixture's overview, each
// computed by hand (readmodeltest.Store's comment).
func TestBuildOverviewFigures(t *testing.T) {
	st := readmodeltest.Store(t)
	ov, err := BuildOverview(context.Background(), st, readmodeltest.Catalog(), readmodeltest.Now, "", policy.Default().Idle)
	if err != nil {
		t.Fatal(err)
	}
	u := ov.Utilization
	for _, c := range []struct{ name, got, want string }{
		{"spend_today", string(ov.SpendToday), "38"},
		{"spend_month", string(ov.SpendMonth), "45.2"},
		{"idle_spend_today", string(ov.IdleSpendToday), "37.675"},
		{"idle_spend_month", string(ov.IdleSpendMonth), "44.875"},
		{"allocated_pct", string(u.AllocatedPct), "12.5"},
		// L3's GPU 0 is allocated but its reading is stale; L1's GPUs
		// report but hold nothing: no measured utilization of allocated
		// GPUs to show.
		{"allocated_util_pct", string(u.AllocatedUtilPct), ""},
		{"busy_milli", string(u.BusyMilli), "0"},
		// Today: L1 20 GPU-hours, L3 its paid hour of 2 GPUs.
		{"paid_gpu_hours_today", string(u.PaidGPUHoursToday), "22"},
		{"allocated_gpu_hours_today", string(u.AllocatedGPUHoursToday), "0.325"},
		{"idle_gpu_hours_today", string(u.IdleGPUHoursToday), "21.675"},
		{"allocated_pct_today", string(u.AllocatedPctToday), "1.48"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if u.PaidGPUs != 4 || u.ReadyGPUs != 4 || u.AllocatedMilli != 500 || u.ReportingGPUs != 2 || u.SampledAllocatedGPUs != 0 || u.SampleWindowS != 300 {
		t.Errorf("utilization: %+v", u)
	}
	if len(ov.Fleet) != 1 || ov.Fleet[0] != (FleetModeView{Mode: "on-demand", Leases: 2, GPUs: 4, Ready: 2}) {
		t.Errorf("fleet: %+v", ov.Fleet)
	}
	if d := cmp.Diff([]QueueView{{Tier: "core", Team: "b", Units: 1, GPUMilli: 2000}, {Tier: "offline", Team: "a", Units: 1, GPUMilli: 1000}}, ov.Queue); d != "" {
		t.Errorf("queue (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"core": 1, "regular": 0, "offline": 1}, ov.QueueByTier); d != "" {
		t.Errorf("queue by tier (-want +got):\n%s", d)
	}
	if len(ov.IdleGPUs) != 1 || ov.IdleGPUs[0].Lease != "L1" || ov.IdleGPUs[0].GPU != 0 || ov.IdleGPUs[0].MaxUtilPct != 10 || !ov.IdleGPUs[0].LowSince.Equal(readmodeltest.Now.Add(-40*time.Minute)) {
		t.Errorf("idle GPUs: %+v", ov.IdleGPUs)
	}
	wantJobs := map[string]int{"pending": 3, "admitted": 0, "running": 0, "checkpointing": 0, "preempted": 0, "succeeded": 0, "failed": 0, "cancelled": 0}
	if d := cmp.Diff(wantJobs, ov.Jobs); len(ov.Alerts) != 3 || d != "" {
		t.Errorf("alerts %d, jobs (-want +got):\n%s", len(ov.Alerts), d)
	}
	// Team a: 0.325 of 100 spent over 34 hours of March (744 hours).
	var a *BudgetView
	for i := range ov.Budgets {
		if ov.Budgets[i].Team == "a" {
			a = &ov.Budgets[i]
		}
	}
	if a == nil || a.Budget != "100" || a.Spent != "0.325" || a.Remaining != "99.675" || a.BurnPerHour != "0.009559" || a.Projected != "7.111765" ||
		a.SpentPct != "0.32" || a.Alert || a.Exhausted || a.ExhaustsAt != nil {
		t.Errorf("budget a: %+v", a)
	}

	// A reading of L3's GPU 0 now, at 80%: the allocated half GPU is
	// measured, busy 400 milli-GPUs.
	if err := st.Samples().InsertSamples(context.Background(), core.Sample{LeaseID: "L3", GPU: 0, At: readmodeltest.Now.Add(-time.Minute), UtilPct: 80}); err != nil {
		t.Fatal(err)
	}
	if ov, err = BuildOverview(context.Background(), st, readmodeltest.Catalog(), readmodeltest.Now, "", policy.Default().Idle); err != nil {
		t.Fatal(err)
	}
	if u := ov.Utilization; u.AllocatedUtilPct != "80" || u.BusyMilli != "400" || u.SampledAllocatedGPUs != 1 || u.SampledAllocatedMilli != 500 || u.ReportingGPUs != 3 {
		t.Errorf("utilization with L3 reporting: %+v", u)
	}

	// A team's view: its queue, budget, alerts and jobs; the fleet's spend.
	ta, err := BuildOverview(context.Background(), st, readmodeltest.Catalog(), readmodeltest.Now, "a", policy.Default().Idle)
	if err != nil {
		t.Fatal(err)
	}
	if ta.SpendMonth != ov.SpendMonth || len(ta.Queue) != 1 || ta.Queue[0].Team != "a" || len(ta.Budgets) != 1 || ta.Budgets[0].Team != "a" ||
		len(ta.Alerts) != 1 || ta.Alerts[0].Team != "a" || len(ta.IdleGPUs) != 0 || ta.Jobs["pending"] != 2 || ta.QueueByTier["core"] != 0 {
		t.Errorf("team a's overview: %+v", ta)
	}
}
