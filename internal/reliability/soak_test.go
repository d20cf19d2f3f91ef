package reliability

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"github.com/gpufleet/gpufleet/internal/store"
)

// soakDuration is how long TestSoak runs: GPUFLEET_SOAK (a duration) or
// 20 s, long enough for dozens of samples in CI.
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("GPUFLEET_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("GPUFLEET_SOAK=%q: %v", s, err)
		}
		return d
	}
	return 20 * time.Second
}

// TestSoak is a bounded run of everything at once — job submissions
// through the API, 200 agents heartbeating and fetching commands, the
// live loop ticking on a fast virtual clock with spot capacity withdrawn
// every 20 virtual minutes — with the heap (after a GC) and the
// goroutine count sampled every second. They must stay flat: the last
// third of the run may not hold a heap over 1.5× the first third's plus
// 16 MiB, and once the load has stopped and its connections are closed
// the goroutines are back to what they were before it. Then every job
// must reach a final state.
func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	var steps []sim.Step
	for m := 0; m < 60*24*30; m += 20 {
		steps = append(steps,
			sim.Step{Offset: time.Duration(m) * time.Minute, Relative: true, Offer: sim.AllOffers, Available: true},
			sim.Step{Offset: time.Duration(m+15) * time.Minute, Relative: true, Offer: sim.AllOffers, Available: false})
	}
	w := newLoopWorld(t, sim.Config{Source: rand.NewPCG(9, 9), Default: sim.Settings{Delay: sim.Fixed(time.Minute)},
		Availability: &sim.Availability{File: "soak", Steps: steps}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	baseline := runtime.NumGoroutine()

	// Tokens: one member of team a, one per agent.
	member := mustToken(t, w.st, store.Token{ID: "tm", User: "m", Team: "a", Role: store.RoleMember})
	const agents = 200
	agentTokens := make([]string, agents)
	for i := range agentTokens {
		agentTokens[i] = mustToken(t, w.st, store.Token{ID: fmt.Sprintf("ta%03d", i), Role: store.RoleAgent})
	}
	srv := api.New(pricing.Demo(), w.clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(w.st), api.WithRateLimit(httpapi.RateLimit{}))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	var (
		wg                           sync.WaitGroup
		submitted, beats, errs, tick atomic.Int64
		tickErr                      atomic.Value
	)
	// The loop: a tick every 50 ms, each 30 virtual seconds later.
	wg.Go(func() {
		for ctx.Err() == nil {
			w.clk.Advance(30 * time.Second)
			if err := w.loop.Tick(ctx); err != nil && ctx.Err() == nil {
				tickErr.Store(err)
				return
			}
			tick.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	})
	// Submitters: about 40 jobs a second, half of them interruptible.
	for range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"team":"a","tier":"regular","gpus":1,"est_duration_seconds":600,"interruptible":%v,"checkpoint_interval_seconds":120}`, i%2 == 0)
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/api/v1/jobs", bytes.NewReader([]byte(body)))
				req.Header.Set("Authorization", "Bearer "+member)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					submitted.Add(1)
				} else {
					errs.Add(1)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	// Agents: a heartbeat and a command fetch every 200 ms each.
	for i := range agents {
		wg.Go(func() {
			id := fmt.Sprintf("node-%03d", i)
			up := &link.HTTP{URL: ts.URL, Token: agentTokens[i], Agent: id, Epoch: "e", Client: client}
			hb := link.Heartbeat{Agent: id, Source: "fake", GPUs: []link.GPUInfo{{Index: 0, UUID: "GPU-" + id, Model: "A100", MemTotalMiB: 40960}}}
			for ctx.Err() == nil {
				err := up.Heartbeat(ctx, hb)
				if err == nil {
					_, err = up.FetchCommands(ctx)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
				} else {
					beats.Add(1)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}

	type sample struct {
		heap       uint64
		goroutines int
	}
	var samples []sample
	for end := time.Now().Add(dur); time.Now().Before(end); {
		time.Sleep(time.Second)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		samples = append(samples, sample{ms.HeapAlloc, runtime.NumGoroutine()})
		if e := tickErr.Load(); e != nil {
			t.Fatalf("loop tick: %v", e)
		}
	}
	cancel()
	wg.Wait()
	// With the load gone and its connections closed, the goroutines the
	// run started must be gone too.
	client.CloseIdleConnections()
	ts.CloseClientConnections()
	var after int
	for i := 0; i < 100; i++ {
		if after = runtime.NumGoroutine(); after <= baseline+5 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after > baseline+5 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before the load, %d after it ended:\n%s", baseline, after, buf[:runtime.Stack(buf, true)])
	}
	if e := tickErr.Load(); e != nil {
		t.Fatalf("loop tick: %v", e)
	}
	if len(samples) < 6 {
		t.Fatalf("%d samples: run longer", len(samples))
	}
	third := len(samples) / 3
	var heap0, heap2 float64
	g0, g2, g2max := 0, 0, 0
	for _, s := range samples[:third] {
		heap0 += float64(s.heap) / float64(third)
		g0 = max(g0, s.goroutines)
	}
	for i, s := range samples[len(samples)-third:] {
		heap2 += float64(s.heap) / float64(third)
		if i == 0 || s.goroutines < g2 {
			g2 = s.goroutines
		}
		g2max = max(g2max, s.goroutines)
	}
	// In flight, connections come and go with the load: each agent's
	// request may hold a connection of its own (two goroutines on the
	// client's side, one or two on the server's) beyond the 64 the pool
	// keeps, so on a loaded machine one sample may catch several hundred
	// more than another without anything leaking (CI once saw 508 in the
	// first third, 940 at one moment of the last). A leak raises the floor:
	// the fewest of the last third must not exceed the most of the first
	// by more than the clients' number. (After the load, the count must be
	// back at the baseline: that check, above, is the strict one.)
	if g2 > g0+2*agents {
		t.Errorf("goroutines grew: at most %d in the first third, at least %d in the last (at most %d)", g0, g2, g2max)
	}
	if heap2 > 1.5*heap0+16<<20 {
		t.Errorf("heap grew: %.1f MiB on average in the first third, %.1f MiB in the last", heap0/(1<<20), heap2/(1<<20))
	}
	if submitted.Load() == 0 || beats.Load() == 0 || tick.Load() == 0 {
		t.Fatalf("nothing happened: %d submitted, %d heartbeats, %d ticks", submitted.Load(), beats.Load(), tick.Load())
	}
	if errs.Load() > 0 {
		t.Errorf("%d requests failed under load", errs.Load())
	}
	// Drain: every job reaches a final state.
	for i := 0; ; i++ {
		states := w.jobStates()
		open := 0
		for s, n := range states {
			if !s.Final() {
				open += n
			}
		}
		if open == 0 {
			break
		}
		if i > 2000 {
			t.Fatalf("jobs not final after draining: %v", states)
		}
		w.runFor(5*time.Minute, time.Minute)
	}
	w.checkLeases()
	notices := w.countEvents("reclaim-notice")
	t.Logf("%d jobs, %d heartbeats, %d ticks, %d reclaim notices; heap %.1f → %.1f MiB, goroutines at most %d in the first third, %d–%d in the last",
		submitted.Load(), beats.Load(), tick.Load(), notices, heap0/(1<<20), heap2/(1<<20), g0, g2, g2max)
	reltest.Record(t, reltest.Entry{Area: "soak", Done: fmt.Sprintf("%s of submissions, 200 agents heartbeating every 200 ms and the loop on a fast clock with spot capacity withdrawn every 20 virtual minutes", dur),
		Amount: fmt.Sprintf("%d jobs, %d heartbeats, %d ticks, %d reclaim notices, %d samples of heap and goroutines", submitted.Load(), beats.Load(), tick.Load(), notices, len(samples)),
		Held:   fmt.Sprintf("heap %.1f → %.1f MiB (first third → last third), goroutines at most %d in the first third and %d–%d in the last, back to %d (from %d) after the load, no request failed, every job final, store and provider agree", heap0/(1<<20), heap2/(1<<20), g0, g2, g2max, after, baseline)})
}

// mustToken stores tok (with a fresh secret, its user created if it
// names one) and returns the secret.
func mustToken(t *testing.T, st store.Store, tok store.Token) string {
	t.Helper()
	ctx := context.Background()
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tok.Hash, tok.Name, tok.Created = hash, tok.ID, t0
	if tok.User != "" {
		if err := st.Users().CreateUser(ctx, store.User{ID: tok.User, Team: tok.Team, Role: tok.Role, Created: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Tokens().CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return secret
}
