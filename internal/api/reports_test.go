package api

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestUsageReport: one weekly V100x8 lease (450 for the week, incurred at
// its start); team a ran 1 GPU for 2 h (finished), team b runs 1 GPU since
// 2 h (still running); a reading of 50% on a's GPU. A day later the admin
// sees the bill split to the micro-unit with an idle line; a team role
// sees its own line only.
func TestUsageReport(t *testing.T) { testUsageReport(t, newFixture(t)) }

// TestUsageReportPostgres is TestUsageReport on PostgreSQL, where the
// runs come from the PL/pgSQL trigger.
func TestUsageReportPostgres(t *testing.T) { testUsageReport(t, newFixtureOn(t, pgStore(t))) }

func testUsageReport(t *testing.T, f *fixture) {
	ctx := context.Background()
	l := store.Lease{Lease: core.Lease{ID: "L1", OfferID: "idc/cd/v100x8", Mode: core.Weekly, State: core.LeaseRequested, ClientToken: "L1"}, Requested: t0}
	if err := f.st.Leases().CreateLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	l.State, l.ProviderID = core.LeaseProvisioning, "m1"
	if err := f.st.Leases().UpdateLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	l.State, l.Start, l.ReadyAt = core.LeaseReady, t0, t0
	if err := f.st.Leases().UpdateLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	run := func(job string, start time.Time, gpu int) store.Unit {
		return store.Unit{JobID: job, State: core.JobRunning, Parts: []store.Part{{LeaseID: "L1", GPUs: []int{gpu}}}, Start: start}
	}
	for _, u := range []store.Unit{run("ja", h(1), 0), {JobID: "ja", State: core.JobSucceeded, End: h(3)}, run("jb", h(2), 1)} {
		if err := f.st.Units().SaveUnits(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.Samples().InsertSamples(ctx, core.Sample{LeaseID: "L1", GPU: 0, At: h(1), UtilPct: 50}); err != nil {
		t.Fatal(err)
	}
	f.clk.Set(h(24))

	get := func(role, query string) UsageReportView {
		t.Helper()
		code, b, _ := f.call(t, role, "GET", "/api/v1/reports/usage"+query, "")
		var v UsageReportView
		if code != 200 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("%s report%s: %d %s", role, query, code, b)
		}
		return v
	}
	range_ := "?from=" + t0.Format(time.RFC3339) + "&to=" + h(24).Format(time.RFC3339)
	v := get("admin", range_)
	if v.Bill != "450" || v.PaidGPUHours != "1344" || v.Leases != 1 || v.Currency != "CNY" || len(v.Teams) != 2 || v.Idle == nil {
		t.Fatalf("admin report: %+v", v)
	}
	a, b := v.Teams[0], v.Teams[1]
	// 450 × 2/1344 and 450 × 22/1344, to the micro-unit.
	if a.Team != "a" || a.AllocatedGPUHours != "2" || a.Cost != "0.669643" || a.SampledGPUHours != "2" || a.BusyGPUHours != "1" {
		t.Errorf("team a: %+v", a)
	}
	if b.Team != "b" || b.AllocatedGPUHours != "22" || b.Cost != "7.366071" || b.SampledGPUHours != "0" {
		t.Errorf("team b: %+v", b)
	}
	if v.Idle.AllocatedGPUHours != "1320" || v.Idle.Cost != "441.964286" {
		t.Errorf("idle: %+v", v.Idle)
	}
	sum := core.Micros(0)
	for _, l := range append(v.Teams, *v.Idle) {
		m, err := core.ParseMicros(string(l.Cost))
		if err != nil {
			t.Fatal(err)
		}
		sum += m
	}
	if sum != 450*core.MicrosPerUnit {
		t.Errorf("lines sum to %s, want the bill 450", sum.Decimal())
	}
	if v := get("admin", range_+"&team=b"); len(v.Teams) != 1 || v.Teams[0].Team != "b" || v.Bill != "450" {
		t.Errorf("admin, team b: %+v", v)
	}
	for _, role := range []string{"team-admin", "member", "viewer"} {
		v := get(role, range_)
		if len(v.Teams) != 1 || v.Teams[0] != a || v.Bill != "" || v.Idle != nil || v.PaidGPUHours != "" || v.Leases != 0 {
			t.Errorf("%s sees %+v", role, v)
		}
		if v := get(role, range_+"&team=b"); len(v.Teams) != 0 {
			t.Errorf("%s asks for team b: %+v", role, v)
		}
	}
	// A later range: the week was incurred at its start, so in [12 h,
	// 24 h) only b's further use moves money from idle to b; a, whose run
	// ended at 3 h, has no line. After now nothing is incurred.
	v = get("admin", "?from="+h(12).Format(time.RFC3339)+"&to="+h(24).Format(time.RFC3339))
	if v.Bill != "0" || len(v.Teams) != 1 || v.Teams[0].Team != "b" || v.Teams[0].AllocatedGPUHours != "12" || v.Idle == nil ||
		"-"+string(v.Teams[0].Cost) != string(v.Idle.Cost) || v.Teams[0].Cost == "0" {
		t.Errorf("[12 h, 24 h): %+v, idle %+v", v, v.Idle)
	}
	v = get("admin", "?from="+h(24).Format(time.RFC3339)+"&to="+h(48).Format(time.RFC3339))
	if v.Bill != "0" || len(v.Teams) != 0 || v.Idle == nil || v.Idle.Cost != "0" {
		t.Errorf("range after now: %+v", v)
	}
	for q, field := range map[string]string{"?from=yesterday": "from", "?to=" + t0.Format(time.RFC3339) + "&from=" + h(1).Format(time.RFC3339): "to", "?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z": "to"} {
		code, body, _ := f.call(t, "admin", "GET", "/api/v1/reports/usage"+q, "")
		var e httpapi.ErrorBody
		if code != 400 || json.Unmarshal(body, &e) != nil || e.Error.Field != field {
			t.Errorf("%s: %d %s, want 400 field %s", q, code, body, field)
		}
	}
}
