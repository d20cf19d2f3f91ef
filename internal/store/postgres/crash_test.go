package postgres

import (
	"os"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// TestCrash kills a process in the middle of submissions: nothing it
// acknowledged is lost.
func TestCrash(t *testing.T) {
	if os.Getenv(storetest.CrashEnv) != "" {
		s, err := Open(t.Context(), testDSN(t), Options{Schema: os.Getenv("GPUFLEET_CRASH_SCHEMA")})
		if err != nil {
			t.Fatal(err)
		}
		storetest.CrashChild(s)
		return
	}
	schema := newSchema(t)
	storetest.RunCrash(t, "TestCrash", []string{"GPUFLEET_CRASH_SCHEMA=" + schema}, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), testDSN(t), Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
