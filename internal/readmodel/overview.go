package readmodel

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Overview is the dashboard's overview: every figure the page shows, as
// of AsOf. Money is an exact decimal in Currency.
type Overview struct {
	AsOf     time.Time     `json:"as_of"`
	Currency core.Currency `json:"currency"`
	// Team is the team the queue, budgets, alerts, idle GPUs and job
	// counts are limited to (a team token's); empty for the whole fleet.
	Team string `json:"team,omitempty"`
	// DayStart and MonthStart (UTC) begin the windows of the spend figures.
	DayStart   time.Time `json:"day_start"`
	MonthStart time.Time `json:"month_start"`
	// SpendToday and SpendMonth are the fleet's charges incurred in
	// [DayStart, AsOf) and [MonthStart, AsOf): the bill of GET
	// /api/v1/reports/usage over the same range, computed by the same
	// function (billing.UsageReport on LoadUsage, that is ledger.Load),
	// so the two agree to the micro-unit.
	SpendToday json.Number `json:"spend_today"`
	SpendMonth json.Number `json:"spend_month"`
	// IdleSpendToday and IdleSpendMonth are the idle line of those
	// reports: the part of the charges for paid GPU time no unit held,
	// pro rata. A committed term is incurred at its start, so a later
	// range can see its idle spend fall as work uses the term.
	IdleSpendToday json.Number     `json:"idle_spend_today"`
	IdleSpendMonth json.Number     `json:"idle_spend_month"`
	Utilization    UtilizationView `json:"utilization"`
	Fleet          []FleetModeView `json:"fleet"`
	Queue          []QueueView     `json:"queue"`
	// QueueByTier sums Queue's units per tier (every tier present).
	QueueByTier map[string]int  `json:"queue_by_tier"`
	Budgets     []BudgetView    `json:"budgets"`
	Alerts      []OverviewAlert `json:"alerts"`
	IdleGPUs    []IdleGPUView   `json:"idle_gpus"`
	// Jobs counts the jobs (of Team, or all) by state.
	Jobs map[string]int `json:"jobs"`
}

// UtilizationView is how much of what is paid for is used, with the
// definitions of DESIGN.md's metrics: allocated is what units hold, busy
// is allocated × measured utilization. Three windows, each named:
// the live fleet now, the agents' latest readings (the last
// SampleWindowS seconds), and today so far.
type UtilizationView struct {
	// PaidGPUs is the GPUs on live leases (billed from launch).
	PaidGPUs int `json:"paid_gpus"`
	// ReadyGPUs is the GPUs on leases that can take work (ready, draining).
	ReadyGPUs int `json:"ready_gpus"`
	// AllocatedMilli is the milli-GPUs held by running units now.
	AllocatedMilli int64 `json:"allocated_milli"`
	// AllocatedPct is AllocatedMilli over PaidGPUs×1000, in percent (two
	// decimals, half to even); 0 with nothing paid.
	AllocatedPct json.Number `json:"allocated_pct"`

	SampleWindowS int64 `json:"sample_window_seconds"`
	// ReportingGPUs is the GPUs, allocated or not, with a reading in the
	// last SampleWindowS seconds.
	ReportingGPUs int `json:"reporting_gpus"`
	// SampledAllocatedGPUs is the allocated GPUs among them, and
	// SampledAllocatedMilli the milli-GPUs units hold on those.
	SampledAllocatedGPUs  int   `json:"sampled_allocated_gpus"`
	SampledAllocatedMilli int64 `json:"sampled_allocated_milli"`
	// BusyMilli is Σ over those GPUs of the milli-GPUs held × the GPU's
	// latest reading: allocated × measured utilization.
	BusyMilli json.Number `json:"busy_milli"`
	// AllocatedUtilPct is BusyMilli over SampledAllocatedMilli, in
	// percent: the measured utilization of the allocated GPUs. Absent
	// when no allocated GPU has a recent reading (nothing allocated, or
	// its agent silent), so it never stands beside "allocated 0".
	AllocatedUtilPct json.Number `json:"allocated_util_pct,omitempty"`

	// PaidGPUHoursToday, AllocatedGPUHoursToday and IdleGPUHoursToday are
	// the fleet's GPU-hours in [DayStart, AsOf), as GET
	// /api/v1/reports/usage counts them (billed time; idle = paid −
	// allocated); AllocatedPctToday is allocated over paid, in percent.
	PaidGPUHoursToday      json.Number `json:"paid_gpu_hours_today"`
	AllocatedGPUHoursToday json.Number `json:"allocated_gpu_hours_today"`
	IdleGPUHoursToday      json.Number `json:"idle_gpu_hours_today"`
	AllocatedPctToday      json.Number `json:"allocated_pct_today"`
}

// FleetModeView is the live leases of one billing mode.
type FleetModeView struct {
	Mode   string `json:"mode"`
	Leases int    `json:"leases"`
	GPUs   int    `json:"gpus"`
	// Ready counts leases that can take work (ready, draining); Starting
	// those requested or provisioning.
	Ready    int `json:"ready"`
	Starting int `json:"starting"`
}

// QueueView is the units waiting (pending, admitted or preempted) of one
// tier and team.
type QueueView struct {
	Tier  string `json:"tier"`
	Team  string `json:"team"`
	Units int    `json:"units"`
	// GPUMilli is the milli-GPUs they ask for in all.
	GPUMilli int64 `json:"gpu_milli"`
}

// BudgetView is a team's monthly budget, as billing.Budget computes it
// from the team's cost this month: its line of GET /api/v1/reports/usage
// over [MonthStart, AsOf).
type BudgetView struct {
	Team        string      `json:"team"`
	Budget      json.Number `json:"budget"`
	Spent       json.Number `json:"spent"`
	Remaining   json.Number `json:"remaining"`
	BurnPerHour json.Number `json:"burn_per_hour"`
	Projected   json.Number `json:"projected"`
	// SpentPct is Spent/Budget in percent (two decimals); 0 without a
	// budget.
	SpentPct   json.Number `json:"spent_pct"`
	Alert      bool        `json:"alert"`
	Exhausted  bool        `json:"exhausted"`
	ExhaustsAt *time.Time  `json:"exhausts_at,omitempty"`
}

// OverviewAlert is an open alert the store holds.
type OverviewAlert struct {
	ID     int64     `json:"id"`
	Kind   string    `json:"kind"`
	Lease  string    `json:"lease,omitempty"`
	GPU    int       `json:"gpu"`
	Unit   string    `json:"unit,omitempty"`
	Team   string    `json:"team,omitempty"`
	Action string    `json:"action,omitempty"`
	Reason string    `json:"reason"`
	Raised time.Time `json:"raised"`
}

// IdleGPUView is a GPU the control loop holds idle: its open idle-alert,
// the idle ladder's first rung, raised once the GPU's windowed mean
// stayed under the policy's idle.util_pct for idle.for and resolved when
// it works again or its unit or lease ends. The page shows the loop's
// decision; it does not judge idleness by a rule of its own.
type IdleGPUView struct {
	Lease string `json:"lease"`
	GPU   int    `json:"gpu"`
	// Unit and Team are who holds the GPU now; empty if nobody.
	Unit string `json:"unit,omitempty"`
	Team string `json:"team,omitempty"`
	// MaxUtilPct is the highest reading since LowSince that the
	// overview reads (bursts the ladder tolerates included).
	MaxUtilPct int `json:"max_util_pct"`
	// LowSince is when the GPU's idle period began: the alert's raise
	// time less idle.for.
	LowSince time.Time `json:"low_since"`
	// Alert is the open idle-alert's id (GET /api/v1/alerts), Reason its
	// reason.
	Alert  int64  `json:"alert"`
	Reason string `json:"reason"`
}

// SampleWindow is how recent a sample must be to count in the overview's
// utilization and idle GPUs.
const SampleWindow = 5 * time.Minute

// overviewScan is how far back the overview reads samples for idle GPUs
// at least; longer when the idle ladder's first rung needs it.
const overviewScan = 2 * time.Hour

// maxOverviewAlerts bounds the open alerts the overview lists; GET
// /api/v1/alerts pages through all of them.
const maxOverviewAlerts = 10 * store.MaxLimit

// BuildOverview computes the dashboard's overview from the store as of
// now. With team set, the queue, budgets, alerts, idle GPUs and job counts
// are that team's only; spend, utilization and the fleet are the whole
// fleet's (every reader may list the leases). GET /api/v1/overview answers
// exactly this; the dashboard renders it without recomputing anything.
//
// Its cost follows the fleet (live leases, running units, the samples of
// the last two hours or the idle ladder's first rung and 5 minutes if
// longer, this month's leases and runs), never the queue: the waiting
// units and the jobs are counted in the store.
//
// The idle GPUs are the control loop's open idle alerts; idle is the
// idle ladder of the policy it runs, which dates their idle periods.
func BuildOverview(ctx context.Context, st store.Store, cat *pricing.Catalog, now time.Time, team string, idle policy.Idle) (Overview, error) {
	now = now.UTC()
	monthStart, monthEnd := billing.MonthBounds(now, time.UTC)
	dayStart := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	ov := Overview{AsOf: now, Currency: cat.Currency, Team: team, DayStart: dayStart, MonthStart: monthStart,
		Fleet: []FleetModeView{}, Queue: []QueueView{}, QueueByTier: map[string]int{}, Budgets: []BudgetView{},
		Alerts: []OverviewAlert{}, IdleGPUs: []IdleGPUView{}, Jobs: map[string]int{}}
	var (
		live    []store.Lease
		running []store.Run
		waiting []store.WaitingCount
		jobs    map[core.JobState]int
		teams   []core.Team
		alerts  []store.Alert
		usage   ledger.Month
		samples []core.Sample
	)
	err := st.Tx(ctx, func(tx store.Tx) error {
		var err error
		if live, err = tx.Leases().ListLiveLeases(ctx); err != nil {
			return err
		}
		if running, err = tx.Units().ListRunning(ctx); err != nil {
			return err
		}
		if waiting, err = tx.Units().CountWaiting(ctx, team); err != nil {
			return err
		}
		if jobs, err = tx.Jobs().CountJobs(ctx, team); err != nil {
			return err
		}
		if teams, err = tx.Teams().ListTeams(ctx); err != nil {
			return err
		}
		for cursor := ""; ; {
			page, err := tx.Alerts().ListAlerts(ctx, store.AlertFilter{Team: team, OpenOnly: true, Limit: store.MaxLimit, Cursor: cursor})
			if err != nil {
				return err
			}
			alerts = append(alerts, page.Items...)
			if cursor = page.Next; cursor == "" || len(alerts) >= maxOverviewAlerts {
				break
			}
		}
		if usage, err = ledger.LoadMonth(ctx, tx, cat, now); err != nil {
			return err
		}
		// To is exclusive and the store keeps microseconds: a reading
		// taken at now counts.
		samples, err = tx.Samples().QuerySamples(ctx, store.SampleFilter{From: now.Add(-max(overviewScan, time.Duration(idle.For)+SampleWindow)), To: now.Add(time.Microsecond)})
		return err
	})
	if err != nil {
		return Overview{}, fmt.Errorf("overview: %w", err)
	}

	// Spend, idle spend and budgets: the usage report's, month and day;
	// the budgets' spend is the control loop's too (ledger.MonthToDate).
	month, err := usage.Totals()
	if err != nil {
		return Overview{}, fmt.Errorf("overview: %w", err)
	}
	today, err := ledger.Over(usage.Input, dayStart)
	if err != nil {
		return Overview{}, fmt.Errorf("overview: %w", err)
	}
	ov.SpendToday, ov.SpendMonth = Amount(today.Bill), Amount(month.Bill)
	ov.IdleSpendToday, ov.IdleSpendMonth = Amount(today.Idle.Cost), Amount(month.Idle.Cost)
	spent := ledger.Spent(month)
	for _, t := range teams {
		if team != "" && t.ID != team {
			continue
		}
		b := billing.Budget(t, spent[t.ID], monthStart, monthEnd, now)
		bv := BudgetView{Team: t.ID, Budget: Amount(b.Budget), Spent: Amount(b.Spent), Remaining: Amount(b.Remaining),
			BurnPerHour: Amount(b.BurnPerHour), Projected: Amount(b.Projected), SpentPct: Scaled(b.SpentBP, 100), Alert: b.Alert, Exhausted: b.Exhausted}
		if !b.ExhaustsAt.IsZero() {
			at := b.ExhaustsAt.UTC()
			bv.ExhaustsAt = &at
		}
		ov.Budgets = append(ov.Budgets, bv)
	}

	// Fleet by mode and what is paid and allocated now.
	u := &ov.Utilization
	modes := map[core.BillingMode]*FleetModeView{}
	for _, l := range live {
		o, err := cat.Offer(l.OfferID)
		if err != nil {
			return Overview{}, fmt.Errorf("overview: lease %s: %w", l.ID, err)
		}
		m := modes[l.Mode]
		if m == nil {
			m = &FleetModeView{Mode: string(l.Mode)}
			modes[l.Mode] = m
		}
		m.Leases++
		m.GPUs += o.GPUs
		u.PaidGPUs += o.GPUs
		switch l.State {
		case core.LeaseReady, core.LeaseDraining:
			m.Ready++
			u.ReadyGPUs += o.GPUs
		case core.LeaseRequested, core.LeaseProvisioning:
			m.Starting++
		}
	}
	for _, mode := range core.BillingModes {
		if m := modes[mode]; m != nil {
			ov.Fleet = append(ov.Fleet, *m)
		}
	}
	type gpuKey struct {
		lease string
		gpu   int
	}
	holder := map[gpuKey]*store.Run{} // the run on each allocated GPU
	for i := range running {
		r := &running[i]
		for _, part := range r.Parts {
			u.AllocatedMilli += int64(len(part.GPUs)) * int64(r.MilliPerGPU)
			for _, g := range part.GPUs {
				holder[gpuKey{part.LeaseID, g}] = r
			}
		}
	}
	u.AllocatedPct = Pct(u.AllocatedMilli, int64(u.PaidGPUs)*int64(core.WholeGPU))

	// Today's GPU-hours, as the usage report counts them.
	var allocToday int64
	for _, l := range today.Lines {
		allocToday += l.AllocatedMilliSeconds
	}
	u.PaidGPUHoursToday, u.AllocatedGPUHoursToday = GPUHours(today.PaidMilliSeconds), GPUHours(allocToday)
	u.IdleGPUHoursToday = GPUHours(today.Idle.AllocatedMilliSeconds)
	u.AllocatedPctToday = Pct(allocToday, today.PaidMilliSeconds)

	// The queue, counted in the store.
	for _, t := range []core.Tier{core.TierCore, core.TierRegular, core.TierOffline} {
		ov.QueueByTier[string(t)] = 0
	}
	for _, c := range waiting {
		ov.Queue = append(ov.Queue, QueueView{Tier: string(c.Tier), Team: c.Team, Units: c.Units, GPUMilli: c.GPUMilli})
		ov.QueueByTier[string(c.Tier)] += c.Units
	}
	for s, n := range jobs {
		ov.Jobs[string(s)] = n
	}

	// Samples: the allocated GPUs' latest readings, and idle GPUs.
	u.SampleWindowS = int64(SampleWindow / time.Second)
	byGPU := map[gpuKey][]core.Sample{}
	var keys []gpuKey
	for _, sm := range samples {
		k := gpuKey{sm.LeaseID, sm.GPU}
		if byGPU[k] == nil {
			keys = append(keys, k)
		}
		byGPU[k] = append(byGPU[k], sm)
	}
	var busy int64 // Σ milli × utilization percent
	for _, k := range keys {
		all := byGPU[k]
		last := all[len(all)-1]
		if now.Sub(last.At) > SampleWindow {
			continue // the GPU stopped reporting: its lease may be gone
		}
		u.ReportingGPUs++
		run := holder[k]
		if run != nil {
			u.SampledAllocatedGPUs++
			u.SampledAllocatedMilli += int64(run.MilliPerGPU)
			busy += int64(run.MilliPerGPU) * int64(last.UtilPct)
		}
	}
	// Idle GPUs: the loop's open first-rung alerts (the team's, with a
	// team), with the highest reading since the idle period began.
	for _, a := range alerts {
		if a.Kind != "idle-alert" {
			continue
		}
		iv := IdleGPUView{Lease: a.LeaseID, GPU: a.GPU, Unit: a.Unit, Team: a.Team, LowSince: a.Raised.Add(-time.Duration(idle.For)).UTC(), Alert: a.ID, Reason: a.Reason}
		for _, sm := range byGPU[gpuKey{a.LeaseID, a.GPU}] {
			if !sm.At.Before(iv.LowSince) {
				iv.MaxUtilPct = max(iv.MaxUtilPct, sm.UtilPct)
			}
		}
		ov.IdleGPUs = append(ov.IdleGPUs, iv)
	}
	slices.SortFunc(ov.IdleGPUs, func(a, b IdleGPUView) int {
		return cmp.Or(strings.Compare(a.Lease, b.Lease), cmp.Compare(a.GPU, b.GPU), strings.Compare(a.Unit, b.Unit))
	})
	u.BusyMilli = Scaled(busy, 100)
	if u.SampledAllocatedMilli > 0 {
		u.AllocatedUtilPct = Pct(busy, u.SampledAllocatedMilli*100)
	}

	for _, a := range alerts {
		ov.Alerts = append(ov.Alerts, OverviewAlert{ID: a.ID, Kind: a.Kind, Lease: a.LeaseID, GPU: a.GPU, Unit: a.Unit, Team: a.Team,
			Action: a.Action, Reason: a.Reason, Raised: a.Raised.UTC()})
	}
	return ov, nil
}

// Heatmap is mean utilization per GPU and time bucket.
type Heatmap struct {
	AsOf          time.Time `json:"as_of"`
	From          time.Time `json:"from"`
	BucketSeconds int64     `json:"bucket_seconds"`
	Buckets       int       `json:"buckets"`
	GPUs          []HeatRow `json:"gpus"`
}

// HeatRow is one GPU's buckets: the mean of its readings in each (rounded
// half up to a whole percent), null where it sent none.
type HeatRow struct {
	Lease string `json:"lease"`
	GPU   int    `json:"gpu"`
	Cells []*int `json:"cells"`
}

// HeatmapBuckets is the number of columns of the heatmap.
const HeatmapBuckets = 48

// BuildHeatmap buckets the samples of the hours before now.
func BuildHeatmap(ctx context.Context, st store.Store, now time.Time, hours int) (Heatmap, error) {
	now = now.UTC()
	span := time.Duration(hours) * time.Hour
	bucket := span / HeatmapBuckets
	from := now.Add(-span)
	hm := Heatmap{AsOf: now, From: from, BucketSeconds: int64(bucket / time.Second), Buckets: HeatmapBuckets, GPUs: []HeatRow{}}
	samples, err := st.Samples().QuerySamples(ctx, store.SampleFilter{From: from, To: now.Add(time.Microsecond)})
	if err != nil {
		return Heatmap{}, fmt.Errorf("heatmap: %w", err)
	}
	type acc struct{ sum, n [HeatmapBuckets]int }
	rows := map[string]*acc{}
	var keys []string
	idx := map[string][2]any{}
	for _, sm := range samples {
		k := fmt.Sprintf("%s\x00%09d", sm.LeaseID, sm.GPU)
		a := rows[k]
		if a == nil {
			a = &acc{}
			rows[k] = a
			keys = append(keys, k)
			idx[k] = [2]any{sm.LeaseID, sm.GPU}
		}
		b := int(sm.At.Sub(from) / bucket)
		if b < 0 || b >= HeatmapBuckets {
			b = min(max(b, 0), HeatmapBuckets-1)
		}
		a.sum[b] += sm.UtilPct
		a.n[b]++
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := rows[k]
		row := HeatRow{Lease: idx[k][0].(string), GPU: idx[k][1].(int), Cells: make([]*int, HeatmapBuckets)}
		for i := range HeatmapBuckets {
			if a.n[i] > 0 {
				v := (2*a.sum[i] + a.n[i]) / (2 * a.n[i])
				row.Cells[i] = &v
			}
		}
		hm.GPUs = append(hm.GPUs, row)
	}
	return hm, nil
}
