package fleet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

var now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func offers() []core.Offer {
	hour, week := int64(3600), core.Week.Seconds()
	return []core.Offer{
		{ID: "a100-od", GPUModel: "A100", GPUs: 1, Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 4_000_000, Per: core.Hour, Granularity: hour},
			{Mode: core.Spot, Price: 1_500_000, Per: core.Hour, Granularity: 1, Reclaim: &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}},
			{Mode: core.Weekly, Price: 400_000_000, Per: core.Week, Granularity: week, Term: week},
		}},
		{ID: "v100-od", GPUModel: "V100", GPUs: 1, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: hour}}},
	}
}

func demandFor(id string, tier core.Tier, est time.Duration, interruptible bool, models ...string) Demand {
	j := &core.Job{ID: id, Team: "t", Tier: tier, EstDuration: est, Interruptible: interruptible, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU, Models: models}}
	return Demand{Unit: sched.Unit{Job: j}, Since: now.Add(-2 * time.Hour)}
}

func TestAcquireChoosesCheapestPerUsefulGPUHour(t *testing.T) {
	tests := []struct {
		name     string
		d        Demand
		budget   *Budget
		offer    string
		mode     core.BillingMode
		acquired bool
	}{
		{"short A100 job: on-demand hour", demandFor("a", core.TierRegular, 2*time.Hour, false, "A100"), nil, "a100-od", core.OnDemand, true},
		{"interruptible: spot, rework included", demandFor("b", core.TierRegular, 2*time.Hour, true, "A100"), nil, "a100-od", core.Spot, true},
		{"a week of A100: the weekly term", demandFor("c", core.TierRegular, 7*24*time.Hour, false, "A100"), nil, "a100-od", core.Weekly, true},
		{"any model: the cheaper V100", demandFor("d", core.TierRegular, 2*time.Hour, false), nil, "v100-od", core.OnDemand, true},
		{"budget cap stops it", demandFor("e", core.TierRegular, 2*time.Hour, false, "A100"), &Budget{Limit: 10_000_000, Spent: 5_000_000}, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			budgets := map[string]Budget{}
			if tc.budget != nil {
				budgets["t"] = *tc.budget
			}
			acq := Acquire(now, []Demand{tc.d}, nil, offers(), budgets, 0, nil, nil, Config{})
			if !tc.acquired {
				if len(acq) != 0 {
					t.Fatalf("acquired %+v past the budget", acq)
				}
				return
			}
			if len(acq) != 1 || acq[0].Offer.ID != tc.offer || acq[0].Mode != tc.mode || acq[0].Reason == "" {
				t.Fatalf("acquired %+v, want one %s %s", acq, tc.offer, tc.mode)
			}
		})
	}
}

func TestAcquireWaitsForTargetAndCountsProvisioning(t *testing.T) {
	d := demandFor("a", core.TierOffline, time.Hour, false)
	d.Since = now.Add(-10 * time.Minute) // offline target is an hour
	if acq := Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, nil, Config{}); len(acq) != 0 {
		t.Errorf("acquired before the offline wait target: %+v", acq)
	}
	if acq := Acquire(now, []Demand{d}, nil, offers(), nil, 9000, nil, nil, Config{}); len(acq) != 1 {
		t.Errorf("utilization above scale-out did not acquire ahead of the target: %+v", acq)
	}
	o := offers()[1]
	booting := Machine{Lease: &core.Lease{ID: "L1", Mode: core.OnDemand, State: core.LeaseProvisioning}, Offer: &o, Plan: &o.Plans[0]}
	d.Since = now.Add(-2 * time.Hour)
	if acq := Acquire(now, []Demand{d}, []Machine{booting}, offers(), nil, 0, nil, nil, Config{}); len(acq) != 0 {
		t.Errorf("acquired again while a machine for it boots: %+v", acq)
	}
}

// Acquire rents only for waiting work: without any it decides nothing,
// whatever the fleet's utilization, the machines on their way or the
// outlook — the engine relies on this to skip it at most steps.
func TestAcquireNothingWithoutDemand(t *testing.T) {
	o := offers()[1]
	booting := Machine{Lease: &core.Lease{ID: "L1", Mode: core.OnDemand, State: core.LeaseProvisioning}, Offer: &o, Plan: &o.Plans[0]}
	out := NewOutlook(now, []DemandPoint{{At: now.Add(-6 * time.Hour), Milli: 64000}}, nil)
	for _, util := range []int64{0, 9000, 10000} {
		if acq := Acquire(now, nil, []Machine{booting}, offers(), map[string]Budget{"a": {Limit: 1}}, util, out, nil, Config{}); len(acq) != 0 {
			t.Errorf("utilization %d bp, no demand: acquired %+v", util, acq)
		}
	}
}

// A deadline rules out offers that cannot finish in time while another
// can; when none can, the one that finishes first is rented (a late job,
// never one that waits forever: found by the simulator's property test,
// where a deferrable job with a deadline shorter than provisioning never
// ran).
func TestAcquireDeadline(t *testing.T) {
	d := demandFor("a", core.TierCore, time.Hour, false)
	d.Unit.Job.Deadline = now.Add(time.Hour + 2*time.Minute)
	// The V100 is cheaper but boots in 5 minutes; the A100 in 1.
	cfg := Config{ProvisioningDelay: map[string]time.Duration{"v100-od": 5 * time.Minute, "a100-od": time.Minute}}
	acq := Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, nil, cfg)
	if len(acq) != 1 || acq[0].Offer.ID != "a100-od" || strings.Contains(acq[0].Reason, "deadline") {
		t.Errorf("want the A100 that makes the deadline, got %+v", acq)
	}
	// Neither makes it: the one that finishes first, and the reason says so.
	cfg.ProvisioningDelay["a100-od"] = 4 * time.Minute
	acq = Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, nil, cfg)
	if len(acq) != 1 || acq[0].Offer.ID != "a100-od" || !strings.Contains(acq[0].Reason, "no admissible offer can finish by the deadline") {
		t.Errorf("want the earliest finish past the deadline, got %+v", acq)
	}
	// A deadline already passed still gets a machine.
	d.Unit.Job.Deadline = now.Add(-time.Hour)
	if acq := Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, nil, cfg); len(acq) != 1 {
		t.Errorf("a job past its deadline was not given a machine: %+v", acq)
	}
}

func TestReleases(t *testing.T) {
	o := offers()[0]
	mk := func(id string, plan int, start time.Time) Machine {
		return Machine{Lease: &core.Lease{ID: id, Mode: o.Plans[plan].Mode, Start: start, State: core.LeaseReady}, Offer: &o, Plan: &o.Plans[plan], ReadyAt: start, IdleSince: start.Add(10 * time.Minute)}
	}
	ms := []Machine{
		mk("hourly-early", 0, now.Add(-20*time.Minute)), // paid until +40m: kept
		mk("hourly-due", 0, now.Add(-59*time.Minute)),   // boundary in 1m: released
		mk("weekly", 2, now.Add(-3*24*time.Hour)),       // inside its term: kept
		mk("spot-idle", 1, now.Add(-time.Hour)),         // per-second, idle 50m: released
		mk("spot-fresh", 1, now.Add(-12*time.Minute)),   // idle 2m: kept (hysteresis)
	}
	got := map[string]bool{}
	for _, r := range Releases(now, ms, nil, Config{}) {
		got[r.LeaseID] = !r.Keep
		if r.Why() == "" {
			t.Errorf("%s: no reason", r.LeaseID)
		}
		if r.LeaseID == "weekly" && !strings.Contains(r.Why(), "never released early") {
			t.Errorf("weekly: %s", r.Why())
		}
	}
	want := map[string]bool{"hourly-early": false, "hourly-due": true, "weekly": false, "spot-idle": true, "spot-fresh": false}
	for id, rel := range want {
		if got[id] != rel {
			t.Errorf("%s released=%v, want %v", id, got[id], rel)
		}
	}
}

func TestOnReclaimNoticeFallsBack(t *testing.T) {
	rs := OnReclaimNotice(now, now.Add(2*time.Minute), []SpotUnit{
		{Unit: "fresh", Reclaims: 0, Remaining: time.Hour},
		{Unit: "unlucky", Reclaims: 2, Remaining: time.Hour},
		{Unit: "late", Reclaims: 0, Remaining: 3 * time.Hour, Deadline: now.Add(4 * time.Hour)},
	}, Config{})
	want := map[string]bool{"fresh": false, "unlucky": true, "late": true}
	for _, r := range rs {
		if r.NoSpot != want[r.Unit] {
			t.Errorf("%s NoSpot=%v: %s", r.Unit, r.NoSpot, r.Reason)
		}
	}
}

func TestLadderZombieFiresOncePerEpisode(t *testing.T) {
	var state map[string]LadderState
	var kinds []string
	for m := 0; m <= 40; m++ {
		at := now.Add(time.Duration(m) * time.Minute)
		noProc := m < 30 // the process comes back at minute 30
		var alerts []Alert
		state, alerts = Ladder(at, []GPUReading{{LeaseID: "L1", GPU: 0, Unit: "u", Team: "t", UtilPct: 0, At: at, NoProcess: noProc}}, state, Config{})
		for _, a := range alerts {
			kinds = append(kinds, fmt.Sprintf("%d:%s", m, a.Kind))
		}
	}
	// Zombie at minute 10 (no process for 10 minutes), once; no idle rungs
	// while it is a zombie; after the process returns the GPU is merely
	// idle, and the idle alert needs 30 low minutes counted from minute 0.
	want := []string{"10:zombie", "30:idle-alert"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("alerts %v, want %v", kinds, want)
	}
}

func TestLadderSharedGPUsHaveOneLadderPerUnit(t *testing.T) {
	var state map[string]LadderState
	alerts := map[string]int{}
	for m := 0; m <= 31; m++ {
		at := now.Add(time.Duration(m) * time.Minute)
		// Two notebooks share GPU 0; only "idle" is idle.
		readings := []GPUReading{
			{LeaseID: "L1", GPU: 0, Unit: "idle", Team: "t", UtilPct: 5, At: at},
			{LeaseID: "L1", GPU: 0, Unit: "busy", Team: "t", UtilPct: 90, At: at},
		}
		var as []Alert
		state, as = Ladder(at, readings, state, Config{})
		for _, a := range as {
			alerts[a.Unit+" "+a.Kind]++
		}
	}
	if alerts["idle idle-alert"] != 1 || len(alerts) != 1 {
		t.Errorf("alerts %v, want one idle alert for the idle unit only", alerts)
	}
}

// A gang larger than any machine rents its machines once: while they
// boot, the next steps count them as its capacity (found on the Helios
// trace, where a 160-GPU job rented twenty 8-GPU machines seven times).
// The same holds with NoPacking (the autostop baseline).
func TestAcquireGangOnceWhileBooting(t *testing.T) {
	o8 := []core.Offer{{ID: "v100x8", GPUModel: "V100", GPUs: 8, Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 8_000_000, Per: core.Hour, Granularity: 1}}}}
	for _, cfg := range []Config{{}, {NoPacking: true}} {
		d := demandFor("gang", core.TierCore, time.Hour, false)
		d.Unit.Job.Request.GPUs = 20
		acq := Acquire(now, []Demand{d}, nil, o8, nil, 0, nil, nil, cfg)
		if len(acq) != 3 {
			t.Fatalf("NoPacking=%v: a 20-GPU gang on 8-GPU machines rented %d machines, want 3", cfg.NoPacking, len(acq))
		}
		var booting []Machine
		for i, a := range acq {
			booting = append(booting, Machine{Lease: &core.Lease{ID: fmt.Sprint("L", i), Mode: a.Mode, State: core.LeaseProvisioning}, Offer: a.Offer, Plan: &a.Offer.Plans[0], For: a.For})
		}
		if again := Acquire(now.Add(time.Minute), []Demand{d}, booting, o8, nil, 0, nil, nil, cfg); len(again) != 0 {
			t.Errorf("NoPacking=%v: rented %d more machines while the gang's three boot", cfg.NoPacking, len(again))
		}
		// Another unit: it shares the room left on the machines booting
		// for the gang, unless each unit gets machines of its own.
		other := demandFor("other", core.TierCore, time.Hour, false)
		want := 0
		if cfg.NoPacking {
			want = 1
		}
		if got := Acquire(now.Add(time.Minute), []Demand{d, other}, booting, o8, nil, 0, nil, nil, cfg); len(got) != want {
			t.Errorf("NoPacking=%v: another unit rented %d machines, want %d", cfg.NoPacking, len(got), want)
		}
	}
}

// A unit displaced from a term longer than the outlook that was rented
// for it (it waits again while that term is in force) does not price
// another such term on its own estimate where the offer has a shorter
// one: it takes the shorter term. Where there is none, or the first term
// has ended, its estimate prices the long term as for any unit.
func TestAcquireDisplacedUnitTakesShorterTerm(t *testing.T) {
	day, month := core.Day.Seconds(), core.Month.Seconds()
	offer := func(plans ...core.PricePlan) core.Offer {
		return core.Offer{ID: "v100", GPUModel: "V100", GPUs: 1, Plans: append([]core.PricePlan{
			{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 3600}}, plans...)}
	}
	daily := core.PricePlan{Mode: core.Daily, Price: 30_000_000, Per: core.Day, Granularity: day, Term: day}
	monthly := core.PricePlan{Mode: core.Monthly, Price: 700_000_000, Per: core.Month, Granularity: month, Term: month}
	d := demandFor("long", core.TierRegular, 30*24*time.Hour, false)
	held := func(o *core.Offer, state core.LeaseState, forUnit string) []Machine {
		return []Machine{{Lease: &core.Lease{ID: "L1", Mode: core.Monthly, State: state, Start: now.Add(-3 * 24 * time.Hour)},
			Offer: o, Plan: &o.Plans[len(o.Plans)-1], ReadyAt: now.Add(-3 * 24 * time.Hour), AllocMilli: core.WholeGPU, For: []string{forUnit}}}
	}
	tests := []struct {
		name     string
		offer    core.Offer
		state    core.LeaseState
		forUnit  string
		wantMode core.BillingMode
	}{
		{"not displaced: its month", offer(daily, monthly), core.LeaseReady, "other", core.Monthly},
		{"displaced: the day", offer(daily, monthly), core.LeaseReady, d.Unit.Key(), core.Daily},
		{"displaced, no shorter term: the month", offer(monthly), core.LeaseReady, d.Unit.Key(), core.Monthly},
		{"the month rented for it has ended", offer(daily, monthly), core.LeaseReleased, d.Unit.Key(), core.Monthly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.offer
			acq := Acquire(now, []Demand{d}, held(&o, tc.state, tc.forUnit), []core.Offer{o}, nil, 0, nil, nil, Config{})
			if len(acq) != 1 || acq[0].Mode != tc.wantMode {
				t.Fatalf("acquired %+v, want one %s", acq, tc.wantMode)
			}
		})
	}
}

// RentCost is what renting for a unit alone costs per useful GPU-hour,
// the cheapest of pay-as-you-go and committed terms of at most the
// outlook (a day), when that is a term or the run lasts the outlook; terms
// longer than a day are left out of it, cheaper or not. 0 otherwise, and
// when nothing admits the unit.
func TestRentCost(t *testing.T) {
	day, week := core.Day.Seconds(), 7*core.Day.Seconds()
	onDemand := core.PricePlan{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 1}
	daily := core.PricePlan{Mode: core.Daily, Price: 24_000_000, Per: core.Day, Granularity: day, Term: day}
	weekly := core.PricePlan{Mode: core.Weekly, Price: 100_000_000, Per: core.Week, Granularity: week, Term: week}
	offer := func(plans ...core.PricePlan) []core.Offer {
		return []core.Offer{{ID: "v100", GPUModel: "V100", GPUs: 1, Plans: plans}}
	}
	for _, tc := range []struct {
		name   string
		offers []core.Offer
		est    time.Duration
		want   core.Micros
	}{
		// Three days: 72.00 in daily terms over 72 GPU-hours.
		{"long run, a daily term is cheapest", offer(onDemand, daily), 72 * time.Hour, 1_000_000},
		{"short run: on demand is cheapest, not held", offer(onDemand, daily), 2 * time.Hour, 0},
		{"a day's run, on demand is cheapest", offer(onDemand), 24 * time.Hour, 2_000_000},
		{"no term at all", offer(onDemand), 72 * time.Hour, 2_000_000},
		// Two weeks: 200.00 in weekly terms over 336 GPU-hours, below the
		// daily terms' 336.00 — but a week is longer than the outlook: the
		// daily terms still hold it off 2.00 an hour on demand.
		{"the cheapest term is longer than a day", offer(onDemand, daily, weekly), 14 * 24 * time.Hour, 1_000_000},
		{"only a term longer than a day", offer(onDemand, weekly), 14 * 24 * time.Hour, 2_000_000},
		{"nothing admits it", nil, time.Hour, 0},
	} {
		d := demandFor("u", core.TierCore, tc.est, false)
		if got := RentCost(now, d, tc.offers, nil, Config{}); got != tc.want {
			t.Errorf("%s: RentCost %s, want %s", tc.name, got, tc.want)
		}
	}
}
