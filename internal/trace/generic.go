package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The generic CSV form, documented column by column in docs/traces.md:
// a header row, then one job per row. Only submit_s, duration_s and gpus
// are required; the rest may be absent or empty. Times are whole seconds
// from the trace's start (the profile gives the start).

// GenericColumns are the generic form's columns in the order WriteGeneric
// writes them: the eleven of the specification (submit_s … shards) and,
// so that every field of a Job survives a round trip, id, user, cpu_milli,
// mem_mib, nodes and status.
var GenericColumns = []string{
	"id", "submit_s", "duration_s", "gpus", "gpu_milli", "gpu_mem_mib", "team", "tier",
	"interruptible", "deadline_s", "gpu_model", "shards", "user", "cpu_milli", "mem_mib", "nodes", "status",
}

// LoadGeneric reads a generic CSV trace from a file.
func LoadGeneric(path string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	return ReadGeneric(f, path)
}

// ReadGeneric reads a generic CSV trace (columns by header name, any
// order; unknown columns are ignored). file names the input in errors,
// which are *ParseError values naming the line, column and value. Jobs
// are sorted by submit_s, ties in file order; a row without an id gets
// its 0-based row number.
func ReadGeneric(r io.Reader, file string) (Trace, error) {
	t, err := newTable(r, file, []string{"submit_s", "duration_s", "gpus"})
	if err != nil {
		return Trace{}, err
	}
	out := Trace{Name: file}
	seen := map[string]int{}
	// Jobs are gathered in fixed-size chunks and copied once into a slice
	// of the exact length: appending a million jobs one by one copied the
	// growing slice over and over (half the time of reading the file).
	var chunks [][]Job
	cur := make([]Job, 0, jobChunk)
	for n := 0; ; n++ {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Trace{}, err
		}
		j := Job{
			ID:        row.name("id"),
			Submit:    row.int("submit_s", 0, MaxSeconds),
			Duration:  row.int("duration_s", 0, MaxSeconds),
			GPUs:      int(row.int("gpus", 0, MaxGPUs)),
			GPUMemMiB: row.optInt("gpu_mem_mib", 0, MaxGPUMemMiB, 0),
			Team:      row.name("team"),
			User:      row.name("user"),
			Shards:    int(row.optInt("shards", 0, MaxShards, 0)),
			CPUMilli:  row.optInt("cpu_milli", 0, MaxOpenbCPUMilli, 0),
			MemMiB:    row.optInt("mem_mib", 0, MaxOpenbMemMiB, 0),
			Nodes:     int(row.optInt("nodes", 0, MaxNodes, 0)),
			Status:    row.name("status"),
		}
		if j.ID == "" {
			j.ID = strconv.Itoa(n)
		}
		j.Tier = row.tier("tier")
		j.Interruptible = row.flag("interruptible")
		j.Models = row.models("gpu_model")
		if row.err != nil {
			return Trace{}, row.err
		}
		switch s := row.text("gpu_milli"); {
		case j.GPUs == 0:
			if s != "" && s != "0" {
				return Trace{}, row.fail("gpu_milli", s, "", "0 or empty for a job without GPUs")
			}
		case s == "":
			j.GPUMilli = int64(core.WholeGPU)
		case j.GPUs == 1:
			j.GPUMilli = row.int("gpu_milli", 1, int64(core.WholeGPU))
		default:
			if row.int("gpu_milli", int64(core.WholeGPU), int64(core.WholeGPU)); row.err != nil {
				return Trace{}, row.fail("gpu_milli", s, "", "1000 or empty when gpus > 1 (only single-GPU jobs share)")
			}
			j.GPUMilli = int64(core.WholeGPU)
		}
		if s := row.text("deadline_s"); s != "" {
			j.Deadline = row.int("deadline_s", max(1, j.Submit), MaxSeconds)
			if row.err != nil {
				return Trace{}, row.fail("deadline_s", s, "", fmt.Sprintf("empty (none) or seconds from the trace's start, >= submit_s %d and > 0", j.Submit))
			}
		}
		if row.err != nil {
			return Trace{}, row.err
		}
		if first, dup := seen[j.ID]; dup {
			return Trace{}, row.fail("id", j.ID, "duplicate job", fmt.Sprintf("each id once (first on line %d)", first))
		}
		seen[j.ID] = row.line
		if len(cur) == cap(cur) {
			chunks = append(chunks, cur)
			cur = make([]Job, 0, jobChunk)
		}
		cur = append(cur, j)
	}
	out.Jobs = slices.Concat(append(chunks, cur)...)
	sortJobs(out.Jobs)
	return out, nil
}

// WriteGeneric writes t in the generic CSV form, every column of
// GenericColumns, unknown values as empty cells; ReadGeneric reads it
// back to the same jobs. The trace's Start is not written (the profile
// gives it). It refuses a trace that does not Validate.
func WriteGeneric(w io.Writer, t Trace) error { return WriteGenericProgress(w, t, nil) }

// WriteGenericProgress is WriteGeneric that calls progress, when not
// nil, with the jobs written so far and their number, every few thousand
// jobs and at the end.
func WriteGenericProgress(w io.Writer, t Trace, progress func(done, total int)) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("write generic trace: %w", err)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(GenericColumns); err != nil {
		return fmt.Errorf("write generic trace %s: %w", t.Name, err)
	}
	opt := func(v int64) string {
		if v == 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	rec := make([]string, len(GenericColumns))
	for i := range t.Jobs {
		j := &t.Jobs[i]
		rec = append(rec[:0],
			j.ID,
			strconv.FormatInt(j.Submit, 10),
			strconv.FormatInt(j.Duration, 10),
			strconv.Itoa(j.GPUs),
			strconv.FormatInt(j.GPUMilli, 10),
			opt(j.GPUMemMiB),
			j.Team,
			string(j.Tier),
			j.Interruptible.String(),
			opt(j.Deadline),
			strings.Join(j.Models, "|"),
			opt(int64(j.Shards)),
			j.User,
			opt(j.CPUMilli),
			opt(j.MemMiB),
			opt(int64(j.Nodes)),
			j.Status,
		)
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write generic trace %s: job %q: %w", t.Name, j.ID, err)
		}
		if progress != nil && (i+1)%progressEvery == 0 {
			progress(i+1, len(t.Jobs))
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write generic trace %s: %w", t.Name, err)
	}
	if progress != nil {
		progress(len(t.Jobs), len(t.Jobs))
	}
	return nil
}

// name is a text cell that must fit on one line (ids, teams, users,
// statuses): control characters are refused.
func (r *row) name(col string) string {
	s := r.text(col)
	if strings.IndexFunc(s, isControl) >= 0 {
		r.record(col, s, "text without control characters or line breaks")
		return ""
	}
	return s
}

func isControl(c rune) bool { return c < 0x20 || c == 0x7f }

// tier parses a tier name ("" when empty).
func (r *row) tier(col string) core.Tier {
	s := r.text(col)
	if s == "" {
		return ""
	}
	t, err := core.ParseTier(strings.ToLower(s))
	if err != nil {
		r.record(col, s, "core, regular, offline, or empty (the profile decides)")
		return ""
	}
	return t
}

// flag parses a yes/no cell: true/false, yes/no, y/n, 1/0 in any case;
// FlagUnset when empty.
func (r *row) flag(col string) Flag {
	s := r.text(col)
	switch strings.ToLower(s) {
	case "":
		return FlagUnset
	case "true", "yes", "y", "1", "t":
		return FlagTrue
	case "false", "no", "n", "0", "f":
		return FlagFalse
	}
	r.record(col, s, "true or false (also yes/no, 1/0), or empty (the profile decides)")
	return FlagUnset
}

// models parses a list of GPU models separated by "|" (nil when empty).
func (r *row) models(col string) []string {
	s := r.text(col)
	if strings.IndexFunc(s, isControl) >= 0 {
		r.record(col, s, "GPU model names separated by |, without control characters")
		return nil
	}
	return splitSpec(s)
}
