package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// trace gen --deadlines gives that share of the jobs a deadline column;
// bad values are usage errors naming the flag and what is allowed.
func TestTraceGenDeadlines(t *testing.T) {
	out := filepath.Join(t.TempDir(), "d.csv")
	if code, _, stderr := runCLI(t, "trace", "gen", "--jobs", "400", "--deadlines", "50", "--deadline-slack", "1.5-2", "--deadline-grace", "5m", "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := readCSVFile(t, out)
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	dated := 0
	for _, r := range rows[1:] {
		if r[col["deadline_s"]] != "" {
			dated++
		}
	}
	if dated < 150 || dated > 250 {
		t.Errorf("%d of 400 jobs have a deadline; want about half", dated)
	}
	for _, tc := range []struct{ args, want string }{
		{"--deadlines 101", "--deadlines"},
		{"--deadlines 10 --deadline-slack 0.5-2", "--deadline-slack"},
		{"--deadlines 10 --deadline-slack 3-2", "--deadline-slack"},
		{"--deadlines 10 --deadline-grace -1m", "--deadline-grace"},
	} {
		code, _, stderr := runCLI(t, append([]string{"trace", "gen", "--jobs", "10"}, strings.Fields(tc.args)...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %q; want 2 naming %s", tc.args, code, stderr, tc.want)
		}
	}
}
