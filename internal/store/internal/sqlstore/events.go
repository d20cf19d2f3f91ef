package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// AppendEvents implements store.Events.
func (o *ops) AppendEvents(ctx context.Context, events ...core.Event) ([]int64, error) {
	for i := range events {
		if err := store.ValidateEvent(&events[i]); err != nil {
			return nil, fmt.Errorf("append events: event %d: %w", i, err)
		}
	}
	seqs := make([]int64, len(events))
	// One statement per event (the order of RETURNING rows of a
	// multi-row insert is not defined), sent many at a time.
	stmts := make([]Stmt, len(events))
	for i, e := range events {
		// The team column follows store.EventTeam: an explicit
		// attribute, else the team of the job the subject names.
		team := `$6`
		arg := e.Attrs[store.EventTeam]
		switch {
		case arg != "":
		case strings.HasPrefix(e.Kind, "audit."):
		default:
			team = `COALESCE((SELECT team_id FROM jobs WHERE id = $6), '')`
			arg = store.JobOfSubject(e.Subject)
		}
		stmts[i] = Stmt{`INSERT INTO events (at, kind, subject, reason, attrs, team_id) VALUES ($1, $2, $3, $4, $5, ` + team + `) RETURNING seq`,
			[]any{o.t(e.At), e.Kind, e.Subject, e.Reason, marshal(e.Attrs), arg}}
	}
	err := o.atomic(ctx, func(q Querier) error {
		failed, err := queryRowBatch(ctx, q, stmts, func(i int, r Row) error { return r.Scan(&seqs[i]) })
		if err != nil {
			return o.fail(err, "append event %d (%s)", failed, events[failed].Kind)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// ListEvents implements store.Events.
func (o *ops) ListEvents(ctx context.Context, f store.EventFilter) (store.Page[core.Event], error) {
	limit, err := store.PageLimit(f.Limit)
	if err != nil {
		return store.Page[core.Event]{}, fmt.Errorf("list events: %w", err)
	}
	after, ok, err := store.DecodeCursor("events", f.Cursor)
	if err != nil {
		return store.Page[core.Event]{}, fmt.Errorf("list events: %w", err)
	}
	for _, x := range []struct{ name, v string }{{"subject", f.Subject}, {"kind", f.Kind}, {"team", f.Team}} {
		if err := store.CheckText(x.name, x.v); err != nil {
			return store.Page[core.Event]{}, fmt.Errorf("list events: %w", err)
		}
	}
	var w where
	if f.Subject != "" {
		w.add("subject = " + w.p(f.Subject))
	}
	if f.Kind != "" {
		w.add("kind = " + w.p(f.Kind))
	}
	if f.Team != "" {
		w.add("team_id = " + w.p(f.Team))
	}
	if !f.From.IsZero() {
		w.add("at >= " + w.p(o.t(f.From)))
	}
	if !f.To.IsZero() {
		w.add("at < " + w.p(o.t(f.To)))
	}
	if ok {
		w.add("seq > " + w.p(after))
	}
	rows, err := o.r().Query(ctx, `SELECT seq, at, kind, subject, reason, attrs FROM events`+w.String()+` ORDER BY seq LIMIT `+w.p(limit+1), w.vals...)
	if err != nil {
		return store.Page[core.Event]{}, o.fail(err, "list events")
	}
	defer rows.Close()
	var page store.Page[core.Event]
	for rows.Next() {
		var e core.Event
		var attrs string
		if err := rows.Scan(&e.Seq, T(&e.At), &e.Kind, &e.Subject, &e.Reason, &attrs); err != nil {
			return store.Page[core.Event]{}, fmt.Errorf("list events: %w", err)
		}
		if err := unmarshal(attrs, &e.Attrs); err != nil {
			return store.Page[core.Event]{}, fmt.Errorf("list events: event %d: attrs: %w", e.Seq, err)
		}
		page.Items = append(page.Items, e)
	}
	if err := rows.Err(); err != nil {
		return store.Page[core.Event]{}, o.fail(err, "list events")
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = store.EncodeCursor("events", page.Items[limit-1].Seq)
	}
	return page, nil
}

// ListRuns implements store.Events.
func (o *ops) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	limit := f.Limit
	if limit == 0 {
		limit = store.MaxRuns
	}
	if limit < 0 || limit > store.MaxRuns {
		return nil, fmt.Errorf("list runs: %w", &core.FieldError{Field: "limit", Value: fmt.Sprint(f.Limit), Allowed: fmt.Sprintf("1..%d (0 for %d)", store.MaxRuns, store.MaxRuns)})
	}
	var w where
	if !f.From.IsZero() {
		w.add("r.end_at > " + w.p(o.t(f.From)))
	}
	if !f.To.IsZero() {
		w.add("r.start_at < " + w.p(o.t(f.To)))
	}
	return o.runs(ctx, "list runs", `SELECT r.job_id, r.shard, j.shards, j.team_id, j.milli_per_gpu, r.parts, r.start_at, r.end_at
		FROM unit_runs r JOIN jobs j ON j.id = r.job_id`+w.String()+` ORDER BY r.seq LIMIT `+w.p(limit), w.vals...)
}

// runs scans rows of job_id, shard, shards, team, milli_per_gpu, parts,
// start and end as Runs.
func (o *ops) runs(ctx context.Context, what, sql string, a ...any) ([]store.Run, error) {
	rows, err := o.r().Query(ctx, sql, a...)
	if err != nil {
		return nil, o.fail(err, "%s", what)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		var r store.Run
		var parts string
		var milli int64
		if err := rows.Scan(&r.JobID, &r.Shard, &r.Shards, &r.Team, &milli, &parts, T(&r.Start), T(&r.End)); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		r.MilliPerGPU = core.Milli(milli)
		var docs []partDoc
		if err := unmarshal(parts, &docs); err != nil {
			return nil, fmt.Errorf("%s: unit %s#%d: parts: %w", what, r.JobID, r.Shard, err)
		}
		for _, d := range docs {
			r.Parts = append(r.Parts, store.Part{LeaseID: d.Lease, GPUs: d.GPUs})
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "%s", what)
	}
	return out, nil
}

// sampleBatch is how many samples one INSERT writes (9 parameters each).
const sampleBatch = 500

// InsertSamples implements store.Samples.
func (o *ops) InsertSamples(ctx context.Context, samples ...core.Sample) error {
	for i := range samples {
		if err := store.ValidateSample(&samples[i]); err != nil {
			return fmt.Errorf("insert samples: sample %d: %w", i, err)
		}
	}
	if len(samples) == 0 {
		return nil
	}
	return o.atomic(ctx, func(q Querier) error {
		for lo := 0; lo < len(samples); lo += sampleBatch {
			var a args
			var vals []string
			for _, s := range samples[lo:min(len(samples), lo+sampleBatch)] {
				vals = append(vals, a.list(s.LeaseID, s.GPU, o.t(s.At), s.UtilPct, s.MemUsedMiB, s.MemTotalMiB, s.PowerW, s.TempC, encodeProcs(s.Procs)))
			}
			if _, err := q.Exec(ctx, `INSERT INTO samples (lease_id, gpu, at, util_pct, mem_used_mib, mem_total_mib, power_w, temp_c, procs) VALUES `+
				strings.Join(vals, ", ")+` ON CONFLICT (lease_id, gpu, at) DO NOTHING`, a.vals...); err != nil {
				return o.fail(err, "insert samples")
			}
		}
		return nil
	})
}

const sampleCols = `lease_id, gpu, at, util_pct, mem_used_mib, mem_total_mib, power_w, temp_c, procs`

// encodeProcs is the procs column of a sample: a JSON object of run ID to
// process count (keys in order), or ” where processes are not known.
func encodeProcs(m map[string]int) string {
	if m == nil {
		return ""
	}
	b, _ := json.Marshal(m) // a map of string to int always marshals
	return string(b)
}

// decodeProcs reads the procs column back. A value that does not decode
// reads as not known: a zombie is never made of a damaged row.
func decodeProcs(s string) map[string]int {
	if s == "" {
		return nil
	}
	var m map[string]int
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil
	}
	return m
}

// QuerySamples implements store.Samples.
func (o *ops) QuerySamples(ctx context.Context, f store.SampleFilter) ([]core.Sample, error) {
	limit, err := store.SampleLimit(f.Limit)
	if err != nil {
		return nil, fmt.Errorf("query samples: %w", err)
	}
	var w where
	if f.LeaseID != "" {
		w.add("lease_id = " + w.p(f.LeaseID))
	}
	if f.GPU != nil {
		w.add("gpu = " + w.p(*f.GPU))
	}
	if !f.From.IsZero() {
		w.add("at >= " + w.p(o.t(f.From)))
	}
	if !f.To.IsZero() {
		w.add("at < " + w.p(o.t(f.To)))
	}
	out, err := o.samples(ctx, `SELECT `+sampleCols+` FROM samples`+w.String()+` ORDER BY at, lease_id, gpu LIMIT `+w.p(limit), w.vals...)
	if err != nil {
		return nil, o.fail(err, "query samples")
	}
	return out, nil
}

// LatestSamples implements store.Samples.
func (o *ops) LatestSamples(ctx context.Context, since time.Time) ([]core.Sample, error) {
	out, err := o.samples(ctx, `SELECT `+sampleCols+` FROM samples s
		JOIN (SELECT lease_id AS l, gpu AS g, MAX(at) AS m FROM samples WHERE at >= $1 GROUP BY lease_id, gpu) latest
		ON s.lease_id = latest.l AND s.gpu = latest.g AND s.at = latest.m
		ORDER BY lease_id, gpu`, o.t(since))
	if err != nil {
		return nil, o.fail(err, "latest samples")
	}
	return out, nil
}

func (o *ops) samples(ctx context.Context, sql string, a ...any) ([]core.Sample, error) {
	rows, err := o.r().Query(ctx, sql, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Sample
	for rows.Next() {
		var s core.Sample
		var procs string
		if err := rows.Scan(&s.LeaseID, &s.GPU, T(&s.At), &s.UtilPct, &s.MemUsedMiB, &s.MemTotalMiB, &s.PowerW, &s.TempC, &procs); err != nil {
			return nil, err
		}
		s.Procs = decodeProcs(procs)
		out = append(out, s)
	}
	return out, rows.Err()
}

// DeleteSamplesBefore implements store.Samples.
func (o *ops) DeleteSamplesBefore(ctx context.Context, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, fmt.Errorf("delete samples: %w", &core.FieldError{Field: "before", Value: "", Allowed: "a non-zero time"})
	}
	var n int64
	err := o.atomic(ctx, func(q Querier) error {
		var err error
		if n, err = q.Exec(ctx, `DELETE FROM samples WHERE at < $1`, o.t(t)); err != nil {
			return o.fail(err, "delete samples")
		}
		return nil
	})
	return n, err
}
