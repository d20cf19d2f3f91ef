package api

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/store"
)

// The load target: job submissions while 1,000 agents heartbeat
// every 5 s. Each simulated agent does what a real one does each
// interval, over loopback HTTP with its own agent token: a heartbeat
// (a write: last seen, GPUs, running jobs) and a command fetch.
//
//	go test -run '^$' -bench 'SubmitWithAgents$' -benchtime 20000x ./internal/api
//	go test -run '^$' -bench 'SubmitWithAgentsPostgres$' -benchtime 20000x ./internal/api
const (
	benchAgents   = 1000
	benchInterval = 5 * time.Second
)

// BenchmarkSubmitWithAgents is BenchmarkSubmit on SQLite with the agents.
func BenchmarkSubmitWithAgents(b *testing.B) { benchWithAgents(b, newFixture(b)) }

// BenchmarkSubmitWithAgentsPostgres is the same on PostgreSQL.
func BenchmarkSubmitWithAgentsPostgres(b *testing.B) {
	benchWithAgents(b, newFixtureOn(b, pgStore(b)))
}

func benchWithAgents(b *testing.B, f *fixture) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokens := make([]string, benchAgents)
	for i := range tokens {
		secret, hash, err := store.NewToken()
		if err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("t-agent-%04d", i)
		if err := f.st.Tokens().CreateToken(ctx, store.Token{ID: id, Hash: hash, Role: store.RoleAgent, Name: id, Created: t0}); err != nil {
			b.Fatal(err)
		}
		tokens[i] = secret
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var (
		wg       sync.WaitGroup
		joined   sync.WaitGroup
		beats    atomic.Int64
		failures atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
	)
	joined.Add(benchAgents)
	for i := 0; i < benchAgents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("node-%04d", i)
			up := &link.HTTP{URL: f.ts.URL, Token: tokens[i], Agent: id, Epoch: "e", Client: client}
			hb := link.Heartbeat{Agent: id, Source: "fake", GPUs: []link.GPUInfo{{Index: 0, UUID: "GPU-" + id, Model: "V100", MemTotalMiB: 32768}}}
			beat := func() {
				t := time.Now()
				err := up.Heartbeat(ctx, hb)
				if err == nil {
					_, err = up.FetchCommands(ctx)
				}
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
					}
					return
				}
				beats.Add(1)
				mu.Lock()
				lat = append(lat, time.Since(t))
				mu.Unlock()
			}
			beat() // join
			joined.Done()
			// Spread over the interval, as agents started at different
			// times are.
			timer := time.NewTimer(time.Duration(rand.Int64N(int64(benchInterval))))
			defer timer.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
					beat()
					timer.Reset(benchInterval)
				}
			}
		}()
	}
	joined.Wait()
	mu.Lock()
	lat = lat[:0]
	mu.Unlock()
	beats.Store(0)
	start := time.Now()
	benchSubmit(b, f)
	el := time.Since(start)
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		b.Errorf("%d agent heartbeats failed", n)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(beats.Load())/el.Seconds(), "beats/s")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "beat-p99-ms")
	}
}
