package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoProgressOffTerminal: the long commands show progress on a
// terminal only; with stderr a file (a log, CI) they write none of it,
// --quiet or not.
func TestNoProgressOffTerminal(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.csv")
	for _, args := range [][]string{
		{"trace", "gen", "--jobs", "20000", "-o", trace},
		{"sim", "--trace", "testdata/small-trace.csv", "--format", "csv", "--policy", "gpufleet,reactive"},
		{"plan", "portfolio", "--demand", "../../internal/plan/testdata/v100-peak.csv", "--catalog", "../../internal/plan/testdata/v100-cny.yaml"},
	} {
		t.Run(args[0], func(t *testing.T) {
			stderr, err := os.Create(filepath.Join(dir, args[0]+".err"))
			if err != nil {
				t.Fatal(err)
			}
			defer stderr.Close()
			var stdout bytes.Buffer
			if code := run(t.Context(), args, &stdout, stderr); code != 0 {
				b, _ := os.ReadFile(stderr.Name())
				t.Fatalf("exit %d: %s", code, b)
			}
			b, err := os.ReadFile(stderr.Name())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "\x1b[") || strings.Contains(string(b), "[....") || strings.Contains(string(b), " left") {
				t.Errorf("progress on a file: %q", b)
			}
		})
	}
}
