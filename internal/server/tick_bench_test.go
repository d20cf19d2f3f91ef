package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/postgres/pgtest"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// BenchmarkTickPending measures one Tick of the loop with n units
// pending: one job of n shards, the queue a member's big request makes.
// The first tick (which rents for the queue) runs before the timer; each
// timed tick is 5 s of the loop's clock after the last, as in service,
// with the state the loop kept ("kept") and, for comparison, loaded whole
// ("whole").
//
//	go test ./internal/server -run '^$' -bench TickPending -benchtime 3x -cpuprofile cpu.out
func BenchmarkTickPending(b *testing.B) { benchStores(b, false, false) }

// BenchmarkTickPendingJobs is BenchmarkTickPending with n jobs of one
// unit each: the queue many small requests make.
//
//	go test ./internal/server -run '^$' -bench TickPendingJobs -benchtime 3x
func BenchmarkTickPendingJobs(b *testing.B) { benchStores(b, false, true) }

// BenchmarkTickCancel measures the tick after a job of n pending shards
// is cancelled: every unit changes and has an event, the most a tick
// writes for one job.
//
//	go test ./internal/server -run '^$' -bench TickCancel -benchtime 1x
func BenchmarkTickCancel(b *testing.B) { benchStores(b, true, false) }

func benchStores(b *testing.B, cancel, jobs bool) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", func(b *testing.B) store.Store {
			s, err := sqlite.Open(context.Background(), b.TempDir()+"/bench.db", sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"postgres", func(b *testing.B) store.Store {
			dsn, schema := pgtest.Schema(b, "gpufleet_bench_")
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, s := range stores {
		for _, n := range []int{1_000, 10_000, 100_000} {
			if jobs && n > 10_000 {
				break // submitting 100,000 jobs one by one takes minutes
			}
			// kept: the loop keeps its state between ticks, as it runs;
			// whole: it loads its state whole every tick (as after a
			// restart or a failed tick), the peer measured in the same run.
			for _, mode := range []string{"kept", "whole"} {
				b.Run(fmt.Sprintf("%s/%d/%s", s.name, n, mode), func(b *testing.B) { benchTick(b, s.open(b), n, cancel, jobs, mode == "whole") })
			}
		}
	}
}

func benchTick(b *testing.B, st store.Store, n int, cancel, jobs, whole bool) {
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	clk := clock.NewManual(t0)
	cloud, err := sim.New(sim.Config{Offers: hourly(), Source: rand.NewPCG(1, 2), Clock: clk, Default: sim.Settings{Delay: sim.Fixed(2 * time.Minute)}})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Teams().CreateTeam(ctx, core.Team{ID: "a", Name: "a", Weight: 1, UnitLimit: core.MaxUnitLimit}); err != nil {
		b.Fatal(err)
	}
	loop, err := NewLoop(Config{Store: st, Provider: cloud, Offers: hourly(), Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Executor: VirtualTime{}})
	if err != nil {
		b.Fatal(err)
	}
	// queue submits a job of n shards and runs the tick that first sees it.
	queue := func(id string) {
		j := core.Job{ID: id, Team: "a", Tier: core.TierRegular, Shards: n, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU},
			EstDuration: time.Hour, Submit: clk.Now()}
		if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
			b.Fatal(err)
		}
		if err := loop.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		clk.Advance(DefaultTick)
	}
	switch {
	case jobs:
		for i := range n {
			j := core.Job{ID: fmt.Sprintf("small-%d", i), Team: "a", Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU},
				EstDuration: time.Hour, Submit: clk.Now()}
			if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
				b.Fatal(err)
			}
		}
		if err := loop.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		clk.Advance(DefaultTick)
	case !cancel:
		queue("big")
	}
	b.ResetTimer()
	var cpu time.Duration
	for i := range b.N {
		if cancel {
			b.StopTimer()
			id := fmt.Sprintf("big-%d", i)
			queue(id)
			if _, err := st.Jobs().CancelJob(ctx, id, clk.Now()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if whole {
			loop.live = nil
		}
		cpu0 := cpuTime(b)
		if err := loop.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b) - cpu0
		clk.Advance(DefaultTick)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// cpuTime is the CPU time (user and system) this process has used: with
// wall time it tells waiting on the database from working.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
