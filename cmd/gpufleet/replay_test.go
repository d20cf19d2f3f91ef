package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestSimReplayJSON(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	html := filepath.Join(dir, "r.html")
	leases := filepath.Join(dir, "leases.csv")
	code, stdout, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--json", out, "--html", html, "--leases", leases, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "lower bound") || !strings.Contains(stdout, "gpufleet") {
		t.Errorf("table: %s", stdout)
	}
	// Money to the cent, shares as percentages, no Go map syntax.
	if !regexp.MustCompile(`gpufleet +[0-9,]+\.[0-9]{2} +[0-9]+\.[0-9]{3} +[0-9.]+% `).MatchString(stdout) || strings.Contains(stdout, "map[") {
		t.Errorf("table not formatted: %s", stdout)
	}
	// Every report names the profile it assumed; the table counts misses.
	if !strings.Contains(stdout, "workload profile: default") || !strings.Contains(stdout, "deadline misses") {
		t.Errorf("table lacks the profile or the deadline misses: %s", stdout)
	}
	var v struct {
		Policies []struct {
			Policy            string      `json:"policy"`
			Cost              json.Number `json:"cost"`
			PaidGPUHours      json.Number `json:"paid_gpu_hours"`
			AllocatedGPUHours json.Number `json:"allocated_gpu_hours"`
			IdleShare         json.Number `json:"idle_share"`
			Unfinished        int         `json:"unfinished"`
		} `json:"policies"`
		LowerBound struct {
			Cost json.Number `json:"cost"`
		} `json:"lower_bound"`
	}
	readJSONFile(t, out, &v)
	if len(v.Policies) != 4 {
		t.Fatalf("%d policies", len(v.Policies))
	}
	bound, _ := v.LowerBound.Cost.Float64()
	for _, p := range v.Policies {
		cost, _ := p.Cost.Float64()
		alloc, _ := p.AllocatedGPUHours.Float64()
		if cost < bound || p.Unfinished != 0 {
			t.Errorf("%s: cost %v below bound %v, or %d unfinished", p.Policy, cost, bound, p.Unfinished)
		}
		// The trace's work: 1 + 16 + 0.125 + 0.333 + 6 + 0.125 GPU-hours.
		if alloc < 23.5 || alloc > 24 {
			t.Errorf("%s: allocated %v GPU-hours, want the trace's 23.58", p.Policy, alloc)
		}
	}
	page, _ := os.ReadFile(html)
	if !strings.Contains(string(page), "<svg") {
		t.Error("no HTML report")
	}
	// The lease log: each policy's rows sum to its cost to the micro.
	rows := readCSVFile(t, leases)
	if len(rows) < 5 || rows[0][0] != "policy" || rows[0][11] != "cost" || rows[0][13] != "terms" {
		t.Fatalf("lease CSV: %v", rows)
	}
	sums := map[string]core.Micros{}
	for _, r := range rows[1:] {
		// Every term as mode@start, the first from the lease's start, the
		// last on its mode.
		terms := strings.Fields(r[13])
		if len(terms) == 0 || !strings.HasSuffix(terms[0], "@"+r[5]) || !strings.HasPrefix(terms[len(terms)-1], r[3]+"@") {
			t.Errorf("lease row %v: terms %q do not start at %s and end on %s", r, r[13], r[5], r[3])
		}
		c, err := core.ParseMicros(r[11])
		if err != nil {
			t.Fatalf("lease row %v: %v", r, err)
		}
		sums[r[0]] += c
	}
	for _, p := range v.Policies {
		want, err := core.ParseMicros(p.Cost.String())
		if err != nil {
			t.Fatal(err)
		}
		if sums[p.Policy] != want {
			t.Errorf("%s: leases sum to %s, the policy's cost is %s", p.Policy, sums[p.Policy], want)
		}
	}
}

// TestSimReplayNoLP: --no-lp keeps the price bound as the lower bound and
// says so; the JSON reports each replay's steps, events and speed.
func TestSimReplayNoLP(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "gpufleet,reactive", "--no-lp", "--json", out, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "lower bound (price)") || !strings.Contains(stdout, "LP bound: skipped") {
		t.Errorf("table: %s", stdout)
	}
	var v struct {
		Policies []struct {
			Policy     string  `json:"policy"`
			Events     int     `json:"events"`
			Steps      int     `json:"steps"`
			WallS      float64 `json:"wall_s"`
			EventsPerS float64 `json:"events_per_s"`
		} `json:"policies"`
		LowerBound struct {
			Cost       json.Number `json:"cost"`
			PriceBound json.Number `json:"price_bound"`
			Method     string      `json:"method"`
		} `json:"lower_bound"`
		WallS   float64 `json:"wall_s"`
		LPWallS float64 `json:"lp_wall_s"`
	}
	readJSONFile(t, out, &v)
	if v.LowerBound.Cost != v.LowerBound.PriceBound || !strings.Contains(v.LowerBound.Method, "--no-lp") || v.LPWallS != 0 {
		t.Errorf("lower bound %+v, LP %v s: want the price bound alone", v.LowerBound, v.LPWallS)
	}
	if len(v.Policies) != 2 || v.WallS <= 0 {
		t.Fatalf("%d policies, wall %v s", len(v.Policies), v.WallS)
	}
	for _, p := range v.Policies {
		if p.Steps <= 0 || p.Events <= 0 || p.WallS <= 0 || p.EventsPerS <= 0 {
			t.Errorf("%s: %d steps, %d events, %v s, %v events/s", p.Policy, p.Steps, p.Events, p.WallS, p.EventsPerS)
		}
	}
}

// TestSimReplayRepeat: --repeat 3 replays three times the jobs, and the
// report says so where it names the trace.
func TestSimReplayRepeat(t *testing.T) {
	type view struct {
		Trace    string `json:"trace"`
		Policies []struct {
			Jobs       int `json:"jobs"`
			Unfinished int `json:"unfinished"`
		} `json:"policies"`
	}
	run := func(repeat string) view {
		out := filepath.Join(t.TempDir(), "r.json")
		code, _, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "reactive", "--no-lp", "--json", out, "--quiet", "--repeat", repeat)
		if code != 0 {
			t.Fatalf("--repeat %s: exit %d: %s", repeat, code, stderr)
		}
		var v view
		readJSONFile(t, out, &v)
		if len(v.Policies) != 1 || v.Policies[0].Unfinished != 0 {
			t.Fatalf("--repeat %s: %+v", repeat, v)
		}
		return v
	}
	one, three := run("1"), run("3")
	if three.Policies[0].Jobs != 3*one.Policies[0].Jobs || one.Policies[0].Jobs == 0 {
		t.Errorf("jobs: %d with --repeat 3, %d with 1", three.Policies[0].Jobs, one.Policies[0].Jobs)
	}
	if strings.Contains(one.Trace, "repeat") || !strings.HasSuffix(three.Trace, "×3 (--repeat)") {
		t.Errorf("trace named %q and %q", one.Trace, three.Trace)
	}
}

func TestSimReplayErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--trace", "testdata/small-trace.csv", "--format", "parquet"}, 2, `--format: invalid value "parquet"`},
		{[]string{"--trace", "testdata/small-trace.csv", "--policy", "magic"}, 2, `policy: invalid value "magic"`},
		{[]string{"--trace", "testdata/nope.csv"}, 1, "nope.csv"},
		{[]string{"--trace", "testdata/small-trace.csv", "--format", "pai"}, 2, "--pai-tasks"},
		{[]string{"--trace", "testdata/small-trace.csv", "--format", "csv", "--repeat", "0"}, 2, `--repeat: invalid value "0": want 1..100`},
		{[]string{"--trace", "testdata/small-trace.csv", "--format", "csv", "--repeat", "101"}, 2, `--repeat: invalid value "101": want 1..100`},
		{[]string{"--trace", "testdata/small-trace.csv", "--format", "csv", "--repeat", "2", "--util", "testdata/nope.csv"}, 2, `--repeat: invalid value "2": want 1 with --util`},
	} {
		code, _, stderr := runCLI(t, append([]string{"sim", "--quiet"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

func TestPlanPortfolioFromTrace(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "portfolio", "--trace", "testdata/small-trace.csv", "--format", "csv", "--gpu-model", "NVIDIA A100", "--json", "--no-sensitivity")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v struct {
		ExpectedCost json.Number `json:"expected_cost"`
		Baselines    struct {
			AllOnDemand json.Number `json:"all_on_demand"`
		} `json:"baselines"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	cost, _ := v.ExpectedCost.Float64()
	od, _ := v.Baselines.AllOnDemand.Float64()
	if cost <= 0 || cost > od {
		t.Errorf("expected cost %v, all on demand %v", cost, od)
	}
	// A unique part of the class names it, as in a demand CSV.
	if code, short, stderr := runCLI(t, "plan", "portfolio", "--trace", "testdata/small-trace.csv", "--format", "csv", "--gpu-model", "a100", "--json", "--no-sensitivity"); code != 0 || short != stdout {
		t.Errorf("--gpu-model a100: exit %d, %s; want the plan for NVIDIA A100", code, stderr)
	}
	if code, _, stderr := runCLI(t, "plan", "portfolio", "--trace", "testdata/small-trace.csv", "--format", "csv", "--gpu-model", "NVIDIA"); code != 2 || !strings.Contains(stderr, `--gpu-model: plan: unknown GPU class "NVIDIA": ambiguous`) {
		t.Errorf("--gpu-model NVIDIA: exit %d, %s; want 2 and the candidates", code, stderr)
	}
	if code, _, stderr := runCLI(t, "plan", "portfolio", "--trace", "testdata/small-trace.csv", "--format", "csv"); code == 0 || !strings.Contains(stderr, "gpu_model") {
		t.Errorf("a trace without GPU models and no --gpu-model: exit %d, %s", code, stderr)
	}
}

func TestTraceGenRoundTrip(t *testing.T) {
	out := filepath.Join(t.TempDir(), "g.csv")
	if code, _, stderr := runCLI(t, "trace", "gen", "--jobs", "500", "--seed", "9", "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	again := filepath.Join(t.TempDir(), "g2.csv")
	runCLI(t, "trace", "gen", "--jobs", "500", "--seed", "9", "-o", again)
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("the same seed generated different traces")
	}
	if lines := strings.Count(string(a), "\n"); lines != 501 {
		t.Errorf("%d lines, want a header and 500 jobs", lines)
	}
	code, stdout, stderr := runCLI(t, "sim", "--trace", out, "--format", "csv", "--policy", "gpufleet", "--quiet")
	if code != 0 || !strings.Contains(stdout, "500 jobs replayed") {
		t.Errorf("replaying the generated trace: exit %d %s %s", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "trace", "gen", "--jobs", "-1"); code != 2 {
		t.Errorf("negative --jobs: exit %d, want 2", code)
	}
}

func TestSkipText(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]int
		want string
	}{
		{nil, "none"},
		{map[string]int{"cpu-only job (no GPUs)": 4204}, "4204 cpu-only job (no GPUs)"},
		{map[string]int{"b": 2, "a": 2, "c": 7}, "7 c; 2 a; 2 b"},
	} {
		if got := skipText(tc.in); got != tc.want {
			t.Errorf("skipText(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// --lp-mps writes the LP relaxation for an exact solver.
func TestSimReplayLPMPS(t *testing.T) {
	mps := filepath.Join(t.TempDir(), "lp.mps")
	code, _, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "gpufleet", "--lp-mps", mps, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(mps)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.HasPrefix(s, "NAME gpufleet-lp-bound\n") || !strings.Contains(s, " E work_0\n") || !strings.HasSuffix(s, "ENDATA\n") {
		t.Errorf("not an MPS file:\n%.300s", s)
	}
}

// TestSimEventLog: --events writes every event of each policy's replay,
// as many rows as the JSON counts, each acquire and placement with the
// reason it gives, in time order within a policy.
func TestSimEventLog(t *testing.T) {
	dir := t.TempDir()
	out, events := filepath.Join(dir, "r.json"), filepath.Join(dir, "events.csv")
	code, _, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "gpufleet,reactive", "--no-lp", "--json", out, "--events", events, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v struct {
		Policies []struct {
			Policy string `json:"policy"`
			Events int    `json:"events"`
		} `json:"policies"`
	}
	readJSONFile(t, out, &v)
	rows := readCSVFile(t, events)
	if len(rows) < 2 || strings.Join(rows[0], ",") != "policy,at,kind,subject,reason" {
		t.Fatalf("event CSV header: %v", rows[:min(len(rows), 2)])
	}
	count := map[string]int{}
	kinds := map[string]map[string]int{}
	last := map[string]time.Time{}
	for _, r := range rows[1:] {
		at, err := time.Parse(time.RFC3339, r[1])
		if err != nil {
			t.Fatalf("row %v: %v", r, err)
		}
		if at.Before(last[r[0]]) {
			t.Errorf("row %v before the one above it", r)
		}
		last[r[0]] = at
		count[r[0]]++
		if kinds[r[0]] == nil {
			kinds[r[0]] = map[string]int{}
		}
		kinds[r[0]][r[2]]++
		if (r[2] == "acquire" || r[2] == "place") && (r[3] == "" || r[4] == "") {
			t.Errorf("%s without its subject or reason: %v", r[2], r)
		}
	}
	for _, p := range v.Policies {
		if count[p.Policy] != p.Events || p.Events == 0 {
			t.Errorf("%s: %d event rows, the replay counts %d", p.Policy, count[p.Policy], p.Events)
		}
		if kinds[p.Policy]["acquire"] == 0 || kinds[p.Policy]["place"] == 0 {
			t.Errorf("%s: no acquire or place among %v", p.Policy, kinds[p.Policy])
		}
	}
}

// readCSVFile reads a whole CSV file the command wrote.
func readCSVFile(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// readJSONFile decodes a JSON file the command wrote into v.
func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
