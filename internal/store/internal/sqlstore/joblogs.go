package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// AppendLog implements store.JobLogs. The stream's row is locked first
// (an UPDATE, on PostgreSQL a row lock even at read committed), so two
// uploads of one stream serialise; the job's end offset is taken by an
// upsert that returns it, so uploads of different streams of one job
// never get the same offset.
func (o *ops) AppendLog(ctx context.Context, jobID, stream string, streamOffset int64, data []byte, at time.Time) (int64, error) {
	if err := store.ValidateLogChunk(jobID, stream, streamOffset, data, at); err != nil {
		return 0, fmt.Errorf("append log: %w", err)
	}
	var end int64
	err := o.atomic(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO job_log_streams (job_id, stream, end_off) VALUES ($1, $2, 0) ON CONFLICT (job_id, stream) DO NOTHING`, jobID, stream); err != nil {
			return o.fail(err, "append log of job %s", jobID)
		}
		if err := q.QueryRow(ctx, `UPDATE job_log_streams SET end_off = end_off WHERE job_id = $1 AND stream = $2 RETURNING end_off`, jobID, stream).Scan(&end); err != nil {
			return o.fail(err, "append log of job %s", jobID)
		}
		if streamOffset > end {
			return store.Conflict("log stream %s of job %s has %d bytes; a chunk at offset %d would leave a gap: resend from %d", stream, jobID, end, streamOffset, end)
		}
		skip := end - streamOffset
		if skip >= int64(len(data)) {
			return nil // all stored already
		}
		rest := data[skip:]
		n := int64(len(rest))
		var jobEnd int64
		if err := q.QueryRow(ctx, `INSERT INTO job_log_heads (job_id, end_off) VALUES ($1, $2)
			ON CONFLICT (job_id) DO UPDATE SET end_off = job_log_heads.end_off + $2 RETURNING end_off`, jobID, n).Scan(&jobEnd); err != nil {
			return o.fail(err, "append log of job %s", jobID)
		}
		if _, err := q.Exec(ctx, `INSERT INTO job_logs (job_id, off, stream, stream_off, data, at) VALUES ($1, $2, $3, $4, $5, $6)`,
			jobID, jobEnd-n, stream, end, rest, o.t(at)); err != nil {
			return o.fail(err, "append log of job %s", jobID)
		}
		if _, err := q.Exec(ctx, `UPDATE job_log_streams SET end_off = $3 WHERE job_id = $1 AND stream = $2`, jobID, stream, end+n); err != nil {
			return o.fail(err, "append log of job %s", jobID)
		}
		end += n
		return nil
	})
	if err != nil {
		return 0, err
	}
	return end, nil
}

// LogStreamEnd implements store.JobLogs.
func (o *ops) LogStreamEnd(ctx context.Context, jobID, stream string) (int64, error) {
	if err := store.CheckID("job", jobID); err != nil {
		return 0, fmt.Errorf("log stream end: %w", err)
	}
	var end int64
	err := o.r().QueryRow(ctx, `SELECT end_off FROM job_log_streams WHERE job_id = $1 AND stream = $2`, jobID, stream).Scan(&end)
	if errors.Is(err, ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, o.fail(err, "log stream end of job %s", jobID)
	}
	return end, nil
}

// ReadLog implements store.JobLogs.
func (o *ops) ReadLog(ctx context.Context, jobID string, offset int64, limit int) (store.LogRead, error) {
	if err := store.CheckID("job", jobID); err != nil {
		return store.LogRead{}, fmt.Errorf("read log: %w", err)
	}
	if offset < 0 {
		return store.LogRead{}, fmt.Errorf("read log: %w", fieldErr("offset", fmt.Sprint(offset), ">= 0"))
	}
	limit, err := store.LogLimit("limit", limit)
	if err != nil {
		return store.LogRead{}, fmt.Errorf("read log: %w", err)
	}
	return o.readLog(ctx, jobID, offset, limit)
}

// TailLog implements store.JobLogs.
func (o *ops) TailLog(ctx context.Context, jobID string, n int) (store.LogRead, error) {
	if err := store.CheckID("job", jobID); err != nil {
		return store.LogRead{}, fmt.Errorf("tail log: %w", err)
	}
	if n < 1 || n > store.MaxLogRead {
		return store.LogRead{}, fmt.Errorf("tail log: %w", fieldErr("tail", fmt.Sprint(n), fmt.Sprintf("1..%d bytes", store.MaxLogRead)))
	}
	end, err := o.logEnd(ctx, jobID)
	if err != nil {
		return store.LogRead{}, err
	}
	return o.readLog(ctx, jobID, max(end-int64(n), 0), n)
}

func (o *ops) logEnd(ctx context.Context, jobID string) (int64, error) {
	var end int64
	err := o.r().QueryRow(ctx, `SELECT end_off FROM job_log_heads WHERE job_id = $1`, jobID).Scan(&end)
	if errors.Is(err, ErrNoRows) {
		var x int
		if err := o.r().QueryRow(ctx, `SELECT 1 FROM jobs WHERE id = $1`, jobID).Scan(&x); err != nil {
			return 0, fmt.Errorf("read log: %w", one(o.s.b.Classify(err), "job", jobID))
		}
		return 0, nil
	}
	if err != nil {
		return 0, o.fail(err, "read log of job %s", jobID)
	}
	return end, nil
}

func (o *ops) readLog(ctx context.Context, jobID string, offset int64, limit int) (store.LogRead, error) {
	end, err := o.logEnd(ctx, jobID)
	if err != nil {
		return store.LogRead{}, err
	}
	out := store.LogRead{Start: min(offset, end), End: end, Data: []byte{}}
	if offset >= end {
		return out, nil
	}
	// The chunk holding offset starts at the greatest off not after it;
	// read from there in offset order until limit bytes are had.
	rows, err := o.r().Query(ctx, `SELECT off, data FROM job_logs WHERE job_id = $1
		AND off >= COALESCE((SELECT MAX(off) FROM job_logs WHERE job_id = $1 AND off <= $2), 0)
		ORDER BY off LIMIT 4096`, jobID, offset)
	if err != nil {
		return store.LogRead{}, o.fail(err, "read log of job %s", jobID)
	}
	defer rows.Close()
	first := true
	for rows.Next() && len(out.Data) < limit {
		var off int64
		var data []byte
		if err := rows.Scan(&off, &data); err != nil {
			return store.LogRead{}, fmt.Errorf("read log of job %s: %w", jobID, err)
		}
		if off+int64(len(data)) <= offset {
			continue
		}
		if first {
			out.Start = max(off, offset)
			first = false
		} else if off != out.Start+int64(len(out.Data)) {
			break // a hole that retention made: stop before it
		}
		from := max(offset-off, 0)
		out.Data = append(out.Data, data[from:]...)
	}
	if err := rows.Err(); err != nil {
		return store.LogRead{}, o.fail(err, "read log of job %s", jobID)
	}
	if len(out.Data) > limit {
		out.Data = out.Data[:limit]
	}
	if first {
		out.Start = end // everything from offset on was removed
	}
	return out, nil
}

// DeleteLogsBefore implements store.JobLogs.
func (o *ops) DeleteLogsBefore(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	err := o.atomic(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, `DELETE FROM job_logs WHERE at < $1`, o.t(t))
		if err != nil {
			return o.fail(err, "delete logs before %s", t.UTC().Format(time.RFC3339))
		}
		return nil
	})
	return n, err
}

func fieldErr(field, value, allowed string) error {
	return &core.FieldError{Field: field, Value: value, Allowed: allowed}
}
