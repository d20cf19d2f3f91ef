package trace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Helios and Philly job traces come in two CSV forms, both read by
// ReadHelios (columns matched by header name, any order):
//
// The interval form — DIR-LAB/Gen-Parallel-Workloads' training data, of
// which ../shared/data/helios-venus-excerpt-dirlab/ is the Helios file
// and Philly/training_data/philly_data_training.csv the Philly one:
//
//	u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status
//
// interval is the gap in seconds since the previous row's submission (0
// for the first row), so a job's submit time is the running sum of
// interval down to its row; run_time is its execution time. The file
// keeps no wall-clock time, so the trace's Start is zero (the profile
// picks one). wall_time is ignored: it is 0 throughout the Helios
// excerpt. Required: gpu_num, interval, run_time.
//
// The cluster-log form — S-Lab-System-Group/HeliosData cluster_log.csv
// (Earth, Saturn, Uranus, Venus) and Philly converted to it:
//
//	job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
//
// submit_time is a local time "2006-01-02 15:04:05" (China Standard
// Time, UTC+8, for Helios) or whole Unix seconds; the trace's Start is
// the earliest submit time and every Submit counts from it. duration is
// the execution time; without it, end_time − start_time. The virtual
// cluster (vc) becomes the job's team. Required: gpu_num, submit_time,
// and duration or start_time and end_time.
//
// Every GPU is asked for whole (GPUMilli 1000); cpu_num becomes CPUMilli
// (×1000). Rows are sorted by submit time, ties kept in file order.

// HeliosZone is the time zone of Helios cluster-log timestamps: China
// Standard Time, UTC+8 all year.
var HeliosZone = time.FixedZone("UTC+8", 8*3600)

// heliosTimeLayout is how cluster_log.csv writes times.
const heliosTimeLayout = "2006-01-02 15:04:05"

// MaxHeliosCPUs is the most CPUs a Helios job may ask for.
const MaxHeliosCPUs = 1_000_000

// LoadHelios reads a Helios or Philly job trace from a file.
func LoadHelios(path string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, fmt.Errorf("open helios trace: %w", err)
	}
	defer f.Close()
	return ReadHelios(f, path)
}

// ReadHelios reads a Helios or Philly job trace in the interval form or
// the cluster-log form (see the package's comments above, and
// docs/traces.md). file names the input in errors, which are
// *ParseError values naming the line, column and value.
func ReadHelios(r io.Reader, file string) (Trace, error) {
	t, err := newTable(r, file, []string{"gpu_num"})
	if err != nil {
		return Trace{}, err
	}
	_, interval := t.index["interval"]
	_, submit := t.index["submit_time"]
	switch {
	case interval:
		if err := t.require("run_time"); err != nil {
			return Trace{}, err
		}
	case submit:
		_, dur := t.index["duration"]
		if !dur {
			if err := t.require("start_time", "end_time"); err != nil {
				return Trace{}, err
			}
		}
	default:
		return Trace{}, &ParseError{File: file, Problem: "missing columns", Value: "interval|submit_time",
			Allowed: "a header with interval (the DIR-LAB form: u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status) or submit_time (the cluster_log.csv form)"}
	}
	out := Trace{Name: file}
	lines := []int{} // each job's line, for errors found after the pass
	seen := map[string]int{}
	var clock int64 // running sum of intervals
	for n := 0; ; n++ {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Trace{}, err
		}
		j := Job{
			ID:     row.name("u_id"),
			User:   row.name("user"),
			Team:   row.name("vc"),
			GPUs:   int(row.int("gpu_num", 0, MaxGPUs)),
			Status: row.name("new_status"),
		}
		if j.ID == "" {
			j.ID = row.name("job_id")
		}
		if j.ID == "" {
			j.ID = strconv.Itoa(n)
		}
		if j.Status == "" {
			j.Status = row.name("state")
		}
		j.CPUMilli = row.optInt("cpu_num", 0, MaxHeliosCPUs, 0) * 1000
		j.Nodes = int(row.optInt("node_num", 0, MaxNodes, 0))
		if interval {
			clock += row.int("interval", 0, MaxSeconds)
			j.Submit = clock
			j.Duration = row.int("run_time", 0, MaxSeconds)
			if row.err == nil && clock > MaxSeconds {
				return Trace{}, row.fail("interval", row.text("interval"), "trace too long",
					fmt.Sprintf("submit times (the running sum of interval) up to %d seconds", MaxSeconds))
			}
		} else {
			j.Submit = row.heliosTime("submit_time")
			if _, ok := t.index["duration"]; ok {
				j.Duration = row.int("duration", 0, MaxSeconds)
			} else {
				start, end := row.heliosTime("start_time"), row.heliosTime("end_time")
				if row.err == nil && (end < start || end-start > MaxSeconds) {
					return Trace{}, row.fail("end_time", row.text("end_time"), "", fmt.Sprintf("a time 0..%d seconds after start_time %q", MaxSeconds, row.text("start_time")))
				}
				j.Duration = end - start
			}
		}
		if row.err != nil {
			return Trace{}, row.err
		}
		if j.GPUs > 0 {
			j.GPUMilli = 1000
		}
		if first, dup := seen[j.ID]; dup {
			return Trace{}, row.fail(idColumn(t), j.ID, "duplicate job", fmt.Sprintf("each job once (first on line %d)", first))
		}
		seen[j.ID] = row.line
		out.Jobs = append(out.Jobs, j)
		lines = append(lines, row.line)
	}
	if submit && !interval && len(out.Jobs) > 0 {
		t0 := out.Jobs[0].Submit
		for _, j := range out.Jobs {
			t0 = min(t0, j.Submit)
		}
		for i := range out.Jobs {
			j := &out.Jobs[i]
			if j.Submit-t0 > MaxSeconds {
				return Trace{}, &ParseError{File: file, Line: lines[i], Field: "submit_time", Value: strconv.FormatInt(j.Submit, 10), Problem: "trace too long",
					Allowed: fmt.Sprintf("submit times within %d seconds of the earliest", MaxSeconds)}
			}
			j.Submit -= t0
		}
		out.Start = time.Unix(t0, 0).In(HeliosZone)
	}
	sortJobs(out.Jobs)
	return out, nil
}

// idColumn is the column ids come from, for errors.
func idColumn(t *table) string {
	if _, ok := t.index["u_id"]; ok {
		return "u_id"
	}
	return "job_id"
}

// heliosTime parses a cluster-log time: whole Unix seconds, or a local
// time in HeliosZone. It returns Unix seconds.
func (r *row) heliosTime(col string) int64 {
	s := r.text(col)
	const allowed = `a time "2006-01-02 15:04:05" (UTC+8) or whole Unix seconds >= 0`
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		if v < 0 || v > maxUnix {
			r.record(col, s, allowed)
			return 0
		}
		return v
	}
	tm, err := time.ParseInLocation(heliosTimeLayout, s, HeliosZone)
	if err != nil || tm.Unix() < 0 {
		r.record(col, s, allowed)
		return 0
	}
	return tm.Unix()
}

// maxUnix bounds Unix times read from a trace: the year 9999.
const maxUnix int64 = 253402300799

// require checks that the header names every column in cols.
func (t *table) require(cols ...string) error {
	var missing []string
	for _, c := range cols {
		if _, ok := t.index[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &ParseError{File: t.file, Problem: "missing columns", Value: strings.Join(missing, ","), Allowed: "a header with " + strings.Join(cols, ",")}
}

// optInt parses the named column as an integer in lo..hi; def when the
// column or the cell is empty.
func (r *row) optInt(col string, lo, hi, def int64) int64 {
	if r.text(col) == "" {
		return def
	}
	return r.int(col, lo, hi)
}
