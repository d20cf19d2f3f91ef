package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// SampleFilter selects samples in [From, To); an empty LeaseID matches
// every lease, a nil GPU every GPU.
type SampleFilter struct {
	LeaseID string
	GPU     *int
	From    time.Time
	To      time.Time
	// Limit caps the result (0: MaxSamples).
	Limit int
}

// MaxSamples is the most samples one query returns.
const MaxSamples = 100_000

// Samples keeps per-GPU utilization readings.
type Samples interface {
	// InsertSamples stores samples in bulk. A sample for a GPU and an
	// instant already stored is skipped, so an agent may resend.
	InsertSamples(ctx context.Context, samples ...core.Sample) error
	// QuerySamples returns the samples f selects ordered by time, lease
	// and GPU.
	QuerySamples(ctx context.Context, f SampleFilter) ([]core.Sample, error)
	// LatestSamples returns, for every GPU with a sample at or after
	// since, its latest one, ordered by lease and GPU.
	LatestSamples(ctx context.Context, since time.Time) ([]core.Sample, error)
	// DeleteSamplesBefore removes samples older than t and returns how
	// many went: retention.
	DeleteSamplesBefore(ctx context.Context, t time.Time) (int64, error)
}

// ValidateSample reports the first problem with s.
func ValidateSample(s *core.Sample) error {
	if err := CheckID("lease", s.LeaseID); err != nil {
		return err
	}
	if s.At.IsZero() {
		return &core.FieldError{Field: "at", Value: "", Allowed: "the time of the reading"}
	}
	if s.UtilPct < 0 || s.UtilPct > 100 {
		return &core.FieldError{Field: "util_pct", Value: fmt.Sprint(s.UtilPct), Allowed: "0..100"}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"gpu", int64(s.GPU)}, {"mem_used_mib", s.MemUsedMiB}, {"mem_total_mib", s.MemTotalMiB}, {"power_w", int64(s.PowerW)}} {
		if err := checkNonNeg(f.name, f.v); err != nil {
			return err
		}
	}
	if len(s.Procs) > maxSampleRuns {
		return &core.FieldError{Field: "procs", Value: fmt.Sprint(len(s.Procs)), Allowed: fmt.Sprintf("at most %d runs on one GPU", maxSampleRuns)}
	}
	for run, n := range s.Procs {
		if run == "" || len(run) > 200 || n < 0 {
			return &core.FieldError{Field: "procs", Value: fmt.Sprintf("%q: %d", run, n), Allowed: "a run ID of 1 to 200 characters and a process count >= 0"}
		}
	}
	return nil
}

// maxSampleRuns bounds the runs one sample lists: more units than
// milli-GPUs cannot share a GPU.
const maxSampleRuns = 1000

// SampleLimit validates a sample query's Limit and returns the cap to use.
func SampleLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return MaxSamples, nil
	case limit < 0 || limit > MaxSamples:
		return 0, &core.FieldError{Field: "limit", Value: fmt.Sprint(limit), Allowed: fmt.Sprintf("1..%d (0 for %d)", MaxSamples, MaxSamples)}
	}
	return limit, nil
}
