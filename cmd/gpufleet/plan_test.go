package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// termOut is what the tests read back from "plan term --json".
type termOut struct {
	Total    json.Number `json:"total"`
	Currency string      `json:"currency"`
	Count    int         `json:"count"`
	Plan     string      `json:"plan"`
	Periods  []struct {
		Period string `json:"period"`
		Count  int64  `json:"count"`
	} `json:"periods"`
	Alternatives []struct {
		Plan   string      `json:"plan"`
		Total  json.Number `json:"total"`
		Chosen bool        `json:"chosen"`
	} `json:"alternatives"`
	PaidHours   json.Number `json:"paid_hours"`
	NeededHours json.Number `json:"needed_hours"`
	IdleHours   json.Number `json:"idle_hours"`
	Reason      string      `json:"reason"`
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// summary flattens termOut for comparison: totals as numbers, so 900 and
// 900.00 agree, but exactly (no float formatting).
func summary(t *testing.T, o termOut) []string {
	t.Helper()
	s := []string{"total " + num(t, o.Total), "plan " + o.Plan}
	for _, p := range o.Periods {
		s = append(s, "period "+p.Period+" x"+strconv.FormatInt(p.Count, 10))
	}
	for _, a := range o.Alternatives {
		mark := ""
		if a.Chosen {
			mark = " *"
		}
		s = append(s, "alt "+a.Plan+" "+num(t, a.Total)+mark)
	}
	s = append(s, "hours paid "+num(t, o.PaidHours)+" needed "+num(t, o.NeededHours)+" idle "+num(t, o.IdleHours))
	return s
}

// num normalises a JSON number's decimals: "900.00" → "900", "0.30" → "0.3".
func num(t *testing.T, n json.Number) string {
	t.Helper()
	s := n.String()
	if _, err := n.Float64(); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func TestPlanTermJSON(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "seed: two weeks beat a month",
			args: []string{"--days", "14", "--weekly", "450", "--monthly", "1800"},
			want: []string{"total 900", "plan all weekly", "period week x2",
				"alt all weekly 900 *", "alt all monthly 1800",
				"hours paid 336 needed 336 idle 0"},
		},
		{
			name: "a week and three days",
			args: []string{"--days", "10", "--daily", "80", "--weekly", "450"},
			want: []string{"total 690", "plan mix", "period week x1", "period day x3",
				"alt mix 690 *", "alt all daily 800", "alt all weekly 900",
				"hours paid 240 needed 240 idle 0"},
		},
		{
			name: "days and hours, eight GPUs",
			args: []string{"--days", "3", "--hours", "5", "--hourly", "5", "--daily", "80", "--count", "8"},
			want: []string{"total 2120", "plan mix", "period day x3", "period hour x5",
				"alt mix 2120 *", "alt all daily 2560", "alt all hourly 3080",
				"hours paid 77 needed 77 idle 0"},
		},
		{
			name: "a month beats four weeks",
			args: []string{"--days", "28", "--weekly", "450", "--monthly", "1500"},
			want: []string{"total 1500", "plan all monthly", "period month x1",
				"alt all monthly 1500 *", "alt all weekly 1800",
				"hours paid 730 needed 672 idle 58"},
		},
		{
			name: "exact decimals",
			args: []string{"--hours", "3", "--hourly", "0.1", "--currency", "cny"},
			want: []string{"total 0.3", "plan all hourly", "period hour x3",
				"alt all hourly 0.3 *", "hours paid 3 needed 3 idle 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"plan", "term", "--json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d, stderr: %s", code, stderr)
			}
			var o termOut
			if err := json.Unmarshal([]byte(stdout), &o); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, stdout)
			}
			if diff := cmp.Diff(tt.want, summary(t, o)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if o.Reason == "" || o.Currency == "" {
				t.Errorf("reason %q, currency %q: want both", o.Reason, o.Currency)
			}
		})
	}
}

// TestPlanTermJSONExact checks that amounts are written from micro-units,
// never through a float (which would print 0.30000000000000004).
func TestPlanTermJSONExact(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "term", "--json", "--hours", "3", "--hourly", "0.1", "--currency", "CNY")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	for _, want := range []string{`"total": 0.3,`, `"currency": "CNY"`, `"cost": 0.3`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %s:\n%s", want, stdout)
		}
	}
}

func TestPlanTermTable(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "term", "--days", "14", "--weekly", "450", "--monthly", "1800", "--currency", "CNY")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	for _, want := range []string{
		"*  all weekly   900.00   2 weeks",
		"all monthly  1800.00  1 month",
		"Chosen: 2 weeks for 900.00 CNY.",
		"pay for 16d 10h idle",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestPlanTermErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of stderr
	}{
		{"no price", []string{"--days", "3"}, 2, []string{"--hourly, --daily, --weekly, --monthly"}},
		{"negative price", []string{"--days", "3", "--weekly", "-450"}, 2, []string{"--weekly", `"-450"`, ">= 0"}},
		{"unparsable price", []string{"--days", "3", "--daily", "80x"}, 2, []string{"--daily", `"80x"`, "decimal"}},
		{"negative days", []string{"--days", "-1", "--daily", "80"}, 2, []string{"--days", `"-1"`}},
		{"negative hours", []string{"--hours", "-1", "--daily", "80"}, 2, []string{"--hours"}},
		{"zero length", []string{"--daily", "80"}, 2, []string{"--days", "1..87600 hours"}},
		{"beyond ten years", []string{"--days", "3651", "--daily", "80"}, 2, []string{"--days", "3651"}},
		{"too long in hours", []string{"--days", "3650", "--hours", "1", "--daily", "80"}, 2, []string{"10 years"}},
		{"no machines", []string{"--days", "3", "--daily", "80", "--count", "0"}, 2, []string{"--count", `"0"`}},
		{"unknown currency", []string{"--days", "3", "--daily", "80", "--currency", "XXX"}, 2, []string{"--currency", `"XXX"`}},
		{"not a number of days", []string{"--days", "two", "--daily", "80"}, 2, []string{"--days"}},
		{"unknown flag", []string{"--days", "3", "--yearly", "80"}, 2, []string{"yearly"}},
		{"stray argument", []string{"--days", "3", "--daily", "80", "extra"}, 2, []string{`unexpected argument "extra"`}},
		{"overflow", []string{"--days", "3650", "--daily", "9000000000000", "--count", "1000"}, 1, []string{"plan term:", "overflows"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"plan", "term"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

func TestPlanHelp(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan")
	if code != 0 || !strings.Contains(stdout, "term") {
		t.Errorf("plan: exit %d, stdout %q, stderr %q; want help listing term", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "plan", "bogus"); code != 2 {
		t.Errorf("plan bogus: exit %d, want 2", code)
	}
}

const (
	v100Catalog = "../../internal/plan/testdata/v100-cny.yaml"
	v100Peak    = "../../internal/plan/testdata/v100-peak.csv"
	a100Catalog = "../../internal/plan/testdata/a100-idc.yaml"
	a100Week    = "../../internal/plan/testdata/a100-week.csv"
)

// portfolioOut is what the tests read back from "plan portfolio --json".
type portfolioOut struct {
	Method   string `json:"method"`
	Reserved []struct {
		GPUModel string      `json:"gpu_model"`
		Count    int64       `json:"count"`
		Term     string      `json:"term"`
		PerGPU   json.Number `json:"per_gpu"`
	} `json:"reserved"`
	OnDemandPeak int64       `json:"on_demand_peak"`
	SpotShare    json.Number `json:"spot_share"`
	ExpectedCost json.Number `json:"expected_cost"`
	IdleShare    json.Number `json:"idle_share"`
	Baselines    struct {
		AllOnDemand *json.Number `json:"all_on_demand"`
		AllMonthly  *json.Number `json:"all_monthly"`
		PeakSized   *json.Number `json:"peak_sized"`
	} `json:"baselines"`
	Savings struct {
		AllMonthly *json.Number `json:"all_monthly"`
	} `json:"savings"`
	Sensitivity []struct {
		DemandChange  string      `json:"demand_change"`
		ExpectedCost  json.Number `json:"expected_cost"`
		FixedBaseCost json.Number `json:"fixed_base_cost"`
	} `json:"sensitivity"`
	Classes []struct {
		ShiftedGPUHours int64 `json:"shifted_gpu_hours"`
		SpotGPUHours    int64 `json:"spot_gpu_hours"`
		Hourly          []struct {
			OnDemand int64 `json:"on_demand"`
		} `json:"hourly"`
	} `json:"classes"`
}

func portfolioSummary(t *testing.T, o portfolioOut) []string {
	t.Helper()
	s := []string{"method " + o.Method}
	for _, r := range o.Reserved {
		s = append(s, "reserve "+strconv.FormatInt(r.Count, 10)+" × "+r.GPUModel+" on "+r.Term+" at "+num(t, r.PerGPU))
	}
	opt := func(n *json.Number) string {
		if n == nil {
			return "null"
		}
		return num(t, *n)
	}
	s = append(s,
		"on-demand peak "+strconv.FormatInt(o.OnDemandPeak, 10),
		"spot share "+num(t, o.SpotShare),
		"cost "+num(t, o.ExpectedCost),
		"idle "+num(t, o.IdleShare),
		"all on demand "+opt(o.Baselines.AllOnDemand)+", all monthly "+opt(o.Baselines.AllMonthly)+", peak sized "+opt(o.Baselines.PeakSized),
		"saving vs all monthly "+opt(o.Savings.AllMonthly),
	)
	for _, sc := range o.Sensitivity {
		s = append(s, "demand "+sc.DemandChange+": "+num(t, sc.ExpectedCost)+", base kept "+num(t, sc.FixedBaseCost))
	}
	return s
}

func TestPlanPortfolioJSON(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			// The seed's "2 V100 monthly + 6 on demand at peak", 65% below
			// all-monthly: 2 × 1800 + 6 GPUs × 24 h × 10 = 5040 against
			// 8 × 1800 = 14400.
			name: "seed: 2 monthly + 6 on demand",
			args: []string{"--demand", v100Peak, "--catalog", v100Catalog},
			want: []string{
				"method ldc",
				"reserve 2 × NVIDIA Tesla V100 on 1 month at 1800",
				"on-demand peak 6", "spot share 0", "cost 5040", "idle 0",
				"all on demand 16040, all monthly 14400, peak sized 14400",
				"saving vs all monthly 0.65",
				"demand +20%: 5520, base kept 5520",
				"demand -20%: 4560, base kept 4560",
			},
		},
		{
			// A week of A100 on the demo catalog: weekly terms, off-peak
			// on-demand at half price, spot with reclaims, shifting.
			name: "demo catalog with spot and shifting",
			args: []string{"--demand", a100Week},
			want: []string{
				"method decomposed",
				"reserve 5 × NVIDIA A100 on 1 week at 200",
				"on-demand peak 35", "spot share 0.2486", "cost 3320.047724", "idle 0",
				"all on demand 3984, all monthly 31500, peak sized 8000",
				"saving vs all monthly 0.8946",
				"demand +20%: 3978.049336, base kept 3978.049336",
				"demand -20%: 2662.046112, base kept 2663.97162",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"plan", "portfolio", "--json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var o portfolioOut
			if err := json.Unmarshal([]byte(stdout), &o); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, stdout)
			}
			if diff := cmp.Diff(tt.want, portfolioSummary(t, o)); diff != "" {
				t.Errorf("plan portfolio (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanPortfolioHourlyAndSolvers(t *testing.T) {
	var costs []string
	for _, solver := range []string{"auto", "decomposed", "ldc"} {
		code, stdout, stderr := runCLI(t, "plan", "portfolio", "--json", "--hourly", "--no-sensitivity", "--solver", solver, "--demand", v100Peak, "--catalog", v100Catalog)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", solver, code, stderr)
		}
		var o portfolioOut
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatal(err)
		}
		if len(o.Classes) != 1 || len(o.Classes[0].Hourly) != 730 || o.Classes[0].Hourly[300].OnDemand != 6 || o.Classes[0].Hourly[0].OnDemand != 0 {
			t.Fatalf("%s: hourly plan wrong: %+v", solver, o.Classes)
		}
		if len(o.Sensitivity) != 0 {
			t.Errorf("%s: sensitivity with --no-sensitivity", solver)
		}
		costs = append(costs, num(t, o.ExpectedCost))
	}
	if diff := cmp.Diff([]string{"5040", "5040", "5040"}, costs); diff != "" {
		t.Errorf("costs by solver (-want +got):\n%s", diff)
	}
}

func TestPlanPortfolioText(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "portfolio", "--demand", v100Peak, "--catalog", v100Catalog)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"NVIDIA Tesla V100  2         1 month (1800.00)",
		"against all monthly (peak GPUs): 14400.00, saving 65%",
		"GPU 3 only 24 h, 240.00 on demand",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestPlanPortfolioErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	negative := write("negative.csv", "hour,gpu_model,gpus\n0,V100,2\n1,V100,-3\n")
	unknown := write("unknown.csv", "hour,gpu_model,gpus\n0,V100,2\n1,H100,1\n")
	malformed := write("malformed.csv", "hour,gpu_model,gpus\n0,V100,2\n1,V100\n")
	empty := write("empty.csv", "hour,gpu_model,gpus\n")
	share := write("share.csv", "hour,gpu_model,gpus,interruptible,deferrable\n0,V100,2,0.7,40%\n")
	dup := write("dup.csv", "timestamp,gpu_model,gpus\n2026-01-01T00:00:00Z,V100,2\n2026-01-01T00:00:00+00:00,v100,1\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no input", []string{}, 2, `--demand: invalid value "": want a demand CSV (--demand FILE) or a trace (--trace FILE --format F)`},
		{"both inputs", []string{"--demand", v100Peak, "--trace", "x.csv", "--format", "csv"}, 2, "either --demand or --trace, not both"},
		{"missing trace", []string{"--trace", "helios.csv", "--format", "helios"}, 1, "open helios.csv"},
		{"bad format", []string{"--trace", "t", "--format", "slurm"}, 2, `--format: invalid value "slurm"`},
		{"missing file", []string{"--demand", filepath.Join(dir, "nope.csv"), "--catalog", v100Catalog}, 1, "read demand: open " + filepath.Join(dir, "nope.csv")},
		{"negative", []string{"--demand", negative, "--catalog", v100Catalog}, 1, negative + `:3: gpus: invalid value "-3": want a whole number of GPUs 0..1000000`},
		{"unknown class", []string{"--demand", unknown, "--catalog", v100Catalog}, 1, unknown + `:3: gpu_model: plan: unknown GPU class "H100": the catalog rents "NVIDIA Tesla V100"`},
		{"malformed", []string{"--demand", malformed, "--catalog", v100Catalog}, 1, malformed + ":3: column 1: wrong number of fields"},
		{"empty", []string{"--demand", empty, "--catalog", v100Catalog}, 1, empty + ": no demand rows after the header: the series is empty"},
		{"shares", []string{"--demand", share, "--catalog", v100Catalog}, 1, share + `:2: interruptible+deferrable: invalid value "0.7+40%": want shares that add up to at most 1 (100%)`},
		{"duplicate", []string{"--demand", dup, "--catalog", v100Catalog}, 1, dup + ":3: timestamp: NVIDIA Tesla V100 has a second row for hour 0 (the first is on line 2)"},
		{"lp too long", []string{"--demand", v100Peak, "--catalog", v100Catalog, "--solver", "lp"}, 1, "the LP takes at most 72 hours (the series has 730)"},
		{"bad solver", []string{"--demand", v100Peak, "--solver", "cplex"}, 2, `--solver: invalid value "cplex"`},
		{"bad window", []string{"--demand", v100Peak, "--shift-window", "0"}, 2, `--shift-window: invalid value "0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"plan", "portfolio"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

// jobOut is what the tests read back from "plan job --json".
type jobOut struct {
	Recommended *struct {
		GPUs  int         `json:"gpus"`
		Cost  json.Number `json:"cost"`
		Term  string      `json:"term"`
		Hours json.Number `json:"duration_hours"`
	} `json:"recommended"`
	Options []struct {
		GPUs          int         `json:"gpus"`
		DurationHours json.Number `json:"duration_hours"`
		MeetsDeadline bool        `json:"meets_deadline"`
		Cost          json.Number `json:"cost"`
		Term          string      `json:"term"`
		Machines      int         `json:"machines"`
		IdleShare     json.Number `json:"idle_share"`
	} `json:"options"`
	Reason string `json:"reason"`
}

// TestPlanJobSeed is the source document's case: one A100 benched on a
// sample shows the full training needs 8 GPUs for 14 days; renting 16
// would idle much of what it pays for. Constructed numbers: 100 samples/s
// on one GPU, 90% efficiency per doubling, 7M samples × 100 epochs, weekly
// or monthly 8-GPU machines.
func TestPlanJobSeed(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "job", "--json", "--catalog", a100Catalog, "--bench", "A100:1:100",
		"--samples", "7_000_000", "--epochs", "100", "--deadline", "14d", "--efficiency", "0.9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var o jobOut
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range o.Options {
		got = append(got, fmt.Sprintf("%d GPUs: %sh met=%v %s on %d machines (%s), idle %s", op.GPUs, num(t, op.DurationHours), op.MeetsDeadline, num(t, op.Cost), op.Machines, op.Term, num(t, op.IdleShare)))
	}
	want := []string{
		"1 GPUs: 1944.444444h met=false 17400 on 1 machines (2 months + 3 weeks), idle 0.8762",
		"2 GPUs: 1080.246944h met=false 11100 on 1 machines (1 month + 3 weeks), idle 0.7811",
		"4 GPUs: 600.137222h met=false 6300 on 1 machines (1 month), idle 0.5889",
		"8 GPUs: 333.409722h met=true 3200 on 1 machines (2 weeks), idle 0.0077",
		"16 GPUs: 185.227778h met=true 6400 on 2 machines (2 weeks), idle 0.4487",
		"32 GPUs: 102.904444h met=true 6400 on 4 machines (1 week), idle 0.3875",
		"64 GPUs: 57.169167h met=true 12800 on 8 machines (1 week), idle 0.6597",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	if o.Recommended == nil || o.Recommended.GPUs != 8 || num(t, o.Recommended.Cost) != "3200" {
		t.Fatalf("recommended %+v, want 8 GPUs for 3200", o.Recommended)
	}
	for _, want := range []string{"4 GPUs would take 25d 8m 14s, past the deadline", "16 GPUs would finish in 7d 17h 13m 40s but pay 6400.00 for 16 GPUs × 14d, 44.87% of it idle (+3200.00)"} {
		if !strings.Contains(o.Reason, want) {
			t.Errorf("reason lacks %q: %s", want, o.Reason)
		}
	}
}

func TestPlanJobErrors(t *testing.T) {
	base := []string{"plan", "job", "--catalog", a100Catalog, "--samples", "1000", "--deadline", "1d"}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no bench", nil, 2, "--bench: invalid value"},
		{"bad bench", []string{"--bench", "A100:x:5"}, 2, `--bench: invalid value "A100:x:5"`},
		{"unknown model", []string{"--bench", "H100:1:5"}, 2, `unknown GPU class "H100": the catalog rents "NVIDIA A100"`},
		{"both scalings", []string{"--bench", "A100:1:5", "--efficiency", "0.9", "--serial-fraction", "0.1"}, 2, "either --efficiency or --serial-fraction"},
		{"bad deadline", []string{"--bench", "A100:1:5", "--deadline", "soon"}, 2, `--deadline: invalid value "soon"`},
		{"misses deadline", []string{"--bench", "A100:1:0.0001", "--max-gpus", "2"}, 1, "no option meets the 1d deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append(append([]string{}, base...), tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}
