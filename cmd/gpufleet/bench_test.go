package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestBenchAPI drives a running server as the load generator does from
// its own process: every submission is acknowledged and then listed by
// the server, the agents' heartbeats are counted, and the server's CPU
// time comes from its /metrics.
func TestBenchAPI(t *testing.T) {
	t.Chdir(t.TempDir())
	token, base, _ := serveWith(t, "--rate-limit", "0")
	var out bytes.Buffer
	code := run(context.Background(), []string{"bench", "api", "--server", base, "--token", token,
		"--jobs", "300", "--clients", "4", "--agents", "20", "--agent-interval", "100ms", "--team", "load", "--json"}, &out, io.Discard)
	if code != 0 {
		t.Fatalf("bench api exited %d: %s", code, out.String())
	}
	var res benchAPI
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("bench api --json: %v\n%s", err, out.String())
	}
	if res.Stored != 300 || res.Failed != 0 {
		t.Errorf("stored %d of 300 jobs, %d submissions failed", res.Stored, res.Failed)
	}
	if res.SubmitsPerS <= 0 || res.SubmitP99Ms < res.SubmitP50Ms || res.SubmitP50Ms <= 0 {
		t.Errorf("submissions %.0f/s p50 %.2f ms p99 %.2f ms: want a rate and p50 <= p99", res.SubmitsPerS, res.SubmitP50Ms, res.SubmitP99Ms)
	}
	if res.Beats == 0 || res.BeatFailed != 0 {
		t.Errorf("%d heartbeats, %d failed: want some, none failed", res.Beats, res.BeatFailed)
	}
	if res.ServerCPUSec <= 0 {
		t.Errorf("server CPU %.3f s: want the change of process_cpu_seconds_total", res.ServerCPUSec)
	}
	// A second run on the same team adds to what is stored: the count is
	// the server's, not the bench's own tally.
	out.Reset()
	if code := run(context.Background(), []string{"bench", "api", "--server", base, "--token", token,
		"--jobs", "10", "--agents", "0", "--team", "load"}, &out, &out); code != 1 || !strings.Contains(out.String(), "stored 310") {
		t.Errorf("second run on the team: exit %d, want 1 (310 stored, not 10):\n%s", code, out.String())
	}
}

func TestServeRejectsBadDurabilityAndRateFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"--sqlite-sync", "off"},
		{"--rate-limit", "-1"},
		{"--rate-burst", "0"},
	} {
		var errb bytes.Buffer
		code := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), io.Discard, &errb)
		if code != 2 || !strings.Contains(errb.String(), args[0]) {
			t.Errorf("serve %v: exit %d, want 2 naming %s:\n%s", args, code, args[0], errb.String())
		}
	}
}

func TestParseCPUSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"# HELP process_cpu_seconds_total x\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n", 12.5, true},
		{"process_cpu_seconds_total_other 3\nprocess_cpu_seconds_total 0.25\n", 0.25, true},
		{"go_goroutines 7\n", 0, false},
		{"process_cpu_seconds_total x\n", 0, false},
	} {
		got, err := parseCPUSeconds(strings.NewReader(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseCPUSeconds(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
