package main

import (
	"bytes"
	"context"
	"encoding/json"
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
// never through a float.
func TestPlanTermJSONExact(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "term", "--json", "--hours", "3", "--hourly", "0.1", "--currency", "CNY")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	for _, want := range []string{`"total": 0.30,`, `"currency": "CNY"`, `"cost": 0.30`} {
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
