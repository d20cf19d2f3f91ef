package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestQuoteJSON(t *testing.T) {
	code, out, errs := runCLI(t, "quote", "--offer", "idc-chengdu/cd1/v100x8", "--mode", "weekly",
		"--start", "2026-03-02T00:00:00Z", "--end", "2026-03-16T00:00:00Z", "--count", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v struct {
		Total    json.Number `json:"total"`
		Currency string      `json:"currency"`
		Billed   int64       `json:"billed_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Two machines, two weeks each at the demo catalog's weekly price.
	if v.Currency != "USD" || v.Billed != 14*86400 || v.Total == "" {
		t.Errorf("quote %+v", v)
	}
}

func TestQuoteAWSPerSecond(t *testing.T) {
	// The demo catalog's p4d.24xlarge is AWS's 21.957642/h billed per second
	// with a 60 s minimum: 30 s costs the minute, 21.957642/60 = 0.3659607.
	code, out, errs := runCLI(t, "quote", "--offer", "aws/us-east-1/p4d.24xlarge", "--mode", "on-demand",
		"--start", "2026-03-02T10:00:00Z", "--end", "2026-03-02T10:00:30Z", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `"total": 0.365961`) {
		t.Errorf("30 s of p4d: %s", out)
	}
}

func TestQuoteErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown offer", []string{"--offer", "aws/us-east-1/p9", "--start", "2026-03-02T00:00:00Z", "--end", "2026-03-03T00:00:00Z"}, 1, `unknown offer "aws/us-east-1/p9"`},
		{"end before start", []string{"--offer", "aws/us-east-1/p4d.24xlarge", "--start", "2026-03-02T00:00:00Z", "--end", "2026-03-01T00:00:00Z"}, 1, "end: invalid value"},
		{"bad time", []string{"--offer", "aws/us-east-1/p4d.24xlarge", "--start", "yesterday", "--end", "2026-03-01T00:00:00Z"}, 2, `--start: invalid value "yesterday"`},
		{"bad mode", []string{"--offer", "aws/us-east-1/p4d.24xlarge", "--mode", "yearly", "--start", "2026-03-02T00:00:00Z", "--end", "2026-03-03T00:00:00Z"}, 1, `mode: invalid value "yearly"`},
		{"missing flag", []string{"--offer", "aws/us-east-1/p4d.24xlarge"}, 1, "required flag"},
		{"missing catalog", []string{"--catalog", "/nonexistent/c.yaml", "--offer", "x", "--start", "2026-03-02T00:00:00Z", "--end", "2026-03-03T00:00:00Z"}, 1, "/nonexistent/c.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"quote"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.want) || out != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d and %q", code, errs, out, tc.code, tc.want)
			}
		})
	}
}
