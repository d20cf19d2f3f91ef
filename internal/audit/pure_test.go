package audit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPure applies internal/arch's rule for decision packages to the
// audit engine: neither it nor any package of ours it depends on imports
// I/O packages or the store (only package load reads the store), and it
// never reads the wall clock.
func TestPure(t *testing.T) {
	const module = "github.com/gpufleet/gpufleet"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/internal/audit").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"os", "os/exec", "os/signal", "net", "net/http", "net/rpc", "database/sql", "io/ioutil", "io/fs", "syscall",
		"plugin", "log", "log/slog", module + "/internal/store"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue // the standard library's own fmt and time import os
		}
		for _, imp := range f[1:] {
			if slices.Contains(forbidden, imp) {
				t.Errorf("%s imports %s (reached from internal/audit): the audit does no I/O", f[0], imp)
			}
		}
	}
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range []string{"time.Now(", "time.Since(", "time.Until(", "time.Sleep(", "time.After(", "time.Tick("} {
			if strings.Contains(string(b), call) {
				t.Errorf("%s calls %s: time comes in as data", name, call)
			}
		}
	}
}
