package reliability

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestDefaultRateLimitPerToken floods the server, as configured out of
// the box (httpapi.DefaultRateLimit), from one token with the clock standing
// still: exactly the burst gets through, every request after it is a 429
// with Retry-After, and another token is not slowed by the flood.
func TestDefaultRateLimitPerToken(t *testing.T) {
	f := newFixture(t)
	clk := clock.NewManual(t0)
	ts := httptest.NewServer(api.New(pricing.Demo(), clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(f.st)))
	defer ts.Close()
	get := func(secret string) (int, string) {
		req, _ := http.NewRequest("GET", ts.URL+"/api/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	burst := httpapi.DefaultRateLimit.Burst
	flood := burst + 100
	ok, limited := 0, 0
	for i := range flood {
		code, retry := get(f.tokens[store.RoleViewer])
		switch {
		case code == http.StatusOK && i < burst:
			ok++
		case code == http.StatusTooManyRequests && i >= burst && retry != "":
			limited++
		default:
			t.Fatalf("request %d: %d (Retry-After %q)", i, code, retry)
		}
	}
	if code, _ := get(f.tokens[store.RoleMember]); code != http.StatusOK {
		t.Errorf("another token during the flood: %d", code)
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "one token floods the API (default limit, clock standing still)",
		Amount: fmt.Sprintf("%d requests against a burst of %d at %.0f/s", flood, burst, httpapi.DefaultRateLimit.Rate),
		Held:   fmt.Sprintf("%d answered, %d refused with 429 and Retry-After, another token unaffected", ok, limited)})
}

// TestDefaultAnonymousRateLimitPerAddress floods the routes that need no
// token, as configured out of the box (httpapi.DefaultAnonymousRateLimit),
// from one address with the clock standing still: exactly the burst gets
// through, every request after it is a 429 with Retry-After, and neither
// the probes nor a token's routes are slowed by the flood.
func TestDefaultAnonymousRateLimitPerAddress(t *testing.T) {
	f := newFixture(t)
	clk := clock.NewManual(t0)
	ts := httptest.NewServer(api.New(pricing.Demo(), clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(f.st)))
	defer ts.Close()
	send := func(method, path, secret, body string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	quote := `{"offer":"idc-chengdu/cd1/a100x8","mode":"on-demand","start":"2026-03-02T00:00:00Z","end":"2036-02-28T00:00:00Z","count":400}`
	burst := httpapi.DefaultAnonymousRateLimit.Burst
	flood := burst + 100
	ok, limited := 0, 0
	for i := range flood {
		method, path, body := "POST", "/api/v1/quote", quote
		if i%2 == 1 {
			method, path, body = "GET", "/api/v1/offers", ""
		}
		code, retry := send(method, path, "", body)
		switch {
		case code == http.StatusOK && i < burst:
			ok++
		case code == http.StatusTooManyRequests && i >= burst && retry != "":
			limited++
		default:
			t.Fatalf("request %d (%s %s): %d (Retry-After %q)", i, method, path, code, retry)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := send("GET", path, "", ""); code != http.StatusOK {
			t.Errorf("%s during the flood: %d", path, code)
		}
	}
	if code, _ := send("GET", "/api/v1/jobs", f.tokens[store.RoleViewer], ""); code != http.StatusOK {
		t.Errorf("a token's route during the flood: %d", code)
	}
	reltest.Record(t, reltest.Entry{Area: "security", Done: "one address floods the routes without a token, quotes of 400 machines over 3650 days and offer lists (default limit, clock standing still)",
		Amount: fmt.Sprintf("%d requests against a burst of %d at %.0f/s", flood, burst, httpapi.DefaultAnonymousRateLimit.Rate),
		Held:   fmt.Sprintf("%d answered, %d refused with 429 and Retry-After, the probes and a token's routes unaffected", ok, limited)})
}
