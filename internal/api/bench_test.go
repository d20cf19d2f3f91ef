package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

// BenchmarkSubmit submits jobs over loopback HTTP from parallel clients to
// a SQLite store and reports submissions a second and the p99 latency:
//
//	go test -run '^$' -bench Submit -benchtime 10000x ./internal/api
func BenchmarkSubmit(b *testing.B) { benchSubmit(b, newFixture(b)) }

func benchSubmit(b *testing.B, f *fixture) {
	unlimited(b, f, "a")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	lat := make(chan time.Duration, b.N+64)
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
			req, _ := http.NewRequest("POST", f.ts.URL+"/api/v1/jobs", strings.NewReader(`{"gpus":1,"est_duration_seconds":600}`))
			req.Header.Set("Authorization", "Bearer "+f.tokens["member"])
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 201 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
			lat <- time.Since(t0)
		}
	})
	el := time.Since(start)
	b.StopTimer()
	close(lat)
	var all []time.Duration
	for d := range lat {
		all = append(all, d)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/el.Seconds(), "submits/s")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkQuote prices POST /api/v1/quote in process for count machines
// over ten years (3650 days), on the demo catalog's time-of-use offer that its voucher
// covers (the costliest quote it has) and on a per-second AWS offer:
//
//	go test -run '^$' -bench Quote -benchmem ./internal/api
func BenchmarkQuote(b *testing.B) {
	s := New(pricing.Demo(), clock.NewManual(t0), slog.New(slog.NewTextHandler(io.Discard, nil)), WithAnonymousRateLimit(httpapi.RateLimit{}))
	for _, offer := range []string{"idc-chengdu/cd1/a100x8", "aws/us-east-1/p4d.24xlarge"} {
		for _, count := range []int{1, 400} {
			body := fmt.Sprintf(`{"offer":%q,"mode":"on-demand","start":"2026-03-02T00:00:00Z","end":"2036-02-28T00:00:00Z","count":%d}`, offer, count)
			b.Run(fmt.Sprintf("%s/count=%d", offer, count), func(b *testing.B) {
				for b.Loop() {
					req := httptest.NewRequest("POST", "/api/v1/quote", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					s.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
			})
		}
	}
}

// unlimited gives team the most units its unfinished jobs may have, for a
// benchmark that submits more jobs than the default unit limit.
func unlimited(b *testing.B, f *fixture, team string) {
	t, err := f.st.Teams().GetTeam(context.Background(), team)
	if err != nil {
		b.Fatal(err)
	}
	t.UnitLimit = core.MaxUnitLimit
	if err := f.st.Teams().UpdateTeam(context.Background(), t); err != nil {
		b.Fatal(err)
	}
}
