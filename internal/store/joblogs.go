package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// MaxLogChunk is the largest chunk AppendLog takes, in bytes.
const MaxLogChunk = 512 << 10

// MaxLogRead is the most bytes one ReadLog or TailLog returns.
const MaxLogRead = 4 << 20

// LogRead is a stretch of a job's log: Data starts at offset Start of
// the job's log, which is End bytes long so far. Start is after the
// offset asked for when retention removed the part before it.
type LogRead struct {
	Data  []byte
	Start int64
	End   int64
}

// JobLogs keeps the output of jobs. A job's log is one byte sequence
// with stable offsets, made of streams: each run of each of the job's
// units on an agent writes one stream (its local log file), uploaded in
// chunks by the stream's own offsets. Offsets make uploads idempotent: a
// chunk resent after a lost reply, or overlapping what is stored, adds
// only the bytes not yet stored.
type JobLogs interface {
	// AppendLog adds data, which starts at byte streamOffset of the
	// job's stream, and returns the stream's length after it. The part
	// of data already stored is skipped; a streamOffset past the stream's
	// end is a gap and ErrConflict (the error names the end to resend
	// from). An unknown job is ErrNotFound.
	AppendLog(ctx context.Context, jobID, stream string, streamOffset int64, data []byte, at time.Time) (int64, error)
	// LogStreamEnd returns how many bytes of the stream are stored.
	LogStreamEnd(ctx context.Context, jobID, stream string) (int64, error)
	// ReadLog returns up to limit bytes (0: MaxLogRead) of the job's log
	// from offset.
	ReadLog(ctx context.Context, jobID string, offset int64, limit int) (LogRead, error)
	// TailLog returns the last n bytes (at most MaxLogRead) of the job's
	// log.
	TailLog(ctx context.Context, jobID string, n int) (LogRead, error)
	// DeleteLogsBefore removes chunks stored before t and returns how
	// many went: retention. Offsets of what remains do not change.
	DeleteLogsBefore(ctx context.Context, t time.Time) (int64, error)
}

// ValidateLogChunk reports the first problem with an upload.
func ValidateLogChunk(jobID, stream string, streamOffset int64, data []byte, at time.Time) error {
	if err := CheckID("job", jobID); err != nil {
		return err
	}
	if err := CheckID("stream", stream); err != nil {
		return err
	}
	if err := checkNonNeg("offset", streamOffset); err != nil {
		return err
	}
	if len(data) > MaxLogChunk {
		return &core.FieldError{Field: "data", Value: fmt.Sprintf("%d bytes", len(data)), Allowed: fmt.Sprintf("at most %d bytes a chunk", MaxLogChunk)}
	}
	if at.IsZero() {
		return &core.FieldError{Field: "at", Value: "", Allowed: "the time of the upload"}
	}
	return nil
}

// LogLimit validates a read's byte limit and returns the one to use.
func LogLimit(field string, limit int) (int, error) {
	switch {
	case limit == 0:
		return MaxLogRead, nil
	case limit < 0 || limit > MaxLogRead:
		return 0, &core.FieldError{Field: field, Value: fmt.Sprint(limit), Allowed: fmt.Sprintf("1..%d bytes (0 for %d)", MaxLogRead, MaxLogRead)}
	}
	return limit, nil
}
