package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func testTx(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")

	// A tick: a lease intent, a placement, the events — all or nothing.
	tick := func(tx store.Tx, n int) error {
		l := intent(fmt.Sprintf("L%d", n))
		if err := tx.Leases().CreateLease(c, l); err != nil {
			return err
		}
		if _, _, err := tx.Jobs().SubmitJob(c, job(fmt.Sprintf("j%d", n), "ml"), ""); err != nil {
			return err
		}
		// Reads inside see the writes before commit.
		if _, err := tx.Leases().GetLease(c, l.ID); err != nil {
			return fmt.Errorf("read own write: %w", err)
		}
		_, err := tx.Events().AppendEvents(c, core.Event{At: at(n), Kind: "acquire", Subject: l.ID, Reason: "tick"})
		return err
	}
	ok(t, s.Tx(c, func(tx store.Tx) error { return tick(tx, 1) }), "committed tick")
	for _, id := range []string{"L1"} {
		_, err := s.Leases().GetLease(c, id)
		ok(t, err, "committed lease")
	}

	boom := errors.New("provider said no")
	err := s.Tx(c, func(tx store.Tx) error {
		if err := tick(tx, 2); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Tx returned %v, want fn's error", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("a panic in fn did not go on")
			}
		}()
		_ = s.Tx(c, func(tx store.Tx) error {
			if err := tick(tx, 3); err != nil {
				return err
			}
			panic("bug")
		})
	}()
	for _, n := range []int{2, 3} {
		_, err := s.Leases().GetLease(c, fmt.Sprintf("L%d", n))
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("lease of rolled-back tick %d", n))
		_, err = s.Jobs().GetJob(c, fmt.Sprintf("j%d", n))
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("job of rolled-back tick %d", n))
	}
	p, err := s.Events().ListEvents(c, store.EventFilter{})
	ok(t, err, "events")
	if len(p.Items) != 1 {
		t.Errorf("%d events after one committed tick and two rolled back", len(p.Items))
	}

	// A failed operation inside a transaction leaves it usable, and
	// leaves nothing of itself: the caller may carry on.
	err = s.Tx(c, func(tx store.Tx) error {
		err := tx.Leases().CreateLease(c, intent("L1")) // exists
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("duplicate intent: %v, want a conflict", err)
		}
		bad := team("t2")
		bad.Quotas = append(bad.Quotas, core.Quota{GPUClass: "L4"}, core.Quota{GPUClass: "L4"}) // caught by validation
		if err := tx.Teams().CreateTeam(c, bad); err == nil {
			return errors.New("duplicate quota class accepted")
		}
		return tx.Leases().CreateLease(c, intent("L4"))
	})
	ok(t, err, "transaction with a failed operation")
	_, err = s.Leases().GetLease(c, "L4")
	ok(t, err, "lease written after a failed operation")
}

func testPagination(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml", "web")
	const seeded = 120
	for i := range seeded {
		submit(t, s, job(fmt.Sprintf("seed-%03d", i), []string{"ml", "web"}[i%2]))
	}
	// Page through while others insert: every seeded job exactly once,
	// nothing twice.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := s.Jobs().SubmitJob(c, job(fmt.Sprintf("live-%d-%d", w, i), "ml"), ""); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var got []store.Job
	for _, f := range []store.JobFilter{{}, {Team: "ml"}} {
		got = append(got, allJobs(t, s, f, 7)...)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent submit: %v", err)
	}
	seen := map[string]int{}
	for _, j := range got {
		seen[j.ID]++
	}
	// The first listing is of all teams, the second of ml only.
	for i := range seeded {
		id := fmt.Sprintf("seed-%03d", i)
		want := 1
		if i%2 == 0 {
			want = 2
		}
		if seen[id] != want {
			t.Errorf("%s listed %d times, want %d", id, seen[id], want)
		}
	}
	// Within one listing no job repeats.
	one := allJobs(t, s, store.JobFilter{}, 13)
	ids := jobIDs(one)
	if hasDup(ids) {
		t.Error("a listing repeats a job")
	}

	for _, tc := range []struct {
		name  string
		f     store.JobFilter
		field string
		value string
	}{
		{"negative limit", store.JobFilter{Limit: -1}, "limit", "-1"},
		{"huge limit", store.JobFilter{Limit: store.MaxLimit + 1}, "limit", "-"},
		{"garbage cursor", store.JobFilter{Cursor: "not-a-cursor!"}, "cursor", "-"},
		{"cursor of another listing", store.JobFilter{Cursor: store.EncodeCursor("events", 3)}, "cursor", "-"},
		{"bad state", store.JobFilter{States: []core.JobState{"lost"}}, "state", "lost"},
		{"bad tier", store.JobFilter{Tier: "gold"}, "tier", "gold"},
	} {
		_, err := s.Jobs().ListJobs(c, tc.f)
		wantField(t, err, tc.field, tc.value, tc.name)
	}
}

func hasDup(ids []string) bool {
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return true
		}
		seen[id] = true
	}
	return false
}

func testConcurrency(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	const workers, each = 8, 25

	// errs collects what the goroutines saw; check reports it.
	var mu sync.Mutex
	var errs []error
	report := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range errs {
			if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
				t.Errorf("a lock error reached the caller: %v", err)
			} else {
				t.Error(err)
			}
		}
		errs = nil
	}

	// Many writers at once: distinct jobs all land; the same idempotency
	// key gives one job to all; read-modify-write in Tx loses nothing.
	var wg sync.WaitGroup
	created := make([]bool, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, _, err := s.Jobs().SubmitJob(c, job(fmt.Sprintf("w%d-%d", w, i), "ml"), ""); err != nil {
					report(fmt.Errorf("submit: %w", err))
				}
				j, made, err := s.Jobs().SubmitJob(c, job(fmt.Sprintf("dup-%d-%d", w, i), "ml"), "same-key")
				if err != nil {
					report(fmt.Errorf("idempotent submit: %w", err))
				} else if j.IdempotencyKey != "same-key" {
					report(fmt.Errorf("idempotent submit returned key %q", j.IdempotencyKey))
				}
				created[w*each+i] = made
				err = s.Tx(c, func(tx store.Tx) error {
					ls, err := tx.Loop().LoadLoop(c)
					if err != nil {
						return err
					}
					ls.NextID++
					_, err = tx.Loop().SaveLoop(c, ls)
					return err
				})
				if err != nil {
					report(fmt.Errorf("increment: %w", err))
				}
			}
		})
	}
	wg.Wait()
	check()
	n := 0
	for _, m := range created {
		if m {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d submissions with one key created a job, want 1", n)
	}
	all := allJobs(t, s, store.JobFilter{}, store.MaxLimit)
	if len(all) != workers*each+1 {
		t.Errorf("%d jobs, want %d", len(all), workers*each+1)
	}
	ls, err := s.Loop().LoadLoop(c)
	ok(t, err, "load loop")
	if ls.NextID != workers*each {
		t.Errorf("counter %d after %d increments: updates were lost", ls.NextID, workers*each)
	}

	// Concurrent moves of one job: it ends in exactly one final state.
	submit(t, s, job("race", "ml"))
	finals := []core.JobState{core.JobSucceeded, core.JobFailed, core.JobCancelled}
	wins := make([]bool, len(finals))
	for i, st := range finals {
		wg.Go(func() {
			_, err := s.Jobs().TransitionJob(c, "race", st, at(1))
			wins[i] = err == nil
			if err != nil && !errors.Is(err, store.ErrConflict) {
				report(err)
			}
		})
	}
	wg.Wait()
	check()
	won := 0
	for _, w := range wins {
		if w {
			won++
		}
	}
	if won != 1 {
		t.Errorf("%d concurrent final moves succeeded, want 1", won)
	}
}
