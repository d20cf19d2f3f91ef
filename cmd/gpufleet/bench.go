package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running server from outside its process",
	}
	cmd.AddCommand(newBenchAPICmd())
	return cmd
}

// benchAPI is what `bench api` measured; its JSON form is --json's.
type benchAPI struct {
	Server       string  `json:"server"`
	Jobs         int     `json:"jobs"`
	Clients      int     `json:"clients"`
	Agents       int     `json:"agents"`
	Interval     string  `json:"agent_interval"`
	WallSeconds  float64 `json:"wall_seconds"`
	SubmitsPerS  float64 `json:"submits_per_second"`
	SubmitP50Ms  float64 `json:"submit_p50_ms"`
	SubmitP99Ms  float64 `json:"submit_p99_ms"`
	Failed       int64   `json:"failed"`
	Beats        int64   `json:"beats"`
	BeatsPerS    float64 `json:"beats_per_second"`
	BeatP99Ms    float64 `json:"beat_p99_ms"`
	BeatFailed   int64   `json:"beat_failed"`
	ServerCPUSec float64 `json:"server_cpu_seconds"` // -1: the server's /metrics did not say
	BenchCPUSec  float64 `json:"bench_cpu_seconds"`
	Stored       int     `json:"stored"` // jobs of the run's team the server lists afterwards
}

// newBenchAPICmd is the load generator of the API's throughput target: it
// runs in its own process, so the server's figures are the server's, and
// it drives a server that is already running, on either store. Each
// submitting client has its own token (the per-token rate limit applies
// to each: run the server with --rate-limit 0 to measure the server, not
// the limit), each agent its own agent token; agents heartbeat and fetch
// their commands every interval, spread over it, as agents started at
// different times do. The server's CPU time is the change of its
// process_cpu_seconds_total on /metrics over the run.
func newBenchAPICmd() *cobra.Command {
	var (
		server, token, team string
		jobs, clients       int
		agents              int
		interval            time.Duration
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Submissions per second and p99 against a running server, with agents heartbeating",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case jobs < 1:
				return usageError{fmt.Errorf("--jobs %d: want at least 1", jobs)}
			case clients < 1 || clients > 1024:
				return usageError{fmt.Errorf("--clients %d: want 1 to 1024", clients)}
			case agents < 0 || agents > 100_000:
				return usageError{fmt.Errorf("--agents %d: want 0 to 100000", agents)}
			case interval <= 0:
				return usageError{fmt.Errorf("--agent-interval %s: want a duration > 0", interval)}
			}
			if token == "" {
				token = envOr("GPUFLEET_TOKEN", "")
			}
			if token == "" {
				return usageError{errors.New("--token: an admin token is needed (it creates the run's team and tokens)")}
			}
			if team == "" {
				team = "bench-" + strconv.FormatInt(time.Now().Unix(), 36)
			}
			res, err := runBenchAPI(cmd.Context(), server, token, team, jobs, clients, agents, interval)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(out, "%d jobs from %d clients, %d agents every %s, against %s\n", res.Jobs, res.Clients, res.Agents, res.Interval, res.Server)
			fmt.Fprintf(out, "submissions  %.0f/s  p50 %.1f ms  p99 %.1f ms  failed %d  stored %d\n", res.SubmitsPerS, res.SubmitP50Ms, res.SubmitP99Ms, res.Failed, res.Stored)
			if res.Agents > 0 {
				fmt.Fprintf(out, "agents       %.0f heartbeat+fetch/s  p99 %.1f ms  failed %d\n", res.BeatsPerS, res.BeatP99Ms, res.BeatFailed)
			}
			srvCPU := "unknown (no process_cpu_seconds_total on /metrics)"
			if res.ServerCPUSec >= 0 {
				srvCPU = fmt.Sprintf("%.1f s", res.ServerCPUSec)
			}
			fmt.Fprintf(out, "wall %.1f s  server CPU %s  bench CPU %.1f s\n", res.WallSeconds, srvCPU, res.BenchCPUSec)
			if res.Failed > 0 || res.BeatFailed > 0 || res.Stored != res.Jobs {
				return fmt.Errorf("bench api: %d submissions and %d heartbeats failed; %d of %d jobs stored", res.Failed, res.BeatFailed, res.Stored, res.Jobs)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", envOr("GPUFLEET_URL", "http://127.0.0.1:8080"), "the server's URL")
	f.StringVar(&token, "token", "", "an admin token (default $GPUFLEET_TOKEN)")
	f.StringVar(&team, "team", "", "the team the jobs are submitted for, created if missing with a unit limit that fits --jobs (default bench-<time>)")
	f.IntVar(&jobs, "jobs", 20000, "jobs to submit")
	f.IntVar(&clients, "clients", 8, "parallel submitting clients, each with its own token")
	f.IntVar(&agents, "agents", 1000, "simulated agents heartbeating and fetching commands, each with its own agent token")
	f.DurationVar(&interval, "agent-interval", 5*time.Second, "how often each agent heartbeats and fetches its commands")
	f.BoolVar(&asJSON, "json", false, "print the figures as JSON")
	return cmd
}

func envOr(k, def string) string {
	if v := strings.TrimSpace(os.Getenv(k)); v != "" {
		return v
	}
	return def
}

func runBenchAPI(ctx context.Context, server, token, team string, jobs, clients, agents int, interval time.Duration) (benchAPI, error) {
	res := benchAPI{Server: server, Jobs: jobs, Clients: clients, Agents: agents, Interval: interval.String(), ServerCPUSec: -1}
	hc := &http.Client{Timeout: client.DefaultTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: clients + 64, MaxIdleConns: clients + agents + 64}}
	admin, err := client.New(server, token, hc)
	if err != nil {
		return res, err
	}
	if _, err := admin.CreateTeam(ctx, api.TeamRequest{ID: team, Name: team, UnitLimit: int64(max(jobs, 10_000))}); err != nil && client.StatusOf(err) != http.StatusConflict {
		return res, fmt.Errorf("bench api: create team %s: %w", team, err)
	}
	mint := func(role, name string) (string, error) {
		req := api.TokenRequest{Team: team, Role: role, Name: name, Expires: time.Now().Add(24 * time.Hour)}
		if role != "agent" {
			req.User = name
		}
		tv, err := admin.CreateToken(ctx, req)
		if err != nil {
			return "", fmt.Errorf("bench api: create %s token %s: %w", role, name, err)
		}
		return tv.Secret, nil
	}
	subs := make([]*client.Client, clients)
	for i := range subs {
		secret, err := mint("member", fmt.Sprintf("%s-client-%d", team, i))
		if err != nil {
			return res, err
		}
		if subs[i], err = client.New(server, secret, hc); err != nil {
			return res, err
		}
	}
	agentTokens := make([]string, agents)
	for i := range agentTokens {
		if agentTokens[i], err = mint("agent", fmt.Sprintf("%s-agent-%04d", team, i)); err != nil {
			return res, err
		}
	}

	actx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg, joined    sync.WaitGroup
		beats, bfails atomic.Int64
		mu            sync.Mutex
		beatLat       []time.Duration
		measuring     atomic.Bool
	)
	joined.Add(agents)
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%s-node-%04d", team, i)
			up := &link.HTTP{URL: server, Token: agentTokens[i], Agent: id, Epoch: "bench", Client: hc}
			hb := link.Heartbeat{Agent: id, Source: "fake", GPUs: []link.GPUInfo{{Index: 0, UUID: "GPU-" + id, Model: "H100", MemTotalMiB: 81920}}}
			beat := func() {
				t := time.Now()
				err := up.Heartbeat(actx, hb)
				if err == nil {
					_, err = up.FetchCommands(actx)
				}
				if actx.Err() != nil || !measuring.Load() {
					return
				}
				if err != nil {
					bfails.Add(1)
					return
				}
				beats.Add(1)
				mu.Lock()
				beatLat = append(beatLat, time.Since(t))
				mu.Unlock()
			}
			beat() // join
			joined.Done()
			timer := time.NewTimer(time.Duration(rand.Int64N(int64(interval))))
			defer timer.Stop()
			for {
				select {
				case <-actx.Done():
					return
				case <-timer.C:
					beat()
					timer.Reset(interval)
				}
			}
		}()
	}
	joined.Wait()

	cpu0, cpuErr := serverCPU(ctx, hc, server)
	ru0 := selfCPU()
	measuring.Store(true)
	var (
		next   atomic.Int64
		failed atomic.Int64
		lat    = make([][]time.Duration, clients)
		first  atomic.Value
		swg    sync.WaitGroup
	)
	start := time.Now()
	runID := strconv.FormatInt(start.UnixNano(), 36) // keys apart from an earlier run's on the team
	for c := range clients {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for {
				n := next.Add(1)
				if n > int64(jobs) {
					return
				}
				t := time.Now()
				_, _, err := subs[c].SubmitJob(ctx, api.JobRequest{Team: team, GPUs: 1, EstDurationSeconds: 600, Tier: "offline"}, fmt.Sprintf("%s-%s-%d", team, runID, n))
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	swg.Wait()
	wall := time.Since(start)
	measuring.Store(false)
	ru1 := selfCPU()
	cpu1, cpuErr1 := serverCPU(ctx, hc, server)
	stop()
	wg.Wait()

	all := slices.Concat(lat...)
	slices.Sort(all)
	slices.Sort(beatLat)
	res.WallSeconds = wall.Seconds()
	res.SubmitsPerS = float64(len(all)) / wall.Seconds()
	res.SubmitP50Ms = quantileMs(all, 0.50)
	res.SubmitP99Ms = quantileMs(all, 0.99)
	res.Failed = failed.Load()
	res.Beats = beats.Load()
	res.BeatsPerS = float64(res.Beats) / wall.Seconds()
	res.BeatP99Ms = quantileMs(beatLat, 0.99)
	res.BeatFailed = bfails.Load()
	res.BenchCPUSec = ru1 - ru0
	if cpuErr == nil && cpuErr1 == nil {
		res.ServerCPUSec = cpu1 - cpu0
	}
	if res.Stored, err = countJobs(ctx, admin, team); err != nil {
		return res, err
	}
	if msg, ok := first.Load().(string); ok {
		return res, fmt.Errorf("bench api: %d submissions failed, the first: %s", res.Failed, msg)
	}
	return res, nil
}

// quantileMs is the q-quantile of sorted d in milliseconds (0 if empty).
func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	i := min(int(float64(len(d))*q), len(d)-1)
	return float64(d[i].Microseconds()) / 1000
}

// countJobs pages through the team's jobs.
func countJobs(ctx context.Context, c *client.Client, team string) (int, error) {
	n, cursor := 0, ""
	for {
		page, err := c.ListJobs(ctx, client.JobFilter{Team: team, Limit: 1000, Cursor: cursor})
		if err != nil {
			return n, fmt.Errorf("bench api: list jobs: %w", err)
		}
		n += len(page.Jobs)
		if page.Next == "" {
			return n, nil
		}
		cursor = page.Next
	}
}

// serverCPU reads process_cpu_seconds_total from the server's /metrics.
func serverCPU(ctx context.Context, hc *http.Client, server string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(server, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return parseCPUSeconds(resp.Body)
}

// parseCPUSeconds finds process_cpu_seconds_total in a Prometheus text
// exposition.
func parseCPUSeconds(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/metrics: no process_cpu_seconds_total")
}

// selfCPU is this process's user+system CPU time in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
