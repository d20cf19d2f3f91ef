package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// testGroupCommit submits many jobs at once, good and bad mixed, so that
// a backend that commits concurrent submissions together (group commit)
// gets batches holding both: every good one is stored, its units counted
// and in the loop's inbox once; every bad one is refused with its own
// error and leaves nothing; one idempotency key gives one job to all its
// submissions, and a different body under it a conflict.
func testGroupCommit(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	ok(t, s.Teams().CreateTeam(c, team("ml")), "create team ml")
	small := team("small")
	small.UnitLimit = 5
	ok(t, s.Teams().CreateTeam(c, small), "create team small")
	submit(t, s, job("taken", "ml"))
	_, err := s.Loop().TakeInbox(c)
	ok(t, err, "empty the inbox")

	const n = 200
	type result struct {
		job     store.Job
		created bool
		err     error
	}
	res := make([]result, n)
	kind := func(i int) string {
		switch i % 10 {
		case 1:
			return "no-team"
		case 2:
			return "dup-id"
		case 3:
			return "same-key"
		case 4:
			return "key-other-body"
		case 5:
			return "small" // 5 of these fit team small's limit of 5 units
		}
		return "good"
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			j, key := job(fmt.Sprintf("g%03d", i), "ml"), ""
			j.Shards = 0
			switch kind(i) {
			case "no-team":
				j.Team = "nobody"
			case "dup-id":
				j.ID = "taken"
			case "same-key":
				j.ID, key = "keyed", "group-key"
			case "key-other-body":
				j.ID, key = "keyed", "group-key"
				j.Image = "other:1"
			case "small":
				j.Team = "small"
			}
			<-start
			got, created, err := s.Jobs().SubmitJob(c, j, key)
			res[i] = result{got, created, err}
		})
	}
	close(start)
	wg.Wait()

	var want []string
	smallOK, keyedMade := 0, 0
	keyedBody := ""
	for i, r := range res {
		switch kind(i) {
		case "good":
			if r.err != nil || !r.created {
				t.Errorf("g%03d: created %v, %v; want created", i, r.created, r.err)
				continue
			}
			want = append(want, r.job.ID)
		case "no-team":
			wantErr(t, r.err, store.ErrNotFound, fmt.Sprintf("g%03d for a missing team", i))
		case "dup-id":
			wantErr(t, r.err, store.ErrConflict, fmt.Sprintf("g%03d with a taken id", i))
		case "same-key", "key-other-body":
			if r.err != nil {
				var re *store.RowError
				if !errors.As(r.err, &re) || re.Field != "idempotency_key" {
					t.Errorf("g%03d: %v, want success or an idempotency key conflict", i, r.err)
				}
				continue
			}
			if r.created {
				keyedMade++
				want = append(want, "keyed")
			}
			if keyedBody == "" {
				keyedBody = r.job.Image
			} else if r.job.Image != keyedBody {
				t.Errorf("g%03d: the keyed job has image %q, another answer %q", i, r.job.Image, keyedBody)
			}
		case "small":
			if r.err == nil && r.created {
				smallOK++
				want = append(want, r.job.ID)
				continue
			}
			wantField(t, r.err, "shards", "0", fmt.Sprintf("g%03d past team small's limit", i))
		}
	}
	if keyedMade != 1 {
		t.Errorf("%d submissions under one key created a job, want 1", keyedMade)
	}
	if smallOK != 5 {
		t.Errorf("%d jobs of team small stored, want 5 (its limit)", smallOK)
	}
	// Every answer matches the store: the created jobs are there, the
	// refused not, and the inbox names each created job once.
	for _, id := range want {
		_, err := s.Jobs().GetJob(c, id)
		ok(t, err, "get created job "+id)
	}
	for i, r := range res {
		if r.err != nil && kind(i) != "dup-id" && kind(i) != "same-key" && kind(i) != "key-other-body" {
			_, err := s.Jobs().GetJob(c, fmt.Sprintf("g%03d", i))
			wantErr(t, err, store.ErrNotFound, fmt.Sprintf("refused g%03d stored", i))
		}
	}
	inbox, err := s.Loop().TakeInbox(c)
	ok(t, err, "take inbox")
	slices.Sort(inbox)
	slices.Sort(want)
	if !slices.Equal(inbox, want) {
		t.Errorf("inbox has %d jobs, want the %d created:\n%v\nwant\n%v", len(inbox), len(want), inbox, want)
	}
	over := job("small-over", "small")
	over.Shards = 0
	_, _, err = s.Jobs().SubmitJob(c, over, "")
	wantField(t, err, "shards", "0", "team small at its limit after the concurrent submissions")
}

// testGroupCommitAsAlone submits jobs of every shape at once, so that a
// backend that writes a batch's submissions together (PostgreSQL's bulk
// write) takes them so, and the same jobs one by one inside transactions,
// which never group: each job, its units, the loop's inbox and its team's
// unit count come out the same either way.
func testGroupCommitAsAlone(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	ok(t, s.Teams().CreateTeam(c, team("solo")), "create team solo")
	variant := func(i int, id, tm string) (core.Job, string) {
		j := job(id, tm)
		j.Shards = []int{0, 1, 3}[i%3]
		if i%4 == 1 {
			j.Deadline = time.Time{}
		}
		if i%5 == 2 {
			j.Command, j.Request.Models, j.Request.Throughput, j.Request.Accelerators = nil, nil, nil, nil
		}
		j.Interruptible, j.Deferrable = i%2 == 0, i%3 == 1
		j.Tier = []core.Tier{core.TierCore, core.TierRegular, core.TierOffline}[i%3]
		j.Submit = at(i)
		key := ""
		if i%6 == 5 {
			key = fmt.Sprintf("key-%02d", i)
		}
		return j, key
	}
	const n = 48
	units := int64(0)
	for i := range n {
		j, _ := variant(i, "x", "x")
		units += int64(max(j.Shards, 1))
	}
	// Team bulk's limit is exactly the batch's units: its count is
	// checked by the next submission being refused.
	bulk := team("bulk")
	bulk.UnitLimit = units
	ok(t, s.Teams().CreateTeam(c, bulk), "create team bulk")
	got := make([]store.Job, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			j, key := variant(i, fmt.Sprintf("b%02d", i), "bulk")
			<-start
			got[i], _, errs[i] = s.Jobs().SubmitJob(c, j, key)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		ok(t, errs[i], fmt.Sprintf("submit b%02d", i))
		j, key := variant(i, fmt.Sprintf("s%02d", i), "solo")
		ok(t, s.Tx(c, func(tx store.Tx) error {
			_, _, err := tx.Jobs().SubmitJob(c, j, key)
			return err
		}), fmt.Sprintf("submit s%02d alone", i))
	}
	as := func(j store.Job) store.Job {
		j.ID, j.Team = "", ""
		return j
	}
	for i := range n {
		b, err := s.Jobs().GetJob(c, fmt.Sprintf("b%02d", i))
		ok(t, err, "get bulk job")
		one, err := s.Jobs().GetJob(c, fmt.Sprintf("s%02d", i))
		ok(t, err, "get lone job")
		diff(t, fmt.Sprintf("job %d grouped against alone", i), as(one), as(b))
		diff(t, fmt.Sprintf("answer to b%02d against its row", i), b, got[i])
		bu, err := s.Units().ListUnits(c, b.ID)
		ok(t, err, "bulk units")
		ou, err := s.Units().ListUnits(c, one.ID)
		ok(t, err, "lone units")
		for k := range bu {
			bu[k].JobID = ""
		}
		for k := range ou {
			ou[k].JobID = ""
		}
		diff(t, fmt.Sprintf("units of job %d grouped against alone", i), ou, bu)
	}
	inbox, err := s.Loop().TakeInbox(c)
	ok(t, err, "take inbox")
	slices.Sort(inbox)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("b%02d", i), fmt.Sprintf("s%02d", i))
	}
	slices.Sort(want)
	diff(t, "inbox", want, inbox)
	over := job("bulk-over", "bulk")
	over.Shards = 0
	_, _, err = s.Jobs().SubmitJob(c, over, "")
	wantField(t, err, "shards", "0", "team bulk at its limit after the grouped submissions")
}
