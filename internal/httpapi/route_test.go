package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHandle: a route mounted by Middleware.Handle gets what every route
// shares, without a store: a public POST refuses a body not typed JSON
// (415) and takes a typed one through Decode; a route with roles is a
// 503 without a store; a public route is limited by address, a probe is
// not; every answer is counted by route and code.
func TestHandle(t *testing.T) {
	m := NewMiddleware(nil, clock.NewManual(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)), slog.New(slog.NewTextHandler(io.Discard, nil)),
		RateLimit{}, RateLimit{Rate: 1, Burst: 1})
	mux := http.NewServeMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			N int `json:"n"`
		}
		if Decode(w, r, &v) {
			WriteJSON(w, http.StatusOK, v)
		}
	}
	ok := func(w http.ResponseWriter, r *http.Request) { WriteJSON(w, http.StatusOK, map[string]string{}) }
	for _, rt := range []Route{
		{Pattern: "POST /echo", Summary: "echo", Handler: echo},
		{Pattern: "GET /healthz", Summary: "probe", Handler: ok},
		{Pattern: "GET /secret", Summary: "needs a token", Handler: ok, Roles: []store.Role{store.RoleAdmin}},
	} {
		m.Handle(mux, rt)
	}
	send := func(method, path, ctype, body, addr string) (int, ErrorBody) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var e ErrorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		return rec.Code, e
	}
	if code, e := send("POST", "/echo", "text/plain", `{"n":1}`, "192.0.2.1:1"); code != 415 || e.Error.Field != "Content-Type" {
		t.Errorf("text/plain body: %d %+v, want 415 naming Content-Type", code, e.Error)
	}
	if code, e := send("POST", "/echo", "application/json", `{"n":1,"N":2}`, "192.0.2.2:1"); code != 400 || e.Error.Field != "N" {
		t.Errorf("duplicate key: %d %+v, want 400 naming N", code, e.Error)
	}
	if code, _ := send("POST", "/echo", "application/json", `{"n":1}`, "192.0.2.3:1"); code != 200 {
		t.Errorf("JSON body: %d, want 200", code)
	}
	if code, e := send("POST", "/echo", "application/json", `{"n":1}`, "192.0.2.3:2"); code != 429 || e.Error.Code != "rate_limited" {
		t.Errorf("second request of one address: %d %+v, want 429", code, e.Error)
	}
	for range 3 {
		if code, _ := send("GET", "/healthz", "", "", "192.0.2.3:3"); code != 200 {
			t.Errorf("probe from a limited address: %d, want 200", code)
		}
	}
	if code, e := send("GET", "/secret", "", "", "192.0.2.4:1"); code != 503 || e.Error.Code != "unavailable" {
		t.Errorf("route with roles, no store: %d %+v, want 503", code, e.Error)
	}
	var requests *prometheus.CounterVec
	for _, c := range m.Collectors() {
		if cv, ok := c.(*prometheus.CounterVec); ok {
			requests = cv
		}
	}
	for _, tc := range []struct {
		route, code string
		want        float64
	}{{"POST /echo", "415", 1}, {"POST /echo", "200", 1}, {"POST /echo", "429", 1}, {"GET /healthz", "200", 3}, {"GET /secret", "503", 1}} {
		if got := testutil.ToFloat64(requests.WithLabelValues(tc.route, tc.code)); got != tc.want {
			t.Errorf("requests{route=%q,code=%q} = %v, want %v", tc.route, tc.code, got, tc.want)
		}
	}
}
