package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

func testCatalog() *pricing.Catalog {
	week := core.Week.Seconds()
	month := core.Month.Seconds()
	return &pricing.Catalog{Currency: "CNY", Offers: []core.Offer{{
		ID: "idc/cd/v100x8", Provider: "idc", Region: "cd", InstanceType: "v100x8", GPUModel: "V100", GPUs: 8, GPUMemMiB: 32768, Currency: "CNY",
		Plans: []core.PricePlan{
			{Mode: core.Weekly, Price: 450_000_000, Per: core.Week, Granularity: week, Term: week},
			{Mode: core.Monthly, Price: 1_800_000_000, Per: core.Month, Granularity: month, Term: month},
		},
	}}}
}

func newTest(t *testing.T) *httptest.Server {
	t.Helper()
	s := New(testCatalog(), clock.NewManual(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestQuoteSeedCase(t *testing.T) {
	ts := newTest(t)
	for mode, want := range map[string]string{"weekly": "900", "monthly": "1800"} {
		code, body := do(t, "POST", ts.URL+"/api/v1/quote", `{"offer":"idc/cd/v100x8","mode":"`+mode+`","start":"2026-03-02T00:00:00Z","end":"2026-03-16T00:00:00Z"}`)
		if code != 200 {
			t.Fatalf("%s: %d %s", mode, code, body)
		}
		var v struct {
			Total    json.Number `json:"total"`
			Currency string      `json:"currency"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if string(v.Total) != want || v.Currency != "CNY" {
			t.Errorf("%s: total %s %s, want %s CNY", mode, v.Total, v.Currency, want)
		}
	}
}

func TestErrors(t *testing.T) {
	ts := newTest(t)
	tests := []struct {
		name, method, path, body string
		code                     int
		errCode, field           string
	}{
		{"unknown offer", "POST", "/api/v1/quote", `{"offer":"nope","mode":"weekly","start":"2026-03-02T00:00:00Z","end":"2026-03-03T00:00:00Z"}`, 400, "invalid_argument", "offer"},
		{"end before start", "POST", "/api/v1/quote", `{"offer":"idc/cd/v100x8","mode":"weekly","start":"2026-03-02T00:00:00Z","end":"2026-03-01T00:00:00Z"}`, 400, "invalid_argument", "end"},
		{"mode not sold", "POST", "/api/v1/quote", `{"offer":"idc/cd/v100x8","mode":"spot","start":"2026-03-02T00:00:00Z","end":"2026-03-03T00:00:00Z"}`, 400, "invalid_argument", "mode"},
		{"bad mode", "POST", "/api/v1/quote", `{"offer":"idc/cd/v100x8","mode":"yearly","start":"2026-03-02T00:00:00Z","end":"2026-03-03T00:00:00Z"}`, 400, "invalid_argument", "mode"},
		{"wrong type", "POST", "/api/v1/quote", `{"offer":"idc/cd/v100x8","count":"two"}`, 400, "invalid_argument", "count"},
		{"unknown field", "POST", "/api/v1/quote", `{"ofer":"x"}`, 400, "invalid_json", ""},
		{"not json", "POST", "/api/v1/quote", `offer=x`, 400, "invalid_json", ""},
		{"too large", "POST", "/api/v1/quote", `{"offer":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, 413, "too_large", ""},
		{"no route", "GET", "/api/v1/nothing", ``, 404, "not_found", ""},
		{"unknown offer id", "GET", "/api/v1/offers/idc/cd/nope", ``, 404, "not_found", "id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, tc.method, ts.URL+tc.path, tc.body)
			var e httpapi.ErrorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("not a JSON error: %s", body)
			}
			if code != tc.code || e.Error.Code != tc.errCode || e.Error.Field != tc.field || e.Error.Message == "" {
				t.Errorf("got %d %+v, want %d %s field %q", code, e.Error, tc.code, tc.errCode, tc.field)
			}
		})
	}
}

func TestOffersAndMetrics(t *testing.T) {
	ts := newTest(t)
	code, body := do(t, "GET", ts.URL+"/api/v1/offers/idc/cd/v100x8", "")
	if code != 200 || !bytes.Contains(body, []byte(`"hourly_equivalent": 2.678571`)) {
		t.Errorf("offer: %d %s", code, body)
	}
	code, body = do(t, "GET", ts.URL+"/api/v1/offers?gpu=a100", "")
	if code != 200 || !bytes.Contains(body, []byte(`"offers": []`)) {
		t.Errorf("filtered offers: %d %s", code, body)
	}
	code, body = do(t, "GET", ts.URL+"/metrics", "")
	if code != 200 || !bytes.Contains(body, []byte(`gpufleet_http_requests_total{code="200",route="GET /api/v1/offers/{id...}"} 1`)) || !bytes.Contains(body, []byte("gpufleet_catalog_offers 1")) {
		t.Errorf("metrics: %d %s", code, body)
	}
}

// TestOpenAPIInSync checks that the OpenAPI document lists exactly the
// routes the server has and that every route has its body types described.
func TestOpenAPIInSync(t *testing.T) {
	ts := newTest(t)
	code, body := do(t, "GET", ts.URL+"/api/v1/openapi.json", "")
	if code != 200 {
		t.Fatal(code)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for p, ops := range doc.Paths {
		for m := range ops {
			got = append(got, strings.ToUpper(m)+" "+p)
		}
	}
	s := New(testCatalog(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, r := range s.routes() {
		want = append(want, strings.ReplaceAll(r.Pattern, "{id...}", "{id}"))
		if _, ok := apiDoc[r.Pattern]; !ok {
			t.Errorf("route %s has no apiDoc entry", r.Pattern)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi paths\n%v\nwant\n%v", got, want)
	}
	if !bytes.Contains(body, []byte(`"paid_until"`)) {
		t.Error("QuoteView schema not derived")
	}
}

func FuzzQuoteBody(f *testing.F) {
	f.Add(`{"offer":"idc/cd/v100x8","mode":"weekly","start":"2026-03-02T00:00:00Z","end":"2026-03-16T00:00:00Z","count":3}`)
	f.Add(`{"offer":"idc/cd/v100x8","mode":"monthly","start":"0001-01-01T00:00:00Z","end":"9999-12-31T23:59:59Z"}`)
	f.Add(`{}`)
	f.Add(`[`)
	s := New(testCatalog(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)), WithAnonymousRateLimit(httpapi.RateLimit{}))
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/api/v1/quote", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 && rec.Code != 413 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON response %s", rec.Body)
		}
	})
}

// readiness is a Readiness whose answer the test sets.
type readiness struct{ err error }

func (r *readiness) Ready() error { return r.err }

// TestReadyzAsksReadiness: /readyz is 503 while a Readiness (the control
// loop) is not ready, without telling the anonymous caller why, and 200
// again once it is.
func TestReadyzAsksReadiness(t *testing.T) {
	r := &readiness{}
	s := New(testCatalog(), clock.NewManual(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)), slog.New(slog.NewTextHandler(io.Discard, nil)), WithReadiness(r))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	if code, body := do(t, "GET", ts.URL+"/readyz", ""); code != 200 {
		t.Fatalf("ready: %d %s", code, body)
	}
	r.err = errors.New(`control loop: the last 3 attempts failed, the latest: UNIQUE constraint failed: leases.provider_id`)
	code, body := do(t, "GET", ts.URL+"/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "control loop") {
		t.Errorf("not ready: %d %s, want 503 naming the control loop", code, body)
	}
	if strings.Contains(string(body), "UNIQUE") {
		t.Errorf("/readyz shows the loop's error to anyone: %s", body)
	}
	r.err = nil
	if code, body := do(t, "GET", ts.URL+"/readyz", ""); code != 200 {
		t.Errorf("ready again: %d %s", code, body)
	}
}

// TestStrictJSON: a body is one JSON value with each key once per object
// (without regard to case, as encoding/json matches keys); anything else
// is a 400 that names the key.
func TestStrictJSON(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, path, body string
		code             int
		field, msg       string
	}{
		{"one value", "/api/v1/jobs", `{"gpus":1}`, 201, "", ""},
		{"white space after", "/api/v1/jobs", "{\"gpus\":1}\n\t ", 201, "", ""},
		{"duplicate key", "/api/v1/jobs", `{"gpus":1,"gpus":1000}`, 400, "gpus", "key gpus given twice"},
		{"duplicate key, other case", "/api/v1/jobs", `{"gpus":1,"GPUS":1000}`, 400, "GPUS", `as "gpus" too`},
		{"duplicate map key", "/api/v1/jobs", `{"gpus":1,"throughput":{"A100":1,"A100":2}}`, 400, "throughput.A100", "given twice"},
		{"duplicate nested key", "/api/v1/teams", `{"id":"q","name":"q","quotas":[{"gpu_class":"A100"},{"gpu_class":"A100","gpu_class":"H100"}]}`, 400, "quotas[1].gpu_class", "given twice"},
		{"trailing brace", "/api/v1/jobs", `{"gpus":1}}`, 400, "", "trailing data"},
		{"trailing bracket", "/api/v1/jobs", `{"gpus":1}]`, 400, "", "trailing data"},
		{"second object", "/api/v1/jobs", `{"gpus":1}{"gpus":2}`, 400, "", "trailing data"},
		{"trailing text", "/api/v1/jobs", `{"gpus":1} x`, 400, "", "trailing data"},
		{"syntax error", "/api/v1/jobs", `{"gpus":1,}`, 400, "", "invalid JSON body"},
		{"empty body", "/api/v1/jobs", ``, 400, "", "invalid JSON body"},
		{"number out of range", "/api/v1/jobs", `{"gpus":1E700}`, 400, "gpus", "want int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role := "member"
			if strings.HasPrefix(tc.path, "/api/v1/teams") {
				role = "admin"
			}
			code, b, _ := f.call(t, role, "POST", tc.path, tc.body)
			var e httpapi.ErrorBody
			if err := json.Unmarshal(b, &e); err != nil || code != tc.code || e.Error.Field != tc.field || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("got %d %s, want %d field %q message with %q", code, b, tc.code, tc.field, tc.msg)
			}
		})
	}
}
