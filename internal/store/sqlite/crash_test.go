package sqlite

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// TestCrash kills a process in the middle of submissions: nothing it
// acknowledged is lost.
func TestCrash(t *testing.T) {
	if os.Getenv(storetest.CrashEnv) != "" {
		s, err := Open(t.Context(), os.Getenv("GPUFLEET_CRASH_DB"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		storetest.CrashChild(s)
		return
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	storetest.RunCrash(t, "TestCrash", []string{"GPUFLEET_CRASH_DB=" + path}, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestTwoStoresOneFile: two stores on one file (two processes, say)
// write at once; the busy timeout makes them wait their turn, and no
// "database is locked" reaches a caller.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	var stores []*Store
	for range 2 {
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	if err := stores[0].Teams().CreateTeam(t.Context(), teamFor("ml")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for w := range 8 {
		s := stores[w%2]
		wg.Go(func() {
			for i := range 50 {
				if _, _, err := s.Jobs().SubmitJob(t.Context(), jobFor(w, i), ""); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p, err := stores[1].Jobs().ListJobs(t.Context(), store.JobFilter{Limit: store.MaxLimit})
	if err != nil || len(p.Items) != 400 {
		t.Errorf("%d jobs (%v), want 400", len(p.Items), err)
	}
}
