package sqlstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// finalJobStates is the SQL list of final job states.
const finalJobStates = `('succeeded', 'failed', 'cancelled')`

const jobCols = `seq, id, team_id, user_name, tier, state, state_at, gpus, milli_per_gpu, mem_per_gpu_mib,
	models, throughput, cpu_milli, mem_mib, shards, est_duration_ns, deadline, interruptible, may_defer,
	checkpoint_interval_ns, command, image, submit_at, idem_key, workload, accelerators`

// jobInsertCols are the columns a submission writes, in the order of
// its values (SubmitJob alone and a batch's bulk write alike).
const jobInsertCols = `id, team_id, user_name, tier, state, state_at, gpus, milli_per_gpu, mem_per_gpu_mib,
	models, throughput, cpu_milli, mem_mib, shards, est_duration_ns, deadline, interruptible, may_defer,
	checkpoint_interval_ns, command, image, submit_at, idem_key, fingerprint, workload, accelerators`

// scanJob scans jobCols and then extra.
func scanJob(r interface{ Scan(...any) error }, extra ...any) (store.Job, int64, error) {
	var (
		j                                       store.Job
		seq, milli, est, ckpt                   int64
		tier, state, models, tput, command, key string
		workload, accels                        string
	)
	dest := []any{&seq, &j.ID, &j.Team, &j.User, &tier, &state, T(&j.StateAt), &j.Request.GPUs, &milli, &j.Request.MemPerGPUMiB,
		&models, &tput, &j.Request.CPUMilli, &j.Request.MemMiB, &j.Shards, &est, T(&j.Deadline), &j.Interruptible, &j.Deferrable,
		&ckpt, &command, &j.Image, T(&j.Submit), S(&key), &workload, &accels}
	err := r.Scan(append(dest, extra...)...)
	if err != nil {
		return j, 0, err
	}
	j.Tier, j.State, j.IdempotencyKey = core.Tier(tier), core.JobState(state), key
	j.Request.MilliPerGPU, j.EstDuration, j.CheckpointInterval = core.Milli(milli), time.Duration(est), time.Duration(ckpt)
	if err := unmarshal(models, &j.Request.Models); err != nil {
		return j, 0, fmt.Errorf("job %q: models: %w", j.ID, err)
	}
	if err := unmarshal(tput, &j.Request.Throughput); err != nil {
		return j, 0, fmt.Errorf("job %q: throughput: %w", j.ID, err)
	}
	if err := unmarshal(command, &j.Command); err != nil {
		return j, 0, fmt.Errorf("job %q: command: %w", j.ID, err)
	}
	j.Request.Workload = core.Workload(workload)
	if err := unmarshal(accels, &j.Request.Accelerators); err != nil {
		return j, 0, fmt.Errorf("job %q: accelerators: %w", j.ID, err)
	}
	return j, seq, nil
}

// marshal encodes plain data (slices, maps of strings and ints) as JSON;
// nil stays null and empty stays empty, so values round-trip exactly.
func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("sqlstore: marshal %T: %v", v, err)) // plain data always marshals
	}
	return string(b)
}

func unmarshal(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	return d.Decode(v)
}

// SubmitJob implements store.Jobs.
func (o *ops) SubmitJob(ctx context.Context, j core.Job, key string) (store.Job, bool, error) {
	if err := store.ValidateJob(&j); err != nil {
		return store.Job{}, false, fmt.Errorf("submit job: %w", err)
	}
	if key != "" {
		if err := store.CheckID("idempotency_key", key); err != nil {
			return store.Job{}, false, fmt.Errorf("submit job: %w", err)
		}
	}
	j.State = core.JobPending
	j.Submit, j.Deadline = store.Micro(j.Submit), store.Micro(j.Deadline)
	sub := &submission{j: j, key: key, fp: store.JobFingerprint(&j)}
	body := func(ctx context.Context, q Querier) error { return o.submitOne(ctx, q, sub) }
	var err error
	if o.tx == nil {
		// Alone, a submission is a transaction of its own: grouped with
		// those submitted at the same time, one commit serves them all,
		// and where the backend can, one write of each table too.
		err = o.s.groupedSubmit(ctx, sub, body)
	} else {
		err = o.atomic(ctx, func(q Querier) error { return body(ctx, q) })
	}
	if err != nil {
		return store.Job{}, false, err
	}
	return sub.out, sub.created, nil
}

// submitOne writes sub's job, its units, its place in the loop's inbox
// and its team's count, and sets sub's answer; it may run more than once.
func (o *ops) submitOne(ctx context.Context, q Querier, sub *submission) error {
	j, key, fp := &sub.j, sub.key, sub.fp
	sub.created, sub.out = false, sub.made()
	r := j.Request
	var seq int64
	err := q.QueryRow(ctx, `INSERT INTO jobs (`+jobInsertCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)
		ON CONFLICT (team_id, idem_key) DO NOTHING RETURNING seq`,
		j.ID, j.Team, j.User, string(j.Tier), string(j.State), o.t(j.Submit), r.GPUs, int64(r.MilliPerGPU), r.MemPerGPUMiB,
		marshal(r.Models), marshal(r.Throughput), r.CPUMilli, r.MemMiB, j.Shards, int64(j.EstDuration), o.t(j.Deadline),
		j.Interruptible, j.Deferrable, int64(j.CheckpointInterval), marshal(j.Command), j.Image, o.t(j.Submit), nullStr(key), fpArg(key, fp), string(r.Workload), marshal(r.Accelerators)).Scan(&seq)
	switch {
	case errors.Is(err, ErrNoRows):
		// The key was used before: the same request gets the first job.
		first, firstFP, err := o.jobByKey(ctx, q, j.Team, key)
		if err != nil {
			return fmt.Errorf("submit job %q: idempotency key %q: %w", j.ID, key, err)
		}
		if !bytes.Equal(firstFP, fp[:]) {
			return fmt.Errorf("submit job %q: %w", j.ID, &store.RowError{Kind: store.ErrConflict, Field: "idempotency_key", Value: key,
				Msg: fmt.Sprintf("idempotency key %q was used for job %q with a different body", key, first.ID)})
		}
		sub.out = first
		return nil
	case err != nil:
		switch e := o.s.b.Classify(err); {
		case errors.Is(e, store.ErrNotFound): // the team is jobs' one reference
			return fmt.Errorf("submit job %q: %w", j.ID, store.Missing("team", "team", j.Team))
		case errors.Is(e, store.ErrConflict): // the id; the key is ON CONFLICT's
			return fmt.Errorf("submit job: %w", store.Exists("id", "job", j.ID))
		}
		return o.fail(err, "submit job %q", j.ID)
	}
	sub.created = true
	if err := o.reserveUnits(ctx, q, j, true); err != nil {
		return err
	}
	if err := o.insertUnits(ctx, q, j); err != nil {
		return err
	}
	if err := o.tellLoop(ctx, q, j.ID); err != nil {
		return err
	}
	return o.reserveUnits(ctx, q, j, false)
}

// fpArg is the fingerprint to store: only idempotent submissions need it.
func fpArg(key string, fp [32]byte) any {
	if key == "" {
		return nil
	}
	return fp[:]
}

// reserveUnits counts j's units, j just inserted, into its team's
// queued units (the units of its unfinished jobs), and refuses j when
// they would pass the team's unit limit. Only a new job is counted, so an
// idempotent retry of an accepted one still gets it. With before, it
// only reads, to refuse a job past the limit before its units are made;
// after, one conditional UPDATE checks and counts, which orders
// concurrent submissions of one team on its row for the rest of the
// transaction (so it is the transaction's last statement).
func (o *ops) reserveUnits(ctx context.Context, q Querier, j *core.Job, before bool) error {
	n := int64(max(j.Shards, 1))
	refuse := func() error {
		var queued, limit int64
		if err := q.QueryRow(ctx, `SELECT queued_units, unit_limit FROM teams WHERE id = $1`, j.Team).Scan(&queued, &limit); err != nil {
			return o.fail(one(err, "team", j.Team), "submit job %q", j.ID)
		}
		t := core.Team{UnitLimit: limit}
		if queued+n <= t.Units() {
			return nil
		}
		return fmt.Errorf("submit job %q: %w", j.ID, &core.FieldError{Field: "shards", Value: fmt.Sprint(j.Shards),
			Allowed: fmt.Sprintf("at most %d units for team %q now: its unfinished jobs have %d of its unit_limit %d", max(t.Units()-queued, 0), j.Team, queued, t.Units())})
	}
	if before {
		// The read only spares the making of many units for a job the
		// UPDATE after would refuse anyway; one unit costs less than the
		// read, and the UPDATE's refusal rolls it back with the job.
		if n == 1 {
			return nil
		}
		return refuse()
	}
	var queued int64
	err := q.QueryRow(ctx, `UPDATE teams SET queued_units = queued_units + $2
		WHERE id = $1 AND queued_units + $2 <= CASE WHEN unit_limit = 0 THEN $3 ELSE unit_limit END RETURNING queued_units`,
		j.Team, n, int64(core.DefaultUnitLimit)).Scan(&queued)
	switch {
	case errors.Is(err, ErrNoRows):
		if err := refuse(); err != nil {
			return err
		}
		return fmt.Errorf("submit job %q: team %q: its queued units changed while counting", j.ID, j.Team)
	case err != nil:
		return o.fail(err, "submit job %q: count its units", j.ID)
	}
	return nil
}

// insertUnits creates the job's units, pending since its submission, in
// one statement whose rows the database generates: the work and memory
// on this side are the same for one shard as for a hundred thousand, and
// the statement's parameters are three whatever the count (SQLite binds
// $n parameters in time quadratic in their number).
func (o *ops) insertUnits(ctx context.Context, q Querier, j *core.Job) error {
	if j.Shards <= 1 {
		// One unit, the common case: a plain row, no generated series.
		if _, err := q.Exec(ctx, `INSERT INTO job_units (job_id, shard, state, parts, done_ns, since_at, reclaims, preemptions, no_spot, lost_milli_seconds)
			VALUES ($1, 0, 'pending', 'null', 0, $2, 0, 0, false, 0)`, j.ID, o.t(j.Submit)); err != nil {
			return o.fail(err, "submit job %q: units", j.ID)
		}
		return nil
	}
	if _, err := q.Exec(ctx, `WITH RECURSIVE shards (shard) AS (SELECT 0 UNION ALL SELECT shard + 1 FROM shards WHERE shard + 1 < $2)
		INSERT INTO job_units (job_id, shard, state, parts, done_ns, since_at, reclaims, preemptions, no_spot, lost_milli_seconds)
		SELECT $1, shard, 'pending', 'null', 0, $3, 0, 0, false, 0 FROM shards`,
		j.ID, max(j.Shards, 1), o.t(j.Submit)); err != nil {
		return o.fail(err, "submit job %q: units", j.ID)
	}
	return nil
}

func (o *ops) jobByKey(ctx context.Context, q Querier, team, key string) (store.Job, []byte, error) {
	var fp []byte
	j, _, err := scanJob(q.QueryRow(ctx, `SELECT `+jobCols+`, fingerprint FROM jobs WHERE team_id = $1 AND idem_key = $2`, team, key), &fp)
	if err != nil {
		return j, nil, one(err, "job with idempotency key", key)
	}
	return j, fp, nil
}

// GetJob implements store.Jobs.
func (o *ops) GetJob(ctx context.Context, id string) (store.Job, error) {
	if err := store.CheckID("id", id); err != nil {
		return store.Job{}, fmt.Errorf("get job: %w", err)
	}
	return o.getJob(ctx, o.r(), id)
}

func (o *ops) getJob(ctx context.Context, q Querier, id string) (store.Job, error) {
	j, _, err := scanJob(q.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, id))
	if err != nil {
		return store.Job{}, fmt.Errorf("get job: %w", one(err, "job", id))
	}
	return j, nil
}

// jobsPerQuery is how many ids one GetJobs query looks up: few enough
// that SQLite's binding of $n parameters (quadratic in their number)
// stays well under a millisecond, many enough that a queue of 10,000
// jobs is 20 queries.
const jobsPerQuery = 500

// GetJobs implements store.Jobs.
func (o *ops) GetJobs(ctx context.Context, ids []string) ([]store.Job, error) {
	for _, id := range ids {
		if err := store.CheckID("ids", id); err != nil {
			return nil, fmt.Errorf("get jobs: %w", err)
		}
	}
	out := make([]store.Job, 0, len(ids))
	for lo := 0; lo < len(ids); lo += jobsPerQuery {
		var a args
		vs := make([]any, 0, jobsPerQuery)
		for _, id := range ids[lo:min(lo+jobsPerQuery, len(ids))] {
			vs = append(vs, id)
		}
		rows, err := o.r().Query(ctx, `SELECT `+jobCols+` FROM jobs WHERE id IN `+a.list(vs...), a.vals...)
		if err != nil {
			return nil, o.fail(err, "get jobs")
		}
		for rows.Next() {
			j, _, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("get jobs: %w", err)
			}
			out = append(out, j)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, o.fail(err, "get jobs")
		}
	}
	return out, nil
}

// ListJobs implements store.Jobs.
func (o *ops) ListJobs(ctx context.Context, f store.JobFilter) (store.Page[store.Job], error) {
	limit, err := store.PageLimit(f.Limit)
	if err != nil {
		return store.Page[store.Job]{}, fmt.Errorf("list jobs: %w", err)
	}
	after, ok, err := store.DecodeCursor("jobs", f.Cursor)
	if err != nil {
		return store.Page[store.Job]{}, fmt.Errorf("list jobs: %w", err)
	}
	var w where
	if f.Team != "" {
		w.add("team_id = " + w.p(f.Team))
	}
	if f.Tier != "" {
		if _, err := core.ParseTier(string(f.Tier)); err != nil {
			return store.Page[store.Job]{}, fmt.Errorf("list jobs: %w", err)
		}
		w.add("tier = " + w.p(string(f.Tier)))
	}
	if len(f.States) > 0 {
		vs := make([]any, len(f.States))
		for i, s := range f.States {
			if _, err := store.ParseJobState("state", string(s)); err != nil {
				return store.Page[store.Job]{}, fmt.Errorf("list jobs: %w", err)
			}
			vs[i] = string(s)
		}
		w.add("state IN " + w.list(vs...))
	}
	if ok {
		w.add("seq < " + w.p(after))
	}
	rows, err := o.r().Query(ctx, `SELECT `+jobCols+` FROM jobs`+w.String()+` ORDER BY seq DESC LIMIT `+w.p(limit+1), w.vals...)
	if err != nil {
		return store.Page[store.Job]{}, o.fail(err, "list jobs")
	}
	defer rows.Close()
	var page store.Page[store.Job]
	var seqs []int64
	for rows.Next() {
		j, seq, err := scanJob(rows)
		if err != nil {
			return store.Page[store.Job]{}, fmt.Errorf("list jobs: %w", err)
		}
		page.Items, seqs = append(page.Items, j), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Job]{}, o.fail(err, "list jobs")
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = store.EncodeCursor("jobs", seqs[limit-1])
	}
	return page, nil
}

// CountJobs implements store.Jobs.
func (o *ops) CountJobs(ctx context.Context, team string) (map[core.JobState]int, error) {
	if err := store.CheckText("team", team); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	var w where
	if team != "" {
		w.add("team_id = " + w.p(team))
	}
	rows, err := o.r().Query(ctx, `SELECT state, COUNT(*) FROM jobs`+w.String()+` GROUP BY state`, w.vals...)
	if err != nil {
		return nil, o.fail(err, "count jobs")
	}
	defer rows.Close()
	out := make(map[core.JobState]int, len(store.JobStates))
	for _, s := range store.JobStates {
		out[s] = 0
	}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[core.JobState(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "count jobs")
	}
	return out, nil
}

// CancelJob implements store.Jobs.
func (o *ops) CancelJob(ctx context.Context, id string, at time.Time) (store.Job, error) {
	return o.moveJob(ctx, "cancel job", id, core.JobCancelled, at, true)
}

// tellLoop puts job id in the loop's inbox (Loop.TakeInbox): the loop
// keeps its state across ticks and learns of jobs submitted or cancelled
// through the API only from there.
func (o *ops) tellLoop(ctx context.Context, q Querier, id string) error {
	if _, err := q.Exec(ctx, `INSERT INTO loop_inbox (job_id) VALUES ($1)`, id); err != nil {
		return o.fail(err, "job %q: the loop's inbox", id)
	}
	return nil
}

// TransitionJob implements store.Jobs.
func (o *ops) TransitionJob(ctx context.Context, id string, state core.JobState, at time.Time) (store.Job, error) {
	if _, err := store.ParseJobState("state", string(state)); err != nil {
		return store.Job{}, fmt.Errorf("transition job %q: %w", id, err)
	}
	return o.moveJob(ctx, "transition job", id, state, at, false)
}

// moveJob moves job id to state; tell puts a move in the loop's inbox (a
// cancel through the API; the loop's own moves it knows).
func (o *ops) moveJob(ctx context.Context, what, id string, state core.JobState, at time.Time, tell bool) (store.Job, error) {
	if err := store.CheckID("id", id); err != nil {
		return store.Job{}, fmt.Errorf("%s: %w", what, err)
	}
	if at.IsZero() {
		return store.Job{}, fmt.Errorf("%s %q: %w", what, id, &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	var out store.Job
	err := o.atomic(ctx, func(q Querier) error {
		// One conditional statement, so that concurrent moves serialize
		// on the row and a final state is never left.
		moved, err := q.Exec(ctx, `UPDATE jobs SET state = $2, state_at = $3 WHERE id = $1 AND state <> $2 AND state NOT IN `+finalJobStates,
			id, string(state), o.t(at))
		if err != nil {
			return o.fail(err, "%s %q", what, id)
		}
		j, err := o.getJob(ctx, q, id)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if j.State != state {
			return fmt.Errorf("%s: %w", what, store.CheckJobTransition(fmt.Sprintf("job %q", id), j.State, state))
		}
		if moved > 0 && tell {
			if err := o.tellLoop(ctx, q, id); err != nil {
				return err
			}
		}
		if moved > 0 && state.Final() {
			// Finished: its units leave the team's queued units.
			if _, err := q.Exec(ctx, `UPDATE teams SET queued_units = queued_units - $2 WHERE id = $1`, j.Team, int64(max(j.Shards, 1))); err != nil {
				return o.fail(err, "%s %q: its team's queued units", what, id)
			}
		}
		out = j
		return nil
	})
	return out, err
}
