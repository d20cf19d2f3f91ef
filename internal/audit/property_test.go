package audit_test

import (
	"fmt"
	. "github.com/gpufleet/gpufleet/internal/audit"
	. "github.com/gpufleet/gpufleet/internal/audit/audittest"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// genInput draws a random workload on the fixed catalog: leases on demand
// or monthly, at most one run per GPU of a lease, samples on some GPUs.
func genInput(t *rapid.T) Input {
	offers := Catalog()
	in := Input{From: Nov, To: Nov.AddDate(0, 1, 0), Period: rapid.SampledFrom([]PeriodKind{Week, Month}).Draw(t, "period"),
		Currency: "USD", Offers: offers, Now: Nov.AddDate(0, 1, 0)}
	teams := []string{"a", "b", "c"}
	nLeases := rapid.IntRange(1, 6).Draw(t, "leases")
	for i := range nLeases {
		o := rapid.SampledFrom(offers).Draw(t, "offer")
		mode := rapid.SampledFrom(o.Modes()).Draw(t, "mode")
		start := Nov.Add(time.Duration(rapid.IntRange(-72, 700).Draw(t, "start")) * time.Hour).Add(time.Duration(rapid.IntRange(0, 3599).Draw(t, "startSec")) * time.Second)
		var end time.Time
		if rapid.Bool().Draw(t, "closed") {
			end = start.Add(time.Duration(rapid.IntRange(1, 400*3600).Draw(t, "length")) * time.Second)
		}
		id := fmt.Sprintf("l%d", i)
		in.Leases = append(in.Leases, Lease{ID: id, OfferID: o.ID, Mode: mode, Start: start, End: end})
		stop := end
		if stop.IsZero() || stop.After(in.Now) {
			stop = in.Now
		}
		// The lease's GPUs in random groups: each group is one job's run
		// (several GPUs: a whole-GPU gang part), some still running.
		for g := 0; g < o.GPUs; {
			size := rapid.IntRange(1, o.GPUs-g).Draw(t, "group")
			gpus := make([]int, size)
			for k := range gpus {
				gpus[k] = g + k
			}
			g += size
			if !rapid.Bool().Draw(t, "used") || !stop.After(start) {
				continue
			}
			span := stop.Sub(start)
			a := start.Add(time.Duration(rapid.Int64Range(0, int64(span/time.Second)).Draw(t, "ra")) * time.Second)
			b := a.Add(time.Duration(rapid.Int64Range(0, int64(stop.Sub(a)/time.Second)).Draw(t, "rb")) * time.Second)
			jid := fmt.Sprintf("j%d-%d", i, g)
			jb := NewJob(jid, rapid.SampledFrom(teams).Draw(t, "team")).Mem(rapid.Int64Range(0, 90000).Draw(t, "mem")).GPUs(size)
			if rapid.Bool().Draw(t, "deferrable") {
				jb = jb.Deferrable()
			}
			if rapid.Bool().Draw(t, "throughput") {
				jb = jb.Throughput("A100-80G", 600, "L4", rapid.IntRange(0, 1000).Draw(t, "l4"), "H100", 1000)
			}
			in.Jobs = append(in.Jobs, jb.Build())
			r := NewRun(jid, id, gpus, a, b)
			if size == 1 {
				r.Milli = core.Milli(rapid.SampledFrom([]int{250, 500, 1000}).Draw(t, "milli"))
			}
			if end.IsZero() && rapid.Bool().Draw(t, "open") {
				r.To = time.Time{} // still running: counts up to Now
			}
			in.Runs = append(in.Runs, r)
			for _, gpu := range gpus {
				if rapid.Bool().Draw(t, "sampled") && b.After(a) {
					util := rapid.IntRange(0, 100).Draw(t, "util")
					mem := rapid.Int64Range(0, o.GPUMemMiB).Draw(t, "memUsed")
					in.Samples = append(in.Samples, Samples(id, gpu, a, b, time.Duration(rapid.IntRange(5, 240).Draw(t, "step"))*time.Minute, util, mem)...)
				}
			}
		}
	}
	return in
}

func TestPropertyInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		r, err := Audit(in)
		if err != nil {
			t.Fatal(err)
		}
		// The bill, independently: each lease's cost in the range.
		var bill core.Micros
		for _, l := range in.Leases {
			o := offerByID(in.Offers, l.OfferID)
			p, _ := o.Plan(l.Mode)
			end := l.End
			if end.IsZero() {
				end = in.Now
			}
			c, err := billing.CostIn(p, billing.Span{Start: l.Start, End: end}, in.From, in.To)
			if err != nil {
				t.Fatal(err)
			}
			bill += c
		}
		if r.Total.Cost != bill {
			t.Fatalf("total cost %s, bill %s", r.Total.Cost, bill)
		}
		for _, p := range r.Periods {
			var cost, alloc, idle core.Micros
			var ms int64
			for _, l := range p.Lines {
				cost += l.Cost
				ms += l.MilliSeconds
				if l.Team == IdleTeam {
					idle += l.Cost
				} else {
					alloc += l.Cost
				}
			}
			s := p.Summary
			if cost != s.Cost || alloc != s.AllocatedCost || idle != s.IdleCost || s.AllocatedCost+s.IdleCost != s.Cost {
				t.Fatalf("%s: lines %s = %s + %s, summary %s = %s + %s", p.Label, cost, alloc, idle, s.Cost, s.AllocatedCost, s.IdleCost)
			}
			if ms != s.PaidMilliSeconds || s.AllocatedMilliSeconds > s.PaidMilliSeconds || s.BusyMilliSeconds > s.AllocatedMilliSeconds {
				t.Fatalf("%s: lines %d ms, paid %d, allocated %d, busy %d", p.Label, ms, s.PaidMilliSeconds, s.AllocatedMilliSeconds, s.BusyMilliSeconds)
			}
			var jobs core.Micros
			for _, j := range p.Jobs {
				jobs += j.Cost
			}
			if jobs != s.AllocatedCost {
				t.Fatalf("%s: jobs cost %s, allocated %s", p.Label, jobs, s.AllocatedCost)
			}
		}
		seen := map[string]bool{}
		for _, x := range r.Recommendations {
			if x.Saving < 0 || x.Saving < r.Config.MinSaving {
				t.Fatalf("%s: saving %s", x.ID, x.Saving)
			}
			if seen[x.ID] {
				t.Fatalf("%s twice", x.ID)
			}
			seen[x.ID] = true
			for _, s := range x.Supersedes {
				if s.Saving > x.Saving {
					t.Fatalf("%s supersedes a larger %s (%s > %s)", x.ID, s.Kind, s.Saving, x.Saving)
				}
			}
		}
		// Per-team reports partition the allocated cost.
		var teams core.Micros
		for _, team := range []string{"a", "b", "c"} {
			in.Team = team
			tr, err := Audit(in)
			if err != nil {
				t.Fatal(err)
			}
			teams += tr.Total.Cost
		}
		if teams != r.Total.AllocatedCost {
			t.Fatalf("teams sum to %s, allocated %s", teams, r.Total.AllocatedCost)
		}
	})
}

func offerByID(os []core.Offer, id string) *core.Offer {
	for i := range os {
		if os[i].ID == id {
			return &os[i]
		}
	}
	return nil
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-11", "2026-11-02", "2026-11-02T08:00:00Z", "2026-11-02T08:00:00.5+08:00", "", "x", "9999-12-31"} {
		f.Add(s)
	}
	sh, _ := time.LoadLocation("Asia/Shanghai")
	f.Fuzz(func(t *testing.T, s string) {
		for _, loc := range []*time.Location{time.UTC, sh} {
			v, err := ParseTime("from", s, loc)
			if err != nil {
				continue
			}
			// What parses is an instant that reads back as itself.
			back, err := ParseTime("from", v.Format(time.RFC3339Nano), loc)
			if err != nil || !back.Equal(v) {
				t.Fatalf("%q -> %v -> %v, %v", s, v, back, err)
			}
		}
	})
}
