package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sim --spot-trace and --util: the synthetic traces in the published
// layout cover the demo catalog's V100 spot offer, said on stderr; a
// utilization series gives busy GPU-hours and ladder alerts in the JSON;
// and bad inputs are errors naming file, line and value.
func TestSimSpotTraceAndUtil(t *testing.T) {
	dir := t.TempDir()
	util := filepath.Join(dir, "util.csv")
	var b strings.Builder
	b.WriteString("id,time,utilization\n")
	for i := range 200 {
		b.WriteString(strconv.Itoa(i) + ",0,0.5" + "\n")
	}
	if err := os.WriteFile(util, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	code, _, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "gpufleet", "--no-lp", "--quiet",
		"--spot-trace", "../../internal/provider/sim/testdata/spot-traces", "--util", util, "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "spot trace: aws/us-east-1/p3.2xlarge follows ") {
		t.Errorf("stderr %q: want the covered offer", stderr)
	}
	var v struct {
		Policies []struct {
			Allocated json.Number    `json:"allocated_gpu_hours"`
			Busy      json.Number    `json:"busy_gpu_hours"`
			Alerts    map[string]int `json:"idle_alerts"`
		} `json:"policies"`
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &v); err != nil || len(v.Policies) != 1 {
		t.Fatalf("%v: %s", err, data)
	}
	if v.Policies[0].Busy == "" {
		t.Errorf("no busy_gpu_hours in %s", data)
	}

	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("id,time,utilization\nj,0,35\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--util", bad}, `bad.csv:2: column 3 (utilization): invalid value "35": want a fraction 0..1`},
		{[]string{"--spot-trace", t.TempDir()}, `no .json trace files`},
		{[]string{"--spot-trace", dir}, `r.json: unexpected file name "r.json": want ZONE_GPU_COUNT.json`},
		{[]string{"--util", filepath.Join(dir, "none.csv")}, `--util: open `},
	} {
		code, _, stderr := runCLI(t, append([]string{"sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "gpufleet", "--no-lp", "--quiet"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}
