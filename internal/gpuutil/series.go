package gpuutil

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Point is one reading: from its time until the next reading of its id,
// the GPUs of the job or pod are busy BP basis points of the time
// (10000 = fully busy).
type Point struct {
	// At is the reading's time when the file writes RFC 3339 times;
	// Offset its time from the job's first start when the file writes
	// whole seconds (Relative).
	At     time.Time
	Offset time.Duration
	BP     int
	// Line is the reading's line in the file.
	Line int
}

// Set is the utilization series of a file, by id.
type Set struct {
	// File names the file, for messages.
	File string
	// Relative is set when the file's times are seconds from each job's
	// first start rather than RFC 3339 instants.
	Relative bool
	byID     map[string][]Point
}

// ParseError is an error in a utilization file; see core.ParseError.
type ParseError = core.ParseError

// Limits that keep a malformed file from exhausting memory or
// overflowing time arithmetic.
const (
	maxRows       = 20_000_000
	maxIDBytes    = 256
	maxOffsetSecs = 100 * 366 * 24 * 3600
)

// Parse reads a utilization series in CSV: a header naming the columns
// id, time and utilization (in any order; other names are errors), then
// one reading per line. id is a job's or pod's id; time is RFC 3339
// ("2026-03-01T08:00:00Z") or whole seconds from the job's first start
// ("300"), one form for the whole file, never going back within an id;
// utilization is a fraction 0..1 ("0.35") or a percentage 0%..100%
// ("35%", "35.5%"), kept to a basis point. Blank lines and lines starting
// with # are skipped. Errors are *ParseError naming the line, column,
// field and value.
func Parse(name string, r io.Reader) (*Set, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &ParseError{File: name, Problem: "cannot read", Err: err}
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if !utf8.Valid(data) {
		return nil, &ParseError{File: name, Problem: "not UTF-8 text", Allowed: "a CSV file in UTF-8"}
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: name, Problem: "no header", Allowed: "a header line: id,time,utilization"}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	hline, _ := cr.FieldPos(0)
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		switch h {
		case "id", "time", "utilization":
		default:
			return nil, &ParseError{File: name, Line: hline, Column: i + 1, Value: header[i], Problem: "unknown column", Allowed: "the columns id, time, utilization"}
		}
		if j, dup := col[h]; dup {
			return nil, &ParseError{File: name, Line: hline, Column: i + 1, Field: h, Value: header[i], Problem: "duplicate column", Allowed: fmt.Sprintf("each column once (column %d is %s)", j+1, h)}
		}
		col[h] = i
	}
	for _, want := range []string{"id", "time", "utilization"} {
		if _, ok := col[want]; !ok {
			return nil, &ParseError{File: name, Line: hline, Field: want, Problem: "missing column", Allowed: "a header naming id, time and utilization"}
		}
	}
	s := &Set{File: name, byID: map[string][]Point{}}
	rows, firstLine := 0, 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			return nil, &ParseError{File: name, Line: line, Value: fmt.Sprint(len(rec)), Problem: "wrong number of fields", Allowed: fmt.Sprintf("%d, as in the header", len(header))}
		}
		if rows++; rows > maxRows {
			return nil, &ParseError{File: name, Line: line, Problem: "too many rows", Allowed: fmt.Sprintf("at most %d", maxRows)}
		}
		field := func(f string) (string, *ParseError) {
			i := col[f]
			return strings.TrimSpace(rec[i]), &ParseError{File: name, Line: line, Column: i + 1, Field: f, Value: rec[i]}
		}
		id, ie := field("id")
		if id == "" || len(id) > maxIDBytes || strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			ie.Allowed = fmt.Sprintf("a job or pod id (1..%d bytes, no control characters)", maxIDBytes)
			return nil, ie
		}
		p := Point{Line: line}
		tv, te := field("time")
		relative := false
		if secs, err := strconv.ParseInt(tv, 10, 64); err == nil {
			if secs < 0 || secs > maxOffsetSecs {
				te.Allowed = fmt.Sprintf("whole seconds from the job's first start, 0..%d", int64(maxOffsetSecs))
				return nil, te
			}
			relative, p.Offset = true, time.Duration(secs)*time.Second
		} else if t, err := time.Parse(time.RFC3339, tv); err == nil && t.Year() >= 1 && t.Year() <= 9999 {
			p.At = t
		} else {
			te.Allowed = `an RFC 3339 time ("2026-03-01T08:00:00Z") or whole seconds from the job's first start ("300")`
			return nil, te
		}
		if rows == 1 {
			s.Relative, firstLine = relative, line
		} else if relative != s.Relative {
			te.Problem = "mixed time forms"
			if s.Relative {
				te.Allowed = fmt.Sprintf("seconds from the job's first start, as on line %d", firstLine)
			} else {
				te.Allowed = fmt.Sprintf("an RFC 3339 time, as on line %d", firstLine)
			}
			return nil, te
		}
		pts := s.byID[id]
		if n := len(pts); n > 0 && p.before(pts[n-1]) {
			te.Problem = "time goes back"
			te.Allowed = fmt.Sprintf("a time at or after line %d's, the previous reading of %s", pts[n-1].Line, id)
			return nil, te
		}
		uv, ue := field("utilization")
		bp, ok := parseUtil(uv)
		if !ok {
			ue.Allowed = `a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`
			return nil, ue
		}
		p.BP = bp
		s.byID[id] = append(pts, p)
	}
	return s, nil
}

// before reports whether p is earlier than q.
func (p Point) before(q Point) bool {
	if p.At.IsZero() && q.At.IsZero() {
		return p.Offset < q.Offset
	}
	return p.At.Before(q.At)
}

// parseUtil reads a fraction 0..1 or a percentage 0%..100% into basis
// points, exactly (as a decimal, not a float), rounded half to even.
func parseUtil(v string) (int, bool) {
	pct := strings.HasSuffix(v, "%")
	num := strings.TrimSpace(strings.TrimSuffix(v, "%"))
	if num == "" || len(num) > 40 || strings.ContainsFunc(num, func(r rune) bool {
		return (r < '0' || r > '9') && r != '.' && r != 'e' && r != 'E' && r != '+' && r != '-'
	}) {
		return 0, false
	}
	if _, err := strconv.ParseFloat(num, 64); err != nil { // the decimal forms only
		return 0, false
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || r.Sign() < 0 {
		return 0, false
	}
	scale := int64(10000)
	if pct {
		scale = 100
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if r.Cmp(new(big.Rat).SetInt64(10000)) > 0 {
		return 0, false
	}
	// Half to even: floor, then look at what is left.
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	switch c := new(big.Int).Mul(m, big.NewInt(2)).Cmp(r.Denom()); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		q.Add(q, big.NewInt(1))
	}
	return int(q.Int64()), true
}

// csvError turns an encoding/csv error into a ParseError at its place.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: name, Line: pe.Line, Problem: fmt.Sprintf("malformed CSV at character %d", pe.Column), Allowed: "RFC 4180 CSV", Err: pe.Err}
	}
	return &ParseError{File: name, Problem: "cannot read", Err: err}
}

// IDs returns the ids that have readings, sorted.
func (s *Set) IDs() []string {
	ids := make([]string, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Points returns id's readings in time order (nil when it has none).
func (s *Set) Points(id string) []Point { return s.byID[id] }

// Has reports whether id has readings.
func (s *Set) Has(id string) bool { return len(s.byID[id]) > 0 }

// at is p's time, given the time relative readings count from.
func (p Point) at(origin time.Time) time.Time {
	if p.At.IsZero() {
		return origin.Add(p.Offset)
	}
	return p.At
}

// At returns id's utilization at t in basis points: the latest reading at
// or before t, or the first reading before any; origin is the job's first
// start, which relative times count from. ok is false when id has no
// readings.
func (s *Set) At(id string, origin, t time.Time) (bp int, ok bool) {
	pts := s.byID[id]
	if len(pts) == 0 {
		return 0, false
	}
	i, _ := slices.BinarySearchFunc(pts, t, func(p Point, t time.Time) int {
		if p.at(origin).After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return pts[0].BP, true
	}
	return pts[i-1].BP, true
}

// Busy returns the busy part of [from, to) for id, in basis-point
// milliseconds (the time integral of its utilization: divided by 10000
// it is busy milliseconds): each reading holds until the next, the first
// also before it and the last after it. origin is the job's first start.
// ok is false when id has no readings.
func (s *Set) Busy(id string, origin, from, to time.Time) (bpms int64, ok bool) {
	pts := s.byID[id]
	if len(pts) == 0 {
		return 0, false
	}
	if !to.After(from) {
		return 0, true
	}
	for i, p := range pts {
		start, end := p.at(origin), to
		if i == 0 {
			start = from
		}
		if i+1 < len(pts) {
			end = pts[i+1].at(origin)
		}
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		if end.After(start) {
			bpms += int64(p.BP) * end.Sub(start).Milliseconds()
		}
	}
	return bpms, true
}
