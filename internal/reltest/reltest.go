// Package reltest lets the reliability and security tests say what they
// tried and what held, so that docs/RELIABILITY.md is produced from a test
// run rather than written by hand (see .ci/reliability).
//
// A test calls Record once it knows how much it did; the entry is written
// when the test ends, with OK set from whether it failed. Without
// GPUFLEET_RELIABILITY_OUT set, Record writes nothing: the tests run the
// same either way.
package reltest

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
)

// Env names the JSON-lines file entries are appended to.
const Env = "GPUFLEET_RELIABILITY_OUT"

// Entry is one line of the reliability table.
type Entry struct {
	// Area groups entries: "faults", "security", "load", "soak", "input".
	Area string `json:"area"`
	// Test is the test's name; Record fills it in.
	Test string `json:"test"`
	// Package is the Go package; Record fills it in from the working
	// directory when empty.
	Package string `json:"package"`
	// Done says what was done, e.g. "kill -9 of serve during submissions".
	Done string `json:"done"`
	// Amount says how much: requests, faults, inputs tried.
	Amount string `json:"amount"`
	// Held says what was checked to hold afterwards.
	Held string `json:"held"`
	// OK is whether the test passed.
	OK bool `json:"ok"`
}

var mu sync.Mutex

// Record writes e when t ends, with its outcome.
func Record(t testing.TB, e Entry) {
	t.Helper()
	path := os.Getenv(Env)
	if path == "" {
		return
	}
	if e.Test == "" {
		e.Test = t.Name()
	}
	if e.Package == "" {
		if wd, err := os.Getwd(); err == nil {
			e.Package = wd
		}
	}
	t.Cleanup(func() {
		e.OK = !t.Failed()
		line, err := json.Marshal(e)
		if err != nil {
			t.Errorf("reltest: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("reltest: %v", err)
			return
		}
		defer f.Close()
		// One write per line: O_APPEND keeps lines from parallel test
		// processes whole.
		if _, err := f.Write(append(line, '\n')); err != nil {
			t.Errorf("reltest: %v", err)
		}
	})
}
