package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Bulk submissions: where the database takes arrays (PostgreSQL), the
// job submissions of one group-commit batch are written together, a
// statement per table for all of them (jobs, units, the loop's inbox) and
// one per team for the unit count, sent in one round trip. Each alone
// costs six statements and as many round trips (group.go), which is most
// of the database's work in a burst of submissions, and the team's count
// comes last, so its row is locked only from there to the commit and the
// batch lanes of one team overlap.
//
// The bulk write is all or nothing under a savepoint, and only the
// common case is taken: every job new, every team there, every count
// within its team's limit. Anything else — a taken id, an idempotency
// key used before or twice in the batch, a missing team, a limit
// reached — is found by the rows each statement changed, rolled back to
// the savepoint, and the batch's submissions then run one by one as
// without bulk, each with its own answer. A bulk write changes exactly
// the rows the submissions one by one would have.

// submission is one SubmitJob waiting in a batch: the job (validated,
// pending, times at microseconds), its idempotency key and body
// fingerprint, and the answer, set afresh on each run.
type submission struct {
	j       core.Job
	key     string
	fp      [32]byte
	out     store.Job
	created bool
}

// made is the answer to sub when its job is the one written for it.
func (sub *submission) made() store.Job {
	return store.Job{Job: sub.j, StateAt: sub.j.Submit, IdempotencyKey: sub.key}
}

// SetBulkSubmit makes batches write their submissions together (bulk.go);
// only for a backend that takes PostgreSQL's arrays and unnest. Call it
// before use.
func (s *Store) SetBulkSubmit(on bool) { s.bulk = on }

const bulkJobs = `INSERT INTO jobs (` + jobInsertCols + `)
	SELECT id, team, usr, tier, 'pending', at, gpus, milli, mem, models::jsonb, tput::jsonb, cpu, memmib, shards, est, deadline,
		intr, dfr, ckpt, cmd::jsonb, image, at, idem, fp, workload, acc::jsonb
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[], $7::bigint[], $8::bigint[],
		$9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::timestamptz[], $16::boolean[],
		$17::boolean[], $18::bigint[], $19::text[], $20::text[], $21::text[], $22::bytea[], $23::text[], $24::text[])
		WITH ORDINALITY AS x (id, team, usr, tier, at, gpus, milli, mem, models, tput, cpu, memmib, shards, est, deadline, intr,
		dfr, ckpt, cmd, image, idem, fp, workload, acc, ord)
	ORDER BY ord
	ON CONFLICT DO NOTHING`

const bulkUnits = `INSERT INTO job_units (job_id, shard, state, parts, done_ns, since_at, reclaims, preemptions, no_spot, lost_milli_seconds)
	SELECT x.id, s.shard, 'pending', 'null', 0, x.at, 0, 0, false, 0
	FROM unnest($1::text[], $2::bigint[], $3::timestamptz[]) AS x (id, n, at), generate_series(0, x.n - 1) AS s (shard)`

const bulkInbox = `INSERT INTO loop_inbox (job_id) SELECT id FROM unnest($1::text[]) WITH ORDINALITY AS x (id, ord) ORDER BY ord`

const bulkTeam = `UPDATE teams SET queued_units = queued_units + $2
	WHERE id = $1 AND queued_units + $2 <= CASE WHEN unit_limit = 0 THEN $3 ELSE unit_limit END`

// bulkSubmit writes subs in t together and reports whether it did; on
// false nothing of them is written and each is to run alone. Its error
// is the savepoint's only: the transaction is then unsound.
func (s *Store) bulkSubmit(ctx context.Context, t Txn, subs []*submission) (bool, error) {
	n := len(subs)
	// The batch as columns, the arrays unnest reads back as rows.
	var c struct {
		ids, teams, users, tiers, models, tputs, cmds, images, workloads, accels []string
		at                                                                       []time.Time
		deadlines                                                                []*time.Time
		gpus, milli, mem, cpu, memMiB, shards, est, ckpt, units                  []int64
		intr, dfr                                                                []bool
		keys                                                                     []*string
		fps                                                                      [][]byte
	}
	perTeam := map[string]int64{}
	var total int64
	for _, sub := range subs {
		j, r := &sub.j, sub.j.Request
		c.ids, c.teams, c.users, c.tiers = append(c.ids, j.ID), append(c.teams, j.Team), append(c.users, j.User), append(c.tiers, string(j.Tier))
		c.at = append(c.at, j.Submit)
		var deadline *time.Time
		if !j.Deadline.IsZero() {
			d := j.Deadline
			deadline = &d
		}
		c.deadlines = append(c.deadlines, deadline)
		c.gpus, c.milli, c.mem = append(c.gpus, int64(r.GPUs)), append(c.milli, int64(r.MilliPerGPU)), append(c.mem, r.MemPerGPUMiB)
		c.cpu, c.memMiB = append(c.cpu, r.CPUMilli), append(c.memMiB, r.MemMiB)
		c.models, c.tputs = append(c.models, marshal(r.Models)), append(c.tputs, marshal(r.Throughput))
		c.cmds, c.accels = append(c.cmds, marshal(j.Command)), append(c.accels, marshal(r.Accelerators))
		c.shards, c.est, c.ckpt = append(c.shards, int64(j.Shards)), append(c.est, int64(j.EstDuration)), append(c.ckpt, int64(j.CheckpointInterval))
		c.intr, c.dfr = append(c.intr, j.Interruptible), append(c.dfr, j.Deferrable)
		c.images, c.workloads = append(c.images, j.Image), append(c.workloads, string(r.Workload))
		// No key: NULL for both, as SubmitJob alone writes it.
		var key *string
		var fp []byte
		if sub.key != "" {
			k := sub.key
			key, fp = &k, sub.fp[:]
		}
		c.keys, c.fps = append(c.keys, key), append(c.fps, fp)
		units := int64(max(j.Shards, 1))
		c.units = append(c.units, units)
		perTeam[j.Team] += units
		total += units
	}
	stmts := []Stmt{
		{SQL: "SAVEPOINT store_bulk"},
		{SQL: bulkJobs, Args: []any{c.ids, c.teams, c.users, c.tiers, c.at, c.gpus, c.milli, c.mem, c.models, c.tputs, c.cpu, c.memMiB,
			c.shards, c.est, c.deadlines, c.intr, c.dfr, c.ckpt, c.cmds, c.images, c.keys, c.fps, c.workloads, c.accels}},
		{SQL: bulkUnits, Args: []any{c.ids, c.units, c.at}},
		{SQL: bulkInbox, Args: []any{c.ids}},
	}
	// One team after another in one order, so that two batches of the
	// same teams lock their rows in the same order.
	names := make([]string, 0, len(perTeam))
	for team := range perTeam {
		names = append(names, team)
	}
	slices.SortFunc(names, cmp.Compare)
	for _, team := range names {
		stmts = append(stmts, Stmt{SQL: bulkTeam, Args: []any{team, perTeam[team], int64(core.DefaultUnitLimit)}})
	}
	changed, _, err := execBatch(ctx, t, stmts)
	whole := err == nil && changed[1] == int64(n) && changed[2] == total && changed[3] == int64(n)
	for i := range names {
		whole = whole && changed[4+i] == 1
	}
	if !whole {
		if _, rerr := t.Exec(ctx, "ROLLBACK TO SAVEPOINT store_bulk"); rerr != nil {
			return false, fmt.Errorf("%w: roll back to savepoint: %w", errSavepoint, rerr)
		}
		return false, nil
	}
	for _, sub := range subs {
		sub.created, sub.out = true, sub.made()
	}
	s.bulked.Add(int64(n))
	return true, nil
}

// BulkWritten is how many submissions batches wrote together so far
// (written, not necessarily committed: a batch whose commit failed runs
// them again).
func (s *Store) BulkWritten() int64 { return s.bulked.Load() }
