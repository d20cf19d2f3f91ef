package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
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
			i := n.Add(1)
			req, _ := http.NewRequest("POST", f.ts.URL+"/api/v1/jobs", strings.NewReader(fmt.Sprintf(`{"id":"b%d","gpus":1,"est_duration_seconds":600}`, i)))
			req.Header.Set("Authorization", "Bearer "+f.tokens["member"])
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
