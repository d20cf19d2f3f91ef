package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// propCatalog has plans whose prices do not divide evenly and whose
// bills are not proportional to time (a started hour, a minimum charge,
// a committed week), so that rounding and allocation both matter.
func propCatalog() *pricing.Catalog {
	off := func(id string, gpus int, p core.PricePlan) core.Offer {
		return core.Offer{ID: id, Provider: "t", Region: "r", InstanceType: id, GPUModel: "A100", GPUs: gpus, GPUMemMiB: 40960, VCPUs: 8, MemoryMiB: 65536,
			Currency: "USD", Plans: []core.PricePlan{p}}
	}
	return &pricing.Catalog{Currency: "USD", Offers: []core.Offer{
		off("t/r/sec", 2, core.PricePlan{Mode: core.OnDemand, Price: 3_456_789, Per: core.Hour, Granularity: 1}),
		off("t/r/hour", 4, core.PricePlan{Mode: core.OnDemand, Price: 7_000_001, Per: core.Hour, Granularity: 3600}),
		off("t/r/min", 1, core.PricePlan{Mode: core.OnDemand, Price: 1_000_003, Per: core.Hour, Granularity: 60, MinCharge: 600}),
		off("t/r/week", 8, core.PricePlan{Mode: core.Weekly, Price: 450_000_007, Per: core.Week, Granularity: 1, Term: 7 * 86400}),
	}}
}

// TestUsageReportAddsFromStore: for random leases and runs kept in the
// store and random a < b < c, GET /api/v1/reports/usage over [a, b) and
// [b, c) adds up, team by team and for the idle line and the bill, to
// the report over [a, c), to the micro-unit; and each report's lines sum
// to its bill. A run that ended before a range still shapes its lease's
// allocation in that range, so the reports must see every run on a lease
// since it started, not only the runs that overlap the range.
func TestUsageReportAddsFromStore(t *testing.T) {
	dir := t.TempDir()
	cat := propCatalog()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		n++
		st, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("p%d.db", n)), sqlite.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		defer st.Close()
		must := func(err error) {
			if err != nil {
				rt.Fatal(err)
			}
		}
		teams := []string{"a", "b", "c"}
		for _, id := range teams {
			must(st.Teams().CreateTeam(ctx, core.Team{ID: id, Name: id, Weight: 1}))
		}
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		sec := func(label string, lo, hi int64) time.Duration {
			return time.Duration(rapid.Int64Range(lo, hi).Draw(rt, label)) * time.Second
		}
		now := base.Add(sec("now", 3600, 12*3600))
		jobs := 0
		for i := range rapid.IntRange(1, 4).Draw(rt, "leases") {
			// Per-second billing half the time: its bill grows with every
			// second, so its allocation's rounding moves most.
			o := cat.Offers[rapid.SampledFrom([]int{0, 0, 0, 1, 2, 3}).Draw(rt, "offer")]
			id := fmt.Sprintf("L%d", i)
			// Launches fall on any microsecond, as the loop records them.
			start := base.Add(sec("start", 0, 6*3600) + time.Duration(rapid.Int64Range(0, 999_999).Draw(rt, "startus"))*time.Microsecond)
			if !start.Before(now) {
				continue
			}
			l := store.Lease{Lease: core.Lease{ID: id, OfferID: o.ID, Mode: o.Plans[0].Mode, State: core.LeaseRequested, ClientToken: id}, Requested: start}
			must(st.Leases().CreateLease(ctx, l))
			l.State, l.ProviderID = core.LeaseProvisioning, "p-"+id
			must(st.Leases().UpdateLease(ctx, l))
			l.State, l.Start, l.ReadyAt = core.LeaseReady, start, start
			must(st.Leases().UpdateLease(ctx, l))
			end := now
			if rapid.Bool().Draw(rt, "released") {
				end = start.Add(sec("held", 1, 48*3600))
				if end.After(now) {
					end = now
				}
			}
			// Runs one after another, each a job of a random team on the
			// lease's first k GPUs; the last may still be running.
			at := start
			for range rapid.IntRange(0, 4).Draw(rt, "runs") {
				from := at.Add(sec("gap", 0, 3600))
				to := from.Add(sec("len", 1, 3*3600))
				if !from.Before(end) {
					break
				}
				live := false
				if !to.Before(end) {
					to, live = end, end.Equal(now) && l.End.IsZero()
				}
				jobs++
				jid := fmt.Sprintf("j%d", jobs)
				k := rapid.IntRange(1, o.GPUs).Draw(rt, "gpus")
				milli := core.WholeGPU // only single-GPU jobs share a GPU
				if k == 1 {
					milli = core.Milli(rapid.SampledFrom([]int64{250, 500, 1000}).Draw(rt, "milli"))
				}
				team := rapid.SampledFrom(teams).Draw(rt, "team")
				_, _, err := st.Jobs().SubmitJob(ctx, core.Job{ID: jid, Team: team, Tier: core.TierRegular, Request: core.Request{GPUs: k, MilliPerGPU: milli}, Submit: from}, "")
				must(err)
				gpus := make([]int, k)
				for g := range gpus {
					gpus[g] = g
				}
				must(st.Units().SaveUnits(ctx, store.Unit{JobID: jid, State: core.JobRunning, Parts: []store.Part{{LeaseID: id, GPUs: gpus}}, Start: from}))
				if !live {
					must(st.Units().SaveUnits(ctx, store.Unit{JobID: jid, State: core.JobSucceeded, Start: from, End: to}))
				}
				at = to
			}
			if end.Before(now) {
				l.State, l.End = core.LeaseReleased, end
				must(st.Leases().UpdateLease(ctx, l))
			}
		}
		report := usageReporter(rt, st, cat, now)
		costs := func(from, to time.Time) map[string]core.Micros { return reportCosts(rt, report(from, to)) }
		a := base.Add(sec("a", 0, 12*3600))
		b := a.Add(sec("ab", 1, 12*3600))
		c := b.Add(sec("bc", 1, 12*3600))
		whole, sum := addCosts(costs(a, c)), addCosts(costs(a, b), costs(b, c))
		if d := cmp.Diff(whole, sum); d != "" {
			rt.Fatalf("[%s, %s) + [%s, %s) differ from [%s, %s), now %s (-whole +parts):\n%s", a, b, b, c, a, c, now, d)
		}
	})
}

// fataler is what the helpers below need of a *testing.T or *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// usageReporter serves st as of now and returns a function that asks it
// for GET /api/v1/reports/usage over [from, to) as the admin.
func usageReporter(t fataler, st store.Store, cat *pricing.Catalog, now time.Time) func(from, to time.Time) UsageReportView {
	secret, err := EnsureAdminToken(context.Background(), st, clock.NewManual(now))
	if err != nil {
		t.Fatal(err)
	}
	h := New(cat, clock.NewManual(now), slog.New(slog.NewTextHandler(io.Discard, nil)), WithStore(st), WithRateLimit(httpapi.RateLimit{}))
	return func(from, to time.Time) UsageReportView {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/reports/usage?from="+from.Format(time.RFC3339)+"&to="+to.Format(time.RFC3339), nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var v UsageReportView
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Fatalf("report [%s, %s): %d %s", from, to, rec.Code, rec.Body)
		}
		return v
	}
}

// reportCosts maps each team, the idle line ("(idle)") and "(bill)" of an
// admin's report to its cost, and fails t if the lines do not sum to the
// bill.
func reportCosts(t fataler, v UsageReportView) map[string]core.Micros {
	money := func(n json.Number) core.Micros {
		m, err := core.ParseMicros(string(n))
		if err != nil {
			t.Fatalf("amount %q: %v", n, err)
		}
		return m
	}
	m := map[string]core.Micros{"(bill)": money(v.Bill), v.Idle.Team: money(v.Idle.Cost)}
	sum := money(v.Idle.Cost)
	for _, l := range v.Teams {
		m[l.Team] = money(l.Cost)
		sum += money(l.Cost)
	}
	if sum != money(v.Bill) {
		t.Fatalf("report [%s, %s): lines sum to %s, bill %s", v.From, v.To, sum.Decimal(), v.Bill)
	}
	return m
}

// addCosts sums cost maps, leaving out what sums to zero.
func addCosts(ms ...map[string]core.Micros) map[string]core.Micros {
	out := map[string]core.Micros{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// TestUsageReportRunBeforeRange is the smallest case the property above
// found: on a per-second lease held from 00:00:09, team a ran 2 GPUs from
// 00:00:31 to 00:00:41 and half a GPU from 00:00:53 to 00:00:59, team b
// 2 GPUs from 00:04:36 to 00:28:56. Team a's first run ended before the
// second range begins, yet it is part of the lease's allocation at both
// ends of that range; a report that left it out was a micro-unit off.
func TestUsageReportRunBeforeRange(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "u.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cat := propCatalog()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	for _, id := range []string{"a", "b"} {
		must(st.Teams().CreateTeam(ctx, core.Team{ID: id, Name: id, Weight: 1}))
	}
	l := store.Lease{Lease: core.Lease{ID: "L0", OfferID: "t/r/sec", Mode: core.OnDemand, State: core.LeaseRequested, ClientToken: "L0"}, Requested: s(9)}
	must(st.Leases().CreateLease(ctx, l))
	l.State, l.ProviderID = core.LeaseProvisioning, "p-L0"
	must(st.Leases().UpdateLease(ctx, l))
	l.State, l.Start, l.ReadyAt = core.LeaseReady, s(9), s(9)
	must(st.Leases().UpdateLease(ctx, l))
	for _, r := range []struct {
		job, team  string
		gpus       []int
		milli      core.Milli
		start, end int
	}{{"j1", "a", []int{0, 1}, 1000, 31, 41}, {"j2", "a", []int{0}, 500, 53, 59}, {"j3", "b", []int{0, 1}, 1000, 276, 1736}} {
		_, _, err := st.Jobs().SubmitJob(ctx, core.Job{ID: r.job, Team: r.team, Tier: core.TierRegular, Request: core.Request{GPUs: len(r.gpus), MilliPerGPU: r.milli}, Submit: s(r.start)}, "")
		must(err)
		must(st.Units().SaveUnits(ctx, store.Unit{JobID: r.job, State: core.JobRunning, Parts: []store.Part{{LeaseID: "L0", GPUs: r.gpus}}, Start: s(r.start)}))
		must(st.Units().SaveUnits(ctx, store.Unit{JobID: r.job, State: core.JobSucceeded, Start: s(r.start), End: s(r.end)}))
	}
	report := usageReporter(t, st, cat, s(3600))
	whole := addCosts(reportCosts(t, report(s(40), s(51957))))
	parts := addCosts(reportCosts(t, report(s(40), s(49))), reportCosts(t, report(s(49), s(51957))))
	if d := cmp.Diff(whole, parts); d != "" {
		t.Errorf("[00:00:40, 00:00:49) + [00:00:49, 14:25:57) differ from their union (-whole +parts):\n%s", d)
	}
}
