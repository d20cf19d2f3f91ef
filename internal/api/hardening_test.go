package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

const quoteBody = `{"offer":"idc/cd/v100x8","mode":"weekly","start":"2026-03-02T00:00:00Z","end":"2026-03-16T00:00:00Z"}`

// TestPostsRequireJSON: a POST whose body is not declared JSON is a 415
// naming Content-Type, on the public quote and on a token's route alike,
// so a form or an untyped fetch from another origin's page is refused; a
// JSON type with parameters is fine, and so is a bodiless POST without
// a type (cancel), as the dashboard and the Go client send it.
func TestPostsRequireJSON(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, role, path, ctype, body string
		code                          int
	}{
		{"form", "none", "/api/v1/quote", "application/x-www-form-urlencoded", "offer=idc%2Fcd%2Fv100x8&mode=weekly", 415},
		{"form posting JSON text", "none", "/api/v1/quote", "text/plain", quoteBody, 415},
		{"multipart", "none", "/api/v1/quote", "multipart/form-data; boundary=x", "--x--", 415},
		{"no type", "none", "/api/v1/quote", "", quoteBody, 415},
		{"bad media type", "none", "/api/v1/quote", "application/", quoteBody, 415},
		{"json look-alike", "none", "/api/v1/quote", "application/jsonp", quoteBody, 415},
		{"json", "none", "/api/v1/quote", "application/json", quoteBody, 200},
		{"json with charset, any case", "none", "/api/v1/quote", "Application/JSON; charset=utf-8", quoteBody, 200},
		{"job as a form", "member", "/api/v1/jobs", "text/plain", `{"gpus":1}`, 415},
		{"job as json", "member", "/api/v1/jobs", "application/json", `{"gpus":1}`, 201},
		{"bodiless cancel without a type", "member", "/api/v1/jobs/ja/cancel", "", "", 200},
		{"bodiless cancel typed as a form", "member", "/api/v1/jobs/ja/cancel", "application/x-www-form-urlencoded", "", 415},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", f.ts.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			if s := f.tokens[tc.role]; s != "" {
				req.Header.Set("Authorization", "Bearer "+s)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e httpapi.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d (%+v), want %d", resp.StatusCode, e.Error, tc.code)
			}
			if tc.code == 415 && (e.Error.Code != "unsupported_media_type" || e.Error.Field != "Content-Type" || !strings.Contains(e.Error.Message, "want application/json")) {
				t.Errorf("415 body %+v: want code unsupported_media_type, field Content-Type and what is allowed", e.Error)
			}
		})
	}
}

// TestBearerTokenWithWhitespace: a secret with whitespace around or in it
// is a 401, not trimmed into a match. The handler is called directly for
// the cases HTTP/1.1 parsing would trim at the header's ends (HTTP/2 does
// not), and over the wire for a doubled space.
func TestBearerTokenWithWhitespace(t *testing.T) {
	f := newFixture(t)
	secret := f.tokens["viewer"]
	for _, auth := range []string{
		"Bearer " + secret + " ",
		"Bearer  " + secret,
		"Bearer " + secret + "\t",
		"Bearer \t" + secret,
		"Bearer " + secret + "\r\n",
		"Bearer " + secret[:8] + " " + secret[8:],
		"Bearer " + secret + "\u00a0",
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/api/v1/jobs", nil)
		req.Header["Authorization"] = []string{auth}
		f.srv.ServeHTTP(rec, req)
		var e httpapi.ErrorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != 401 || e.Error.Field != "Authorization" || !strings.Contains(e.Error.Message, "whitespace") {
			t.Errorf("Authorization %q: %d %+v, want 401 naming the whitespace", auth, rec.Code, e.Error)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	f.srv.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("the exact token: %d %s", rec.Code, rec.Body)
	}
	if code, b, _ := f.call(t, "none", "GET", "/api/v1/jobs", "", "Authorization", "Bearer  "+secret); code != 401 {
		t.Errorf("doubled space over HTTP: %d %s", code, b)
	}
}

// TestAnonymousRateLimit: the routes that need no token are limited per
// client address (429 with Retry-After once the burst is spent), each
// address on its own bucket and an IPv6 /64 as one; the probes and the
// routes of a token are not counted against it.
func TestAnonymousRateLimit(t *testing.T) {
	f := newFixture(t, WithAnonymousRateLimit(httpapi.RateLimit{Rate: 1, Burst: 2}))
	send := func(method, path, addr, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.RemoteAddr = addr
		f.srv.ServeHTTP(rec, req)
		return rec
	}
	const a = "198.51.100.7:40000"
	if rec := send("POST", "/api/v1/quote", a, quoteBody); rec.Code != 200 {
		t.Fatalf("first quote: %d %s", rec.Code, rec.Body)
	}
	if rec := send("GET", "/api/v1/offers", "198.51.100.7:40001", ""); rec.Code != 200 {
		t.Fatalf("offers from the same address, another port: %d %s", rec.Code, rec.Body)
	}
	rec := send("POST", "/api/v1/quote", a, quoteBody)
	var e httpapi.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || e.Error.Code != "rate_limited" {
		t.Fatalf("over the limit: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := send("GET", path, a, ""); rec.Code != 200 {
			t.Errorf("%s while the address is limited: %d", path, rec.Code)
		}
	}
	if rec := send("GET", "/api/v1/offers", "203.0.113.9:1", ""); rec.Code != 200 {
		t.Errorf("another address: %d", rec.Code)
	}
	if code, b, _ := f.call(t, "viewer", "GET", "/api/v1/jobs", ""); code != 200 {
		t.Errorf("a token's route: %d %s", code, b)
	}
	for i := range 2 {
		send("GET", "/api/v1/offers", fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1), "")
	}
	if rec := send("GET", "/api/v1/offers", "[2001:db8:1:2:ffff::1]:443", ""); rec.Code != 429 {
		t.Errorf("a third address of one IPv6 /64: %d, want 429", rec.Code)
	}
	f.clk.Advance(time.Second)
	if rec := send("POST", "/api/v1/quote", a, quoteBody); rec.Code != 200 {
		t.Errorf("a second later: %d %s", rec.Code, rec.Body)
	}
}

// TestQuoteOfManyMachinesIsBounded: POST /api/v1/quote for 400 machines
// over 3650 days, on the demo's time-of-use offer its voucher covers,
// allocates no more than the same quote for one machine (it took 1.5 GB
// and seconds when every machine's every day was a ledger line).
func TestQuoteOfManyMachinesIsBounded(t *testing.T) {
	s := New(pricing.Demo(), clock.NewManual(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), WithAnonymousRateLimit(httpapi.RateLimit{}))
	allocs := func(count int) float64 {
		body := fmt.Sprintf(`{"offer":"idc-chengdu/cd1/a100x8","mode":"on-demand","start":"2026-03-02T00:00:00Z","end":"2036-02-28T00:00:00Z","count":%d}`, count)
		return testing.AllocsPerRun(2, func() {
			req := httptest.NewRequest("POST", "/api/v1/quote", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"idc-compute-voucher": 500`) {
				t.Fatalf("count %d: %d %s", count, rec.Code, rec.Body)
			}
		})
	}
	if one, many := allocs(1), allocs(400); many > one+2 {
		t.Errorf("allocations: %.0f for 400 machines, %.0f for one", many, one)
	}
}
