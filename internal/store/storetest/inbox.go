package storetest

import (
	"errors"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// testInbox: jobs submitted or cancelled through the API reach the loop's
// inbox once each, in order; the loop's own transitions do not; a take
// rolled back keeps them; and the units of the jobs taken read back
// grouped by job in the order asked.
func testInbox(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	ok(t, s.Teams().CreateTeam(c, team("ml")), "team")
	take := func(what string, in store.Tx) []string {
		t.Helper()
		var ids []string
		var err error
		if in != nil {
			ids, err = in.Loop().TakeInbox(c)
		} else {
			err = s.Tx(c, func(tx store.Tx) error {
				ids, err = tx.Loop().TakeInbox(c)
				return err
			})
		}
		ok(t, err, what)
		return ids
	}
	if got := take("empty inbox", nil); len(got) != 0 {
		t.Errorf("a new store's inbox: %v, want empty", got)
	}
	wide := job("j2", "ml")
	wide.Shards = 3
	for _, j := range []core.Job{job("j1", "ml"), wide, job("j3", "ml")} {
		_, _, err := s.Jobs().SubmitJob(c, j, "k-"+j.ID)
		ok(t, err, "submit "+j.ID)
	}
	_, _, err := s.Jobs().SubmitJob(c, job("j1", "ml"), "k-j1") // an idempotent retry: no new job
	ok(t, err, "resubmit j1")
	_, err = s.Jobs().CancelJob(c, "j1", at(1))
	ok(t, err, "cancel j1")
	_, err = s.Jobs().TransitionJob(c, "j3", core.JobRunning, at(1)) // the loop's own
	ok(t, err, "transition j3")

	// A take in a transaction that rolls back leaves the inbox as it was.
	errRollback := errors.New("roll back")
	err = s.Tx(c, func(tx store.Tx) error {
		if got := take("take to roll back", tx); len(got) != 3 {
			t.Errorf("taken in the rolled-back transaction: %v", got)
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatalf("rolled-back take: %v", err)
	}
	diff(t, "inbox", []string{"j1", "j2", "j3"}, take("take", nil))
	if got := take("take again", nil); len(got) != 0 {
		t.Errorf("inbox after a take: %v, want empty", got)
	}

	us, err := s.Units().ListUnitsOf(c, []string{"j3", "nope", "j2", "j3"})
	ok(t, err, "units of jobs")
	var keys []string
	for _, u := range us {
		keys = append(keys, u.Key(map[string]int{"j2": 3}[u.JobID]))
	}
	diff(t, "units of j3, nope, j2, j3", []string{"j3", "j2#0", "j2#1", "j2#2"}, keys)
	if _, err := s.Units().ListUnitsOf(c, []string{""}); err == nil {
		t.Error("units of an empty job id: no error")
	}
}
