package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

const cliChildEnv = "GPUFLEET_TEST_CLI_CHILD"

// TestCLIChild is the gpufleet binary for scripts that tests run (the
// exec provider's example starts agents with it); it does nothing in a
// normal run.
func TestCLIChild(t *testing.T) {
	if os.Getenv(cliChildEnv) == "" {
		return
	}
	os.Exit(mainArgs(flag.Args(), os.Stdout, os.Stderr))
}

// cliBinary returns an executable that runs this test binary as the
// gpufleet command: "cliBinary ARGS" is "gpufleet ARGS".
func cliBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gpufleet")
	script := "#!/bin/sh\nexec env " + cliChildEnv + "=1 '" + self + "' -test.run='^TestCLIChild$' -- \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}
