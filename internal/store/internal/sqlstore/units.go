package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

const unitCols = `u.job_id, u.shard, u.state, u.parts, u.start_at, u.last_checkpoint_at, u.done_ns, u.since_at,
	u.deferred_until, u.reclaims, u.preemptions, u.no_spot, u.lost_milli_seconds, u.end_at`

// partDoc is a Part as stored in the parts JSON column.
type partDoc struct {
	Lease string `json:"lease"`
	GPUs  []int  `json:"gpus"`
}

func partsJSON(ps []store.Part) string {
	if ps == nil {
		return "null"
	}
	docs := make([]partDoc, len(ps))
	for i, p := range ps {
		docs[i] = partDoc{p.LeaseID, p.GPUs}
	}
	return marshal(docs)
}

// unitScan scans unitCols into u through scanners made once, so that a
// listing of many units does not allocate them for every row.
type unitScan struct {
	u     store.Unit
	state string
	parts string
	done  int64
	dest  []any
}

func newUnitScan() *unitScan {
	s := &unitScan{}
	u := &s.u
	s.dest = []any{&u.JobID, &u.Shard, &s.state, &s.parts, T(&u.Start), T(&u.LastCheckpoint), &s.done, T(&u.Since),
		T(&u.DeferredUntil), &u.Reclaims, &u.Preemptions, &u.NoSpot, &u.LostMilliSeconds, T(&u.End)}
	return s
}

// scan reads the row r holds.
func (s *unitScan) scan(r interface{ Scan(...any) error }) (store.Unit, error) {
	if err := r.Scan(s.dest...); err != nil {
		return store.Unit{}, err
	}
	u := s.u
	u.State, u.Done = core.JobState(s.state), time.Duration(s.done)
	if s.parts == "null" {
		return u, nil // not running: most units, and no JSON to decode
	}
	var docs []partDoc
	if err := unmarshal(s.parts, &docs); err != nil {
		return u, fmt.Errorf("unit %s#%d: parts: %w", u.JobID, u.Shard, err)
	}
	if docs != nil {
		u.Parts = make([]store.Part, len(docs))
		for i, d := range docs {
			u.Parts[i] = store.Part{LeaseID: d.Lease, GPUs: d.GPUs}
		}
	}
	return u, nil
}

// SaveUnits implements store.Units.
func (o *ops) SaveUnits(ctx context.Context, units ...store.Unit) error {
	for i := range units {
		if err := store.ValidateUnit(&units[i]); err != nil {
			return fmt.Errorf("save units: %w", err)
		}
	}
	stmts := make([]Stmt, len(units))
	for i := range units {
		u := &units[i]
		stmts[i] = Stmt{`UPDATE job_units SET state = $3, parts = $4, start_at = $5, last_checkpoint_at = $6, done_ns = $7,
			since_at = $8, deferred_until = $9, reclaims = $10, preemptions = $11, no_spot = $12, lost_milli_seconds = $13, end_at = $14
			WHERE job_id = $1 AND shard = $2 AND (state = $3 OR state NOT IN ` + finalJobStates + `)`,
			[]any{u.JobID, u.Shard, string(u.State), partsJSON(u.Parts), o.t(u.Start), o.t(u.LastCheckpoint), int64(u.Done),
				o.t(u.Since), o.t(u.DeferredUntil), u.Reclaims, u.Preemptions, u.NoSpot, u.LostMilliSeconds, o.t(u.End)}}
	}
	return o.atomic(ctx, func(q Querier) error {
		// One statement per unit, sent many at a time: a tick that
		// changes every unit of a long queue is not a round trip each.
		n, failed, err := execBatch(ctx, q, stmts)
		if err != nil {
			u := &units[failed]
			return o.fail(err, "save unit %s#%d", u.JobID, u.Shard)
		}
		for i := range units {
			if n[i] > 0 {
				continue
			}
			u := &units[i]
			var state string
			if err := q.QueryRow(ctx, `SELECT state FROM job_units WHERE job_id = $1 AND shard = $2`, u.JobID, u.Shard).Scan(&state); err != nil {
				return fmt.Errorf("save units: %w", one(err, "unit", fmt.Sprintf("%s#%d", u.JobID, u.Shard)))
			}
			return fmt.Errorf("save units: %w", store.CheckJobTransition(fmt.Sprintf("unit %s#%d", u.JobID, u.Shard), core.JobState(state), u.State))
		}
		return nil
	})
}

// ListUnits implements store.Units.
func (o *ops) ListUnits(ctx context.Context, jobID string) ([]store.Unit, error) {
	if err := store.CheckID("job", jobID); err != nil {
		return nil, fmt.Errorf("list units: %w", err)
	}
	us, err := o.units(ctx, `SELECT `+unitCols+` FROM job_units u WHERE u.job_id = $1 ORDER BY u.shard`, jobID)
	if err != nil {
		return nil, fmt.Errorf("list units of job %q: %w", jobID, err)
	}
	if len(us) == 0 {
		return nil, fmt.Errorf("list units: %w", store.NotFound("job", jobID))
	}
	return us, nil
}

// ListUnitsOf implements store.Units.
func (o *ops) ListUnitsOf(ctx context.Context, ids []string) ([]store.Unit, error) {
	for _, id := range ids {
		if err := store.CheckID("ids", id); err != nil {
			return nil, fmt.Errorf("list units of jobs: %w", err)
		}
	}
	of := map[string][]store.Unit{}
	for lo := 0; lo < len(ids); lo += jobsPerQuery {
		var a args
		vs := make([]any, 0, jobsPerQuery)
		for _, id := range ids[lo:min(lo+jobsPerQuery, len(ids))] {
			vs = append(vs, id)
		}
		us, err := o.units(ctx, `SELECT `+unitCols+` FROM job_units u WHERE u.job_id IN `+a.list(vs...)+` ORDER BY u.job_id, u.shard`, a.vals...)
		if err != nil {
			return nil, fmt.Errorf("list units of jobs: %w", err)
		}
		for _, u := range us {
			of[u.JobID] = append(of[u.JobID], u)
		}
	}
	var out []store.Unit
	for _, id := range ids {
		out = append(out, of[id]...)
		delete(of, id) // an id given twice gives its units once
	}
	return out, nil
}

// ListLiveUnits implements store.Units.
func (o *ops) ListLiveUnits(ctx context.Context) ([]store.Unit, error) {
	us, err := o.units(ctx, `SELECT `+unitCols+` FROM job_units u JOIN jobs j ON j.id = u.job_id
		WHERE u.state NOT IN `+finalJobStates+` ORDER BY j.seq, u.shard`)
	if err != nil {
		return nil, fmt.Errorf("list live units: %w", err)
	}
	return us, nil
}

// ListRunning implements store.Units.
func (o *ops) ListRunning(ctx context.Context) ([]store.Run, error) {
	return o.runs(ctx, "list running units", `SELECT u.job_id, u.shard, j.shards, j.team_id, j.milli_per_gpu, u.parts, u.start_at, NULL
		FROM job_units u JOIN jobs j ON j.id = u.job_id
		WHERE u.state IN ('running', 'checkpointing') ORDER BY j.seq, u.shard`)
}

// CountWaiting implements store.Units.
func (o *ops) CountWaiting(ctx context.Context, team string) ([]store.WaitingCount, error) {
	if err := store.CheckText("team", team); err != nil {
		return nil, fmt.Errorf("count waiting units: %w", err)
	}
	var w where
	vs := make([]any, len(store.WaitingStates))
	for i, s := range store.WaitingStates {
		vs[i] = string(s)
	}
	states := w.list(vs...)
	if team != "" {
		w.add("j.team_id = " + w.p(team))
	}
	// Count per job from the (state, job_id) index alone, then join the
	// jobs once each: the queue's rows are never read.
	rows, err := o.r().Query(ctx, `SELECT j.tier, j.team_id, SUM(c.n), SUM(c.n * j.gpus * j.milli_per_gpu)
		FROM (SELECT job_id, COUNT(*) AS n FROM job_units WHERE state IN `+states+` GROUP BY job_id) c
		JOIN jobs j ON j.id = c.job_id`+w.String()+`
		GROUP BY j.tier, j.team_id
		ORDER BY CASE j.tier WHEN 'core' THEN 0 WHEN 'regular' THEN 1 ELSE 2 END, j.team_id`, w.vals...)
	if err != nil {
		return nil, o.fail(err, "count waiting units")
	}
	defer rows.Close()
	var out []store.WaitingCount
	for rows.Next() {
		var c store.WaitingCount
		var tier string
		if err := rows.Scan(&tier, &c.Team, &c.Units, &c.GPUMilli); err != nil {
			return nil, fmt.Errorf("count waiting units: %w", err)
		}
		c.Tier = core.Tier(tier)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "count waiting units")
	}
	return out, nil
}

func (o *ops) units(ctx context.Context, sql string, a ...any) ([]store.Unit, error) {
	rows, err := o.r().Query(ctx, sql, a...)
	if err != nil {
		return nil, o.s.b.Classify(err)
	}
	defer rows.Close()
	var out []store.Unit
	sc := newUnitScan()
	for rows.Next() {
		u, err := sc.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, o.s.b.Classify(rows.Err())
}
