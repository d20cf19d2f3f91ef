package reltest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordWritesOutcomeAtEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	t.Setenv(Env, path)
	t.Run("passes", func(t *testing.T) {
		Record(t, Entry{Area: "faults", Done: "x", Amount: "3 faults", Held: "nothing lost"})
		if _, err := os.Stat(path); err == nil {
			t.Fatal("entry written before the test ended")
		}
	})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1: %q", len(lines), raw)
	}
	var e Entry
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if !e.OK || e.Test != "TestRecordWritesOutcomeAtEnd/passes" || e.Amount != "3 faults" || !strings.HasSuffix(e.Package, "reltest") {
		t.Fatalf("entry %+v", e)
	}
}

func TestRecordWithoutEnvWritesNothing(t *testing.T) {
	t.Setenv(Env, "")
	dir := t.TempDir()
	t.Chdir(dir)
	t.Run("x", func(t *testing.T) { Record(t, Entry{Area: "faults"}) })
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("files %v, err %v", entries, err)
	}
}
