package bound

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

var start = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// offer8 is an 8-GPU machine: on-demand at 8/h (1 per GPU-hour), spot at
// 2/h, and a daily term at 96 (12 per GPU-day, 0.5 per GPU-hour if used
// all day).
func offer8() core.Offer {
	day := int64(86400)
	return core.Offer{ID: "m8", GPUModel: "A100", GPUs: 8, GPUMemMiB: 40960, Plans: []core.PricePlan{
		{Mode: core.OnDemand, Price: 8_000_000, Per: core.Hour, Granularity: 1},
		{Mode: core.Spot, Price: 2_000_000, Per: core.Hour, Granularity: 1},
		{Mode: core.Daily, Price: 96_000_000, Per: core.Day, Granularity: day, Term: day},
	}}
}

func job(id string, submit time.Duration, gpus int, d time.Duration) *core.Job {
	return &core.Job{ID: id, Tier: core.TierCore, Submit: start.Add(submit), EstDuration: d, Request: core.Request{GPUs: gpus, MilliPerGPU: core.WholeGPU}}
}

func lp(t *testing.T, jobs []*core.Job, offers []core.Offer) Result {
	t.Helper()
	r, err := LP(Input{Jobs: jobs, Offers: offers}, Options{Wait: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(t *testing.T, what string, got core.Micros, want float64) {
	t.Helper()
	if g := got.Float(); g < want*(1-1e-6)-1e-6 || g > want*(1+1e-6)+1e-6 {
		t.Errorf("%s = %s, want %.6f", what, got, want)
	}
}

// A term is paid whole: two hours of 8 GPUs cost 16 on demand, not the
// 8 the daily rate would give if it were used all day.
func TestShortWorkPaysOnDemand(t *testing.T) {
	r := lp(t, []*core.Job{job("a", 0, 8, 2*time.Hour)}, []core.Offer{offer8()})
	near(t, "bound", r.Cost, 16)
}

// A whole day of 8 GPUs is cheapest on the daily term: 96.
func TestFullDayPaysTheTerm(t *testing.T) {
	r := lp(t, []*core.Job{job("a", 0, 8, 24*time.Hour)}, []core.Offer{offer8()})
	near(t, "bound", r.Cost, 96)
}

// Spot is for interruptible work only.
func TestSpotOnlyForInterruptible(t *testing.T) {
	j := job("a", 0, 8, 2*time.Hour)
	near(t, "firm", lp(t, []*core.Job{j}, []core.Offer{offer8()}).Cost, 16)
	j.Interruptible = true
	near(t, "interruptible", lp(t, []*core.Job{j}, []core.Offer{offer8()}).Cost, 4)
}

// Two days of a steady 8 GPUs plus a two-hour burst of 8 more: the base on
// daily terms (2 × 96), the burst on demand (16). The ascent must find
// prices that charge the burst's hours more than the daily rate.
func TestBaseOnTermsBurstOnDemand(t *testing.T) {
	jobs := []*core.Job{job("base", 0, 8, 48*time.Hour), job("burst", 30*time.Hour, 8, 2*time.Hour)}
	r, err := LP(Input{Jobs: jobs, Offers: []core.Offer{offer8()}}, Options{Wait: time.Nanosecond, Iterations: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cost.Float() > 208+1e-6 {
		t.Fatalf("bound %s above the optimum 208", r.Cost)
	}
	if r.Cost.Float() < 0.97*208 {
		t.Errorf("bound %s, want within 3%% of the optimum 208 (start %s)", r.Cost, r.Initial)
	}
	if r.Cost <= r.Initial {
		t.Errorf("the ascent did not improve on the start %s", r.Initial)
	}
}

// Deferrable work may wait for the off-peak hours of its window.
func TestDeferrableUsesOffPeak(t *testing.T) {
	o := offer8()
	o.Plans = o.Plans[:1]
	o.Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: []time.Weekday{0, 1, 2, 3, 4, 5, 6}, StartHour: 22, EndHour: 6, MultiplierBP: 5000}}}
	j := job("a", 12*time.Hour, 8, 2*time.Hour) // noon: peak price
	near(t, "at its time", lp(t, []*core.Job{j}, []core.Offer{o}).Cost, 16)
	j.Deferrable, j.Deadline = true, start.Add(24*time.Hour)
	near(t, "deferred", lp(t, []*core.Job{j}, []core.Offer{o}).Cost, 8)
}

func TestNoAdmissibleOffer(t *testing.T) {
	j := job("big-mem", 0, 1, time.Hour)
	j.Request.MemPerGPUMiB = 1 << 20
	_, err := LP(Input{Jobs: []*core.Job{j}, Offers: []core.Offer{offer8()}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "big-mem") {
		t.Fatalf("err = %v, want one naming the job", err)
	}
}

func TestBadOptions(t *testing.T) {
	_, err := LP(Input{}, Options{Wait: -time.Second})
	var fe *core.FieldError
	if !errors.As(err, &fe) || fe.Field != "wait" {
		t.Fatalf("err = %v, want a field error on wait", err)
	}
}

// A GPU does a slot's length of GPU-hours in a slot: with 2-hour slots a
// whole day of 8 GPUs still costs one daily term (96), not twice that.
// (The bound once priced a term's window of γ per slot, not per GPU-hour,
// and came out above the optimum for slots longer than an hour.)
func TestSlotLength(t *testing.T) {
	for _, slot := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour} {
		r, err := LP(Input{Jobs: []*core.Job{job("a", 0, 8, 24*time.Hour)}, Offers: []core.Offer{offer8()}}, Options{Wait: time.Nanosecond, Slot: slot})
		if err != nil {
			t.Fatal(err)
		}
		near(t, "bound with "+slot.String()+" slots", r.Cost, 96)
	}
}

// A shorter term that is cheaper per hour does not dominate a longer one
// when covering the longer term takes more of it than the longer costs:
// a day of 8 GPUs on a 24-hour term at 100 beats two 16-hour terms at 66
// (132) or one and 8 hours on demand (66 + 64), so the LP must keep the
// 24-hour market (without it the LP's optimum is 130, above what a policy
// renting the day pays). A 24-hour term at 131 is dominated and dropped.
func TestShorterCheaperTermDoesNotDominate(t *testing.T) {
	for _, tc := range []struct {
		day  core.Micros
		kept int
	}{{100_000_000, 2}, {131_000_000, 2}, {132_000_000, 1}} {
		o := offer8()
		o.Plans = []core.PricePlan{o.Plans[0],
			{Mode: core.Daily, Price: tc.day, Per: core.Day, Granularity: 86400, Term: 86400},
			{Mode: core.Weekly, Price: 4_125_000, Per: core.Hour, Granularity: 16 * 3600, Term: 16 * 3600}, // 66 per 16 hours
		}
		r := lp(t, []*core.Job{job("a", 0, 8, 24*time.Hour)}, []core.Offer{o})
		if r.CommittedMarkets != tc.kept {
			t.Errorf("day term at %s: %d committed markets kept, want %d", tc.day, r.CommittedMarkets, tc.kept)
		}
		if want := min(tc.day.Float(), 132); r.Cost.Float() > want+1e-6 {
			t.Errorf("day term at %s: bound %s above the optimum %.0f", tc.day, r.Cost, want)
		}
	}
}

// TestLPProgress: progress comes once per iteration of the ascent, up to
// Iterations, and does not change the bound.
func TestLPProgress(t *testing.T) {
	jobs := []*core.Job{job("a", 0, 8, 3*time.Hour), job("b", time.Hour, 4, 30*time.Hour)}
	in := Input{Jobs: jobs, Offers: []core.Offer{offer8()}}
	plain, err := LP(in, Options{Wait: time.Nanosecond, Iterations: 50})
	if err != nil {
		t.Fatal(err)
	}
	var calls, last int
	got, err := LP(in, Options{Wait: time.Nanosecond, Iterations: 50, Progress: func(done, total int) {
		calls++
		if done != last+1 || total != 50 {
			t.Errorf("progress(%d, %d) after %d, want (%d, 50)", done, total, last, last+1)
		}
		last = done
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 50 || got.Cost != plain.Cost {
		t.Errorf("%d calls, cost %s; want 50 calls and cost %s", calls, got.Cost, plain.Cost)
	}
}
