package plan

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Limits on a demand series: a decade of hours and a million GPUs in any
// one hour of one class keep every cost within int64 micro-units at any
// catalog price below 10,000 per GPU-hour.
const (
	MaxHours      = 10 * 8760
	MaxHourlyGPUs = 1_000_000
)

// Series is hourly demand for GPU classes on one clock: hour h is the hour
// that starts at Start + h hours.
type Series struct {
	// Start is the instant hour 0 starts; it places the hours in
	// time-of-use windows and spot price series.
	Start time.Time
	// Hours is the length of the series; every class has this many.
	Hours int
	// Classes holds one demand per GPU class, each named once.
	Classes []ClassDemand
}

// ClassDemand is the demand for one GPU class, in whole GPUs per hour.
// Interruptible GPUs may run on spot capacity; deferrable GPUs may run at
// another hour of the same shift window; the rest is firm. For every hour
// Interruptible[h] + Deferrable[h] <= GPUs[h].
type ClassDemand struct {
	// GPUModel names the class as the catalog's offers spell it.
	GPUModel string
	// GPUs is the number of GPUs in use in each hour.
	GPUs []int64
	// Interruptible is the part of GPUs that may be reclaimed and resumed
	// from a checkpoint; nil means none.
	Interruptible []int64
	// Deferrable is the part of GPUs that may move in time within its
	// shift window; nil means none.
	Deferrable []int64
}

// Validate reports the first problem with s: no hours or classes, a class
// named twice or unnamed, a length that is not Hours, negative demand, or
// interruptible and deferrable parts larger than the demand.
func (s Series) Validate() error {
	if s.Hours < 1 || s.Hours > MaxHours {
		return &core.FieldError{Field: "hours", Value: fmt.Sprint(s.Hours), Allowed: fmt.Sprintf("a series of 1..%d hours", MaxHours)}
	}
	if len(s.Classes) == 0 {
		return &core.FieldError{Field: "classes", Value: "none", Allowed: "demand for at least one GPU class"}
	}
	seen := map[string]bool{}
	for _, c := range s.Classes {
		f := func(name string) string { return fmt.Sprintf("classes[%s].%s", c.GPUModel, name) }
		if c.GPUModel == "" || seen[c.GPUModel] {
			return &core.FieldError{Field: "classes.gpu_model", Value: c.GPUModel, Allowed: "a non-empty GPU model, once per series"}
		}
		seen[c.GPUModel] = true
		if len(c.GPUs) != s.Hours {
			return &core.FieldError{Field: f("gpus"), Value: fmt.Sprintf("%d hours", len(c.GPUs)), Allowed: fmt.Sprintf("%d hours", s.Hours)}
		}
		for _, part := range []struct {
			name string
			v    []int64
		}{{"interruptible", c.Interruptible}, {"deferrable", c.Deferrable}} {
			if part.v != nil && len(part.v) != s.Hours {
				return &core.FieldError{Field: f(part.name), Value: fmt.Sprintf("%d hours", len(part.v)), Allowed: fmt.Sprintf("%d hours or none", s.Hours)}
			}
		}
		for h, g := range c.GPUs {
			if g < 0 || g > MaxHourlyGPUs {
				return &core.FieldError{Field: fmt.Sprintf("%s[%d]", f("gpus"), h), Value: fmt.Sprint(g), Allowed: fmt.Sprintf("0..%d GPUs", MaxHourlyGPUs)}
			}
			in, de := at(c.Interruptible, h), at(c.Deferrable, h)
			if in < 0 || de < 0 || in+de > g {
				return &core.FieldError{Field: fmt.Sprintf("%s[%d]", f("interruptible+deferrable"), h), Value: fmt.Sprintf("%d+%d", in, de),
					Allowed: fmt.Sprintf("non-negative parts that add up to at most the hour's %d GPUs", g)}
			}
		}
	}
	return nil
}

func at(v []int64, h int) int64 {
	if v == nil {
		return 0
	}
	return v[h]
}

// DemandError is a problem at one place of a demand file: which file,
// line and field, with what value, and what is allowed there.
type DemandError struct {
	File    string
	Line    int
	Field   string
	Value   string
	Allowed string
	// Err is an underlying error, such as the CSV reader's.
	Err error
}

// Error writes "file:line: field: invalid value \"v\": want allowed".
func (e *DemandError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	if e.Allowed != "" {
		fmt.Fprintf(&b, ": invalid value %q: want %s", e.Value, e.Allowed)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *DemandError) Unwrap() error { return e.Err }

// DemandCSVOptions says how to read a demand CSV.
type DemandCSVOptions struct {
	// Start is the instant hour 0 starts when the file numbers its hours;
	// a file with timestamps starts at its earliest one instead.
	Start time.Time
	// Classes, when set, are the GPU classes the catalog rents: each
	// row's gpu_model is resolved against them with [FindClass] ("V100"
	// finds "NVIDIA Tesla V100") and one they lack is an error at its line.
	Classes []string
}

// The columns of a demand CSV.
var demandColumns = []string{"hour", "timestamp", "gpu_model", "gpus", "interruptible", "deferrable"}

// ParseDemandCSV reads an hourly demand series. The first line is a header
// naming the columns in any order:
//
//   - hour (a whole number from 0) or timestamp (RFC 3339 on a whole
//     hour, such as 2026-03-02T14:00:00Z): the hour, exactly one of the
//     two;
//   - gpu_model: the GPU class, as the catalog's offers name it;
//   - gpus: GPUs in use in that hour, a whole number >= 0;
//   - interruptible, deferrable (optional): the shares of those GPUs
//     that may run on spot capacity and that may move within their shift
//     window, each a decimal 0..1 or a percentage ("30%"), together at
//     most 1. A share is turned into whole GPUs rounding down, so work
//     whose share does not make a whole GPU stays firm.
//
// Hours a class has no row for have no demand. A class may appear once per
// hour. Blank lines and lines starting with # are skipped. Every error is a
// *DemandError naming the file (name), line, field and value.
func ParseDemandCSV(name string, r io.Reader, opt DemandCSVOptions) (Series, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = false
	fail := func(line int, field, value, allowed string) error {
		return &DemandError{File: name, Line: line, Field: field, Value: value, Allowed: allowed}
	}
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return Series{}, &DemandError{File: name, Err: errors.New("empty file: want a header line such as hour,gpu_model,gpus,interruptible,deferrable and one row per hour and GPU class")}
	}
	if err != nil {
		return Series{}, csvError(name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		line, _ := cr.FieldPos(i)
		if !contains(demandColumns, h) {
			return Series{}, fail(line, "header", h, "columns among "+strings.Join(demandColumns, ", "))
		}
		if _, dup := col[h]; dup {
			return Series{}, fail(line, "header", h, "each column once")
		}
		col[h] = i
	}
	_, hasHour := col["hour"]
	_, hasTS := col["timestamp"]
	for _, need := range []string{"gpu_model", "gpus"} {
		if _, ok := col[need]; !ok {
			return Series{}, fail(1, "header", strings.Join(header, ","), "a "+need+" column")
		}
	}
	if hasHour == hasTS {
		return Series{}, fail(1, "header", strings.Join(header, ","), "exactly one of the columns hour and timestamp")
	}

	type row struct {
		line       int
		key        int64 // hour index, or Unix seconds of the timestamp
		class      string
		gpus       int64
		inBP, deBP int64
	}
	var rows []row
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Series{}, csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		get := func(c string) string {
			if i, ok := col[c]; ok {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		var rw row
		rw.line = line
		if hasHour {
			v := get("hour")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n >= MaxHours {
				return Series{}, fail(line, "hour", v, fmt.Sprintf("a whole hour 0..%d", MaxHours-1))
			}
			rw.key = n
		} else {
			v := get("timestamp")
			ts, err := time.Parse(time.RFC3339, v)
			if err != nil || ts.Unix()%3600 != 0 || ts.Nanosecond() != 0 {
				return Series{}, fail(line, "timestamp", v, "an RFC 3339 time on a whole hour, such as 2026-03-02T14:00:00Z")
			}
			rw.key = ts.Unix()
		}
		rw.class = get("gpu_model")
		if rw.class == "" {
			return Series{}, fail(line, "gpu_model", "", "a GPU model such as NVIDIA A100")
		}
		if opt.Classes != nil {
			c, err := FindClass(opt.Classes, rw.class)
			if err != nil {
				return Series{}, &DemandError{File: name, Line: line, Field: "gpu_model", Err: err}
			}
			rw.class = c
		}
		v := get("gpus")
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil || g < 0 || g > MaxHourlyGPUs {
			return Series{}, fail(line, "gpus", v, fmt.Sprintf("a whole number of GPUs 0..%d", MaxHourlyGPUs))
		}
		rw.gpus = g
		for _, s := range []struct {
			col string
			dst *int64
		}{{"interruptible", &rw.inBP}, {"deferrable", &rw.deBP}} {
			v := get(s.col)
			if v == "" {
				continue
			}
			bp, ok := parseShare(v)
			if !ok {
				return Series{}, fail(line, s.col, v, "a share 0..1 such as 0.3, or a percentage such as 30%")
			}
			*s.dst = bp
		}
		if rw.inBP+rw.deBP > bpOne {
			return Series{}, fail(line, "interruptible+deferrable", get("interruptible")+"+"+get("deferrable"), "shares that add up to at most 1 (100%)")
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 {
		return Series{}, &DemandError{File: name, Err: errors.New("no demand rows after the header: the series is empty")}
	}

	start := opt.Start
	first := rows[0].key
	for _, rw := range rows {
		first = min(first, rw.key)
	}
	if hasTS {
		start = time.Unix(first, 0).UTC()
	} else {
		first = 0
	}
	hours := 0
	for _, rw := range rows {
		h := (rw.key - first)
		if hasTS {
			h /= 3600
		}
		if h >= MaxHours {
			return Series{}, fail(rw.line, "timestamp", time.Unix(rw.key, 0).UTC().Format(time.RFC3339), fmt.Sprintf("within %d hours of the first timestamp", MaxHours))
		}
		hours = max(hours, int(h)+1)
	}
	s := Series{Start: start, Hours: hours}
	index := map[string]int{}
	seen := map[[2]int64]int{} // (class, hour) → line
	for _, rw := range rows {
		h := rw.key - first
		if hasTS {
			h /= 3600
		}
		ci, ok := index[rw.class]
		if !ok {
			ci = len(s.Classes)
			index[rw.class] = ci
			s.Classes = append(s.Classes, ClassDemand{GPUModel: rw.class, GPUs: make([]int64, hours)})
		}
		if prev, dup := seen[[2]int64{int64(ci), h}]; dup {
			field := "hour"
			if hasTS {
				field = "timestamp"
			}
			return Series{}, &DemandError{File: name, Line: rw.line, Field: field,
				Err: fmt.Errorf("%s has a second row for hour %d (the first is on line %d): one row per hour and class", rw.class, h, prev)}
		}
		seen[[2]int64{int64(ci), h}] = rw.line
		c := &s.Classes[ci]
		c.GPUs[h] = rw.gpus
		if rw.inBP > 0 {
			if c.Interruptible == nil {
				c.Interruptible = make([]int64, hours)
			}
			c.Interruptible[h] = rw.gpus * rw.inBP / bpOne
		}
		if rw.deBP > 0 {
			if c.Deferrable == nil {
				c.Deferrable = make([]int64, hours)
			}
			c.Deferrable[h] = rw.gpus * rw.deBP / bpOne
		}
	}
	return s, s.Validate()
}

// csvError turns the CSV reader's error into a *DemandError at its line.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &DemandError{File: name, Line: pe.Line, Field: fmt.Sprintf("column %d", pe.Column), Err: pe.Err}
	}
	return &DemandError{File: name, Err: err}
}

// parseShare reads 0..1 or 0%..100% as basis points, exactly: "0.3",
// "30%", "12.5%". More precision than a basis point is refused.
func parseShare(s string) (int64, bool) {
	scale := big.NewRat(bpOne, 1)
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s = strings.TrimSpace(t)
		scale = big.NewRat(100, 1)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || strings.ContainsAny(s, "eE/") {
		return 0, false
	}
	r.Mul(r, scale)
	if !r.IsInt() || r.Sign() < 0 || r.Cmp(big.NewRat(bpOne, 1)) > 0 {
		return 0, false
	}
	return r.Num().Int64(), true
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
