package apiclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/apiclient"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// TestRoundTrip calls every operation of the generated client against a
// live server and reads each answer strictly as the document describes
// it: a status the document does not list for the operation, or a field
// the server sends that the document's schema lacks, fails. So does a
// route the server has that the generated client cannot call (the
// client is generated from the document, and TestOpenAPIFile keeps the
// document equal to what the server serves).
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(now)
	st, err := sqlite.Open(ctx, t.TempDir()+"/api.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	admin, err := api.EnsureAdminToken(ctx, st, clk)
	if err != nil {
		t.Fatal(err)
	}
	week := core.Week.Seconds()
	cat := &pricing.Catalog{Currency: "USD", Offers: []core.Offer{{
		ID: "idc/cd/v100x8", Provider: "idc", Region: "cd", InstanceType: "v100x8", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "USD",
		Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 8 * core.MicrosPerUnit, Per: core.Hour, Granularity: 1},
			{Mode: core.Weekly, Price: 450 * core.MicrosPerUnit, Per: core.Week, Granularity: week, Term: week},
		},
	}}}
	srv := api.New(cat, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(st),
		api.WithRateLimit(httpapi.RateLimit{}), api.WithAnonymousRateLimit(httpapi.RateLimit{}))
	ts := httptest.NewServer(srv)
	defer ts.Close()

	as := func(token string) *apiclient.ClientWithResponses {
		c, err := apiclient.NewClientWithResponses(ts.URL, apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if token != "" {
				r.Header.Set("Authorization", "Bearer "+token)
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ad, anon := as(admin), as("")
	ptr := func(s string) *string { return &s }

	called := map[string]bool{}
	// check reads one answer strictly; it returns the decoded body of a
	// 2xx answer for the steps that need an id from it.
	check := func(op string, resp any, err error, want int) map[string]any {
		t.Helper()
		called[op] = true
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		v := reflect.ValueOf(resp).Elem()
		hr := v.FieldByName("HTTPResponse").Interface().(*http.Response)
		body := v.FieldByName("Body").Bytes()
		if hr.StatusCode != want {
			t.Errorf("%s: status %d, want %d: %s", op, hr.StatusCode, want, body)
		}
		f := v.FieldByName("JSON" + strconv.Itoa(hr.StatusCode))
		if !f.IsValid() {
			if f = v.FieldByName("JSONDefault"); !f.IsValid() || hr.StatusCode/100 == 2 {
				t.Errorf("%s: the server answered %d, which the document does not list", op, hr.StatusCode)
				return nil
			}
		}
		into := reflect.New(f.Type().Elem())
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into.Interface()); err != nil {
			t.Errorf("%s: the %d answer does not fit the document's schema: %v\n%s", op, hr.StatusCode, err, body[:min(len(body), 400)])
		}
		var out map[string]any
		_ = json.Unmarshal(body, &out)
		return out
	}

	r1, err := anon.HealthWithResponse(ctx)
	check("health", r1, err, 200)
	r2, err := anon.ReadyWithResponse(ctx)
	check("ready", r2, err, 200)
	r3, err := anon.GetOpenAPIWithResponse(ctx)
	check("getOpenAPI", r3, err, 200)
	r4, err := anon.ListOffersWithResponse(ctx, &apiclient.ListOffersParams{Gpu: ptr("V100")})
	check("listOffers", r4, err, 200)
	r5, err := anon.GetOfferWithResponse(ctx, "idc/cd/v100x8")
	check("getOffer", r5, err, 200)
	r6, err := anon.QuoteWithBodyWithResponse(ctx, "application/json",
		strings.NewReader(`{"offer":"idc/cd/v100x8","mode":"weekly","start":"2026-03-02T00:00:00Z","end":"2026-03-16T00:00:00Z"}`))
	check("quote", r6, err, 200)

	r7, err := ad.CreateTeamWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"id":"ml","name":"ML","monthly_budget":"1000"}`))
	check("createTeam", r7, err, 201)
	r8, err := ad.ListTeamsWithResponse(ctx)
	check("listTeams", r8, err, 200)
	rp, err := ad.GetPolicyWithResponse(ctx)
	check("getPolicy", rp, err, 200)
	r9, err := ad.CreateTokenWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"user":"alice","team":"ml","role":"member","name":"alice"}`))
	member := check("createToken", r9, err, 201)
	r10, err := ad.CreateTokenWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"role":"agent","name":"node-1"}`))
	agentTok := check("createToken", r10, err, 201)
	r11, err := ad.ListTokensWithResponse(ctx, &apiclient.ListTokensParams{Team: ptr("ml")})
	check("listTokens", r11, err, 200)

	r12, err := ad.SubmitJobWithBodyWithResponse(ctx, &apiclient.SubmitJobParams{IdempotencyKey: ptr("k1")}, "application/json",
		strings.NewReader(`{"id":"train","team":"ml","user":"alice","tier":"core","gpus":1,"est_duration_seconds":600,"command":["true"]}`))
	check("submitJob", r12, err, 201)
	r13, err := ad.ListJobsWithResponse(ctx, &apiclient.ListJobsParams{Team: ptr("ml"), Limit: ptr("10")})
	check("listJobs", r13, err, 200)
	r14, err := ad.GetJobWithResponse(ctx, "train")
	check("getJob", r14, err, 200)
	r15, err := ad.GetJobLogsWithResponse(ctx, "train", &apiclient.GetJobLogsParams{Tail: ptr("10")})
	check("getJobLogs", r15, err, 200)
	r16, err := ad.CancelJobWithResponse(ctx, "train")
	check("cancelJob", r16, err, 200)
	r17, err := ad.ListLeasesWithResponse(ctx, &apiclient.ListLeasesParams{})
	check("listLeases", r17, err, 200)
	r18, err := ad.ListEventsWithResponse(ctx, &apiclient.ListEventsParams{})
	check("listEvents", r18, err, 200)

	if _, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: "idle-alert", LeaseID: "L1", Team: "ml", Reason: "idle 30 min", Raised: now}); err != nil {
		t.Fatal(err)
	}
	r19, err := ad.ListAlertsWithResponse(ctx, &apiclient.ListAlertsParams{})
	alerts := check("listAlerts", r19, err, 200)
	alertID := "1"
	if items, _ := alerts["alerts"].([]any); len(items) == 1 {
		alertID = strings.TrimSuffix(strings.TrimPrefix(string(mustJSON(t, items[0].(map[string]any)["id"])), `"`), `"`)
	}
	r20, err := ad.AckAlertWithResponse(ctx, alertID)
	check("ackAlert", r20, err, 200)
	r21, err := ad.UsageReportWithResponse(ctx, &apiclient.UsageReportParams{})
	check("usageReport", r21, err, 200)
	r22, err := ad.AuditReportWithResponse(ctx, &apiclient.AuditReportParams{From: ptr("2026-03-01T00:00:00Z"), To: ptr("2026-03-02T00:00:00Z")})
	check("auditReport", r22, err, 200)
	r23, err := ad.GetOverviewWithResponse(ctx)
	check("getOverview", r23, err, 200)
	r24, err := ad.GetHeatmapWithResponse(ctx, &apiclient.GetHeatmapParams{Hours: ptr("6")})
	check("getHeatmap", r24, err, 200)
	r25, err := ad.ListBoundaryLeasesWithResponse(ctx)
	check("listBoundaryLeases", r25, err, 200)

	ag := as(agentTok["secret"].(string))
	r26, err := ag.AgentHeartbeatWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"agent":"node-1","at":"2026-03-02T12:00:00Z"}`))
	check("agentHeartbeat", r26, err, 200)
	r27, err := ad.ListNodesWithResponse(ctx, &apiclient.ListNodesParams{})
	check("listNodes", r27, err, 200)
	r28, err := ag.AgentSamplesWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"agent":"node-1","records":[]}`))
	check("agentSamples", r28, err, 200)
	r29, err := ag.AgentEventsWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"agent":"node-1","records":[]}`))
	check("agentEvents", r29, err, 200)
	r30, err := ag.AgentCommandsWithResponse(ctx, &apiclient.AgentCommandsParams{Agent: ptr("node-1")})
	check("agentCommands", r30, err, 200)
	r31, err := ag.AgentAckCommandWithBodyWithResponse(ctx, "c-none", "application/json", strings.NewReader(`{"agent":"node-1"}`))
	check("agentAckCommand", r31, err, 404)
	r32, err := ag.AgentLogsWithBodyWithResponse(ctx, "application/json", strings.NewReader(`{"agent":"node-1","run":"r-none","offset":0,"data":"aGk="}`))
	check("agentLogs", r32, err, 404)

	// Errors read as the Error schema too.
	r33, err := as("gpf_bogus").ListJobsWithResponse(ctx, &apiclient.ListJobsParams{})
	check("listJobs", r33, err, 401)
	r34, err := as(member["secret"].(string)).ListTeamsWithResponse(ctx)
	check("listTeams", r34, err, 403)
	r35, err := ad.RevokeTokenWithResponse(ctx, member["id"].(string))
	check("revokeToken", r35, err, 200)

	// Every operation of the document was called.
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(mustJSON(t, srv.OpenAPI()), &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if !called[op.OperationID] {
				t.Errorf("%s %s (%s) is not called by this test", strings.ToUpper(method), path, op.OperationID)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
