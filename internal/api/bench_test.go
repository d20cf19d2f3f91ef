package api

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSubmit submits jobs over loopback HTTP from parallel clients to
// a SQLite store and reports submissions a second and the p99 latency:
//
//	go test -run '^$' -bench Submit -benchtime 10000x ./internal/api
func BenchmarkSubmit(b *testing.B) { benchSubmit(b, newFixture(b)) }

func benchSubmit(b *testing.B, f *fixture) {
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

// BenchmarkCheckJSON is the strict decoder's extra pass over a job body
// (duplicate keys, trailing data):
//
//	go test -run '^$' -bench CheckJSON ./internal/api
func BenchmarkCheckJSON(b *testing.B) {
	body := []byte(`{"team":"ml","tier":"regular","gpus":8,"gpu_milli":1000,"gpu_mem_mib":40960,"models":["NVIDIA A100","NVIDIA H100"],` +
		`"throughput":{"NVIDIA A100":120,"NVIDIA H100":300},"cpu_milli":8000,"mem_mib":65536,"shards":1,"est_duration_seconds":5400,` +
		`"deadline":"2026-12-03T00:00:00Z","interruptible":true,"checkpoint_interval_seconds":600,"command":["python","train.py","--epochs=3"],"image":"ghcr.io/acme/train:3"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := checkJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
