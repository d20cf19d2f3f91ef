package billing

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

func hours(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }

const msPerHour = 3600 * 1000 // milli-GPU-seconds in one GPU-hour

// TestUsageReportHourly: one hourly lease of 1 GPU at 10/h held 3 h,
// team a on it for the first 90 minutes, readings every 30 minutes.
func TestUsageReportHourly(t *testing.T) {
	p := plan(core.OnDemand, "10").gran(3600).p
	in := UsageInput{From: t0, To: hours(3), Now: hours(5),
		Leases: []UsageLease{{ID: "L1", Plan: &p, GPUs: 1, Start: t0, End: hours(3)}},
		Runs:   []UsageRun{{Team: "a", LeaseID: "L1", GPUs: []int{0}, MilliPerGPU: 1000, From: t0, To: hours(1.5)}},
		Samples: []core.Sample{
			{LeaseID: "L1", GPU: 0, At: t0, UtilPct: 50}, {LeaseID: "L1", GPU: 0, At: hours(0.5), UtilPct: 50},
			{LeaseID: "L1", GPU: 0, At: hours(1), UtilPct: 100}, {LeaseID: "L1", GPU: 0, At: hours(2), UtilPct: 100},
		}}
	got, err := UsageReport(in)
	if err != nil {
		t.Fatal(err)
	}
	want := UsageTotals{From: t0, To: hours(3), Bill: 30 * core.MicrosPerUnit, Leases: 1, PaidMilliSeconds: 3 * msPerHour,
		Lines: []UsageLine{{Team: "a", Cost: 15 * core.MicrosPerUnit, AllocatedMilliSeconds: 1.5 * msPerHour,
			// 30 min at 50%, 30 min at 50%, 30 min at 100% (the 1:00
			// reading stands until the run ends at 1:30).
			SampledMilliSeconds: 1.5 * msPerHour, BusyMilliSeconds: 1 * msPerHour}},
		Idle: UsageLine{Team: IdleTeam, Cost: 15 * core.MicrosPerUnit, AllocatedMilliSeconds: 1.5 * msPerHour}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("whole range (-want +got):\n%s", d)
	}
	// The first hour: held 1 h, used in full by a.
	in.To = hours(1)
	got, err = UsageReport(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Lines) != 1 || got.Bill != 10*core.MicrosPerUnit || got.Lines[0].Cost != 10*core.MicrosPerUnit || got.Idle.Cost != 0 || got.Idle.AllocatedMilliSeconds != 0 {
		t.Errorf("first hour: %+v", got)
	}
	// A range before the lease and one in the future of Now.
	in.From, in.To = hours(-5), hours(-1)
	if got, err := UsageReport(in); err != nil || got.Bill != 0 || len(got.Lines) != 0 || got.Leases != 0 {
		t.Errorf("before the lease: %+v %v", got, err)
	}
	in.From, in.To = t0, t0
	if _, err := UsageReport(in); err == nil {
		t.Error("an empty range was accepted")
	}
}

// TestUsageReportLive: a lease still held and a run still going are cut at
// Now.
func TestUsageReportLive(t *testing.T) {
	p := plan(core.OnDemand, "8").gran(1).p
	got, err := UsageReport(UsageInput{From: t0, To: hours(100), Now: hours(2),
		Leases: []UsageLease{{ID: "L1", Plan: &p, GPUs: 2, Start: t0}},
		Runs:   []UsageRun{{Team: "b", LeaseID: "L1", GPUs: []int{0, 1}, MilliPerGPU: 500, From: hours(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Bill != 16*core.MicrosPerUnit || got.PaidMilliSeconds != 4*msPerHour || len(got.Lines) != 1 ||
		got.Lines[0].AllocatedMilliSeconds != 1*msPerHour || got.Lines[0].Cost != 4*core.MicrosPerUnit || got.Lines[0].SampledMilliSeconds != 0 {
		t.Errorf("live lease: %+v", got)
	}
}

// TestUsageReportAdds: for any leases and runs, the lines sum to the bill
// to the micro-unit, and two consecutive ranges add up to their union,
// team by team.
func TestUsageReportAdds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var in UsageInput
		n := rapid.IntRange(1, 4).Draw(t, "leases")
		for i := range n {
			p := genPlan(t)
			gpus := rapid.IntRange(1, 8).Draw(t, "gpus")
			start := t0.Add(time.Duration(rapid.Int64Range(0, 72*3600).Draw(t, "start")) * time.Second)
			l := UsageLease{ID: string(rune('A' + i)), Plan: p, GPUs: gpus, Start: start}
			if rapid.Bool().Draw(t, "ended") {
				l.End = start.Add(time.Duration(rapid.Int64Range(1, 72*3600).Draw(t, "held")) * time.Second)
				l.Reclaimed = p.Mode == core.Spot && rapid.Bool().Draw(t, "reclaimed")
			}
			in.Leases = append(in.Leases, l)
			// Runs one after another on GPU 0..gpus-1, never over capacity.
			at := start
			for range rapid.IntRange(0, 3).Draw(t, "runs") {
				from := at.Add(time.Duration(rapid.Int64Range(0, 5*3600).Draw(t, "gap")) * time.Second)
				to := from.Add(time.Duration(rapid.Int64Range(1, 10*3600).Draw(t, "len")) * time.Second)
				if !l.End.IsZero() && to.After(l.End) {
					to = l.End
				}
				if !to.After(from) {
					break
				}
				k := rapid.IntRange(1, gpus).Draw(t, "k")
				g := make([]int, k)
				for j := range g {
					g[j] = j
				}
				in.Runs = append(in.Runs, UsageRun{Team: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "team"), LeaseID: l.ID, GPUs: g,
					MilliPerGPU: core.Milli(rapid.Int64Range(1, 1000).Draw(t, "milli")), From: from, To: to})
				at = to
			}
		}
		in.Now = t0.Add(time.Duration(rapid.Int64Range(0, 200*3600).Draw(t, "now")) * time.Second)
		in.From = t0.Add(-time.Hour)
		mid := t0.Add(time.Duration(rapid.Int64Range(0, 150*3600).Draw(t, "mid")) * time.Second)
		in.To = t0.Add(300 * time.Hour)
		whole, err := UsageReport(in)
		if err != nil {
			t.Fatal(err)
		}
		a, b := in, in
		a.To, b.From = mid, mid
		first, err := UsageReport(a)
		if err != nil {
			t.Fatal(err)
		}
		second, err := UsageReport(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []UsageTotals{whole, first, second} {
			sum := u.Idle.Cost
			for _, l := range u.Lines {
				sum += l.Cost
			}
			if sum != u.Bill {
				t.Fatalf("lines sum to %d, bill %d: %+v", sum, u.Bill, u)
			}
		}
		type tot struct {
			cost core.Micros
			ms   int64
		}
		add := func(us ...UsageTotals) map[string]tot {
			m := map[string]tot{}
			for _, u := range us {
				for _, l := range append(u.Lines, u.Idle) {
					x := m[l.Team]
					x.cost += l.Cost
					x.ms += l.AllocatedMilliSeconds
					m[l.Team] = x
				}
			}
			for k, v := range m {
				if v == (tot{}) {
					delete(m, k)
				}
			}
			return m
		}
		if d := cmp.Diff(add(whole), add(first, second), cmp.AllowUnexported(tot{})); d != "" {
			t.Fatalf("two ranges differ from their union (-whole +parts):\n%s", d)
		}
		if whole.Bill != first.Bill+second.Bill || whole.PaidMilliSeconds != first.PaidMilliSeconds+second.PaidMilliSeconds {
			t.Fatalf("bill %d != %d + %d or paid %d != %d + %d", whole.Bill, first.Bill, second.Bill, whole.PaidMilliSeconds, first.PaidMilliSeconds, second.PaidMilliSeconds)
		}
	})
}

// BenchmarkUsageReport: a month of a 500-machine fleet (8 GPUs each,
// per-second billing), 20 runs per machine (10,000), a reading per GPU a
// day (120,000, about the store's cap on one query):
//
//	go test -run '^$' -bench UsageReport ./internal/billing
func BenchmarkUsageReport(b *testing.B) {
	p := plan(core.OnDemand, "21.958").p
	in := UsageInput{From: t0, To: t0.Add(30 * 24 * time.Hour), Now: t0.Add(31 * 24 * time.Hour)}
	for i := range 500 {
		id := "L" + string(rune('A'+i%26)) + time.Duration(i).String()
		in.Leases = append(in.Leases, UsageLease{ID: id, Plan: &p, GPUs: 8, Start: t0.Add(time.Duration(i) * time.Minute)})
		for r := range 20 {
			from := t0.Add(time.Duration(i)*time.Minute + time.Duration(r)*30*time.Hour)
			in.Runs = append(in.Runs, UsageRun{Team: []string{"a", "b", "c"}[r%3], LeaseID: id, GPUs: []int{r % 8}, MilliPerGPU: 1000, From: from, To: from.Add(20 * time.Hour)})
		}
		for m := 0; m < 30*24*6; m += 6 * 24 {
			for g := range 8 {
				in.Samples = append(in.Samples, core.Sample{LeaseID: id, GPU: g, At: t0.Add(time.Duration(m) * 10 * time.Minute), UtilPct: 40})
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := UsageReport(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUsageReportSlice: a quarter-GPU lease pays 0.25 GPU-hours an hour,
// and a team that fills it half the time pays half the bill.
func TestUsageReportSlice(t *testing.T) {
	p := plan(core.OnDemand, "1").gran(1).p
	got, err := UsageReport(UsageInput{From: t0, To: hours(2), Now: hours(2),
		Leases: []UsageLease{{ID: "L1", Plan: &p, GPUs: 1, SliceMilli: 250, Start: t0, End: hours(2)}},
		Runs:   []UsageRun{{Team: "a", LeaseID: "L1", GPUs: []int{0}, MilliPerGPU: 250, From: t0, To: hours(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Bill != 2*core.MicrosPerUnit || got.PaidMilliSeconds != msPerHour/2 || len(got.Lines) != 1 ||
		got.Lines[0].AllocatedMilliSeconds != msPerHour/4 || got.Lines[0].Cost != core.MicrosPerUnit || got.Idle.Cost != core.MicrosPerUnit {
		t.Errorf("quarter-GPU lease: %+v", got)
	}
}
