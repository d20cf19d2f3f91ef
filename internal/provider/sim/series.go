package sim

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Availability is a spot availability series: from each step's time on,
// its offer (or every offer, for "*") is available or not. Before the
// first step that covers it an offer is available.
type Availability struct {
	// File names where the series came from, for error messages.
	File string
	// Steps are in time order; at one time, later steps win.
	Steps []Step
}

// Step is one row of an availability series.
type Step struct {
	// At is the step's time when the series is written in RFC 3339.
	At time.Time
	// Offset is the step's time from Config.SeriesStart when the series
	// is written in seconds from start; Relative says which of the two
	// is meant.
	Offset   time.Duration
	Relative bool
	// Offer is an offer ID, or "*" for every offer.
	Offer     string
	Available bool
	// Limit, when Available, is the most spot machines of the offer that
	// may be alive at once (a spot trace's count of instances
	// obtainable); 0: no limit.
	Limit int
	// Line is the step's line in File (0 when not from a file).
	Line int
}

// AllOffers is the Offer of a step that applies to every offer.
const AllOffers = "*"

// SeriesError is an error in an availability series; see
// core.ParseError.
type SeriesError = core.ParseError

// Limits that keep a malformed or hostile series from exhausting memory or
// overflowing time arithmetic.
const (
	maxSeriesRows   = 10_000_000
	maxOfferIDBytes = 200
	maxOffsetSecs   = 100 * 366 * 24 * 3600 // a century
)

// ParseAvailability reads an availability series in CSV: a header naming
// the columns time, offer and available (in any order), then one row per
// time step. time is RFC 3339 ("2026-03-01T08:00:00Z") or whole seconds
// from start ("3600"), one form for the whole file, never going back;
// offer is an offer ID or "*"; available is 1 or 0. Blank lines and lines
// starting with # are skipped. name is the file's name, for errors, which
// are *SeriesError.
func ParseAvailability(name string, r io.Reader) (*Availability, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &SeriesError{File: name, Problem: "cannot read", Err: err}
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if !utf8.Valid(data) {
		return nil, &SeriesError{File: name, Problem: "not UTF-8 text", Allowed: "a CSV file in UTF-8"}
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true

	header, err := cr.Read()
	if err == io.EOF {
		return nil, &SeriesError{File: name, Problem: "no header", Allowed: "a header line: time,offer,available"}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	hline, _ := cr.FieldPos(0)
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		switch h {
		case "time", "offer", "available":
		default:
			return nil, &SeriesError{File: name, Line: hline, Column: i + 1, Value: header[i], Problem: "unknown column", Allowed: "the columns time, offer, available"}
		}
		if j, dup := col[h]; dup {
			return nil, &SeriesError{File: name, Line: hline, Column: i + 1, Field: h, Value: header[i], Problem: "duplicate column", Allowed: fmt.Sprintf("each column once (column %d is %s)", j+1, h)}
		}
		col[h] = i
	}
	for _, want := range []string{"time", "offer", "available"} {
		if _, ok := col[want]; !ok {
			return nil, &SeriesError{File: name, Line: hline, Field: want, Problem: "missing column", Allowed: "a header naming time, offer and available"}
		}
	}

	a := &Availability{File: name}
	var prevAt time.Time
	var prevOff time.Duration
	prevLine := 0
	relative := false
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
			return nil, &SeriesError{File: name, Line: line, Value: fmt.Sprint(len(rec)), Problem: "wrong number of fields", Allowed: fmt.Sprintf("%d, as in the header", len(header))}
		}
		if len(a.Steps) >= maxSeriesRows {
			return nil, &SeriesError{File: name, Line: line, Problem: "too many rows", Allowed: fmt.Sprintf("at most %d", maxSeriesRows)}
		}
		field := func(f string) (string, *SeriesError) {
			i := col[f]
			return strings.TrimSpace(rec[i]), &SeriesError{File: name, Line: line, Column: i + 1, Field: f, Value: rec[i]}
		}
		st := Step{Line: line}

		tv, te := field("time")
		if secs, err := strconv.ParseInt(tv, 10, 64); err == nil {
			if secs < 0 || secs > maxOffsetSecs {
				te.Allowed = fmt.Sprintf("whole seconds from start, 0..%d", int64(maxOffsetSecs))
				return nil, te
			}
			st.Relative, st.Offset = true, time.Duration(secs)*time.Second
		} else if t, err := time.Parse(time.RFC3339, tv); err == nil {
			st.At = t
		} else {
			te.Allowed = `an RFC 3339 time ("2026-03-01T08:00:00Z") or whole seconds from start ("3600")`
			return nil, te
		}
		if len(a.Steps) == 0 {
			relative = st.Relative
		} else if st.Relative != relative {
			te.Problem = "mixed time forms"
			if relative {
				te.Allowed = fmt.Sprintf("seconds from start, as on line %d", a.Steps[0].Line)
			} else {
				te.Allowed = fmt.Sprintf("an RFC 3339 time, as on line %d", a.Steps[0].Line)
			}
			return nil, te
		}
		if len(a.Steps) > 0 && (relative && st.Offset < prevOff || !relative && st.At.Before(prevAt)) {
			te.Problem = "time goes back"
			te.Allowed = fmt.Sprintf("a time at or after line %d's", prevLine)
			return nil, te
		}
		prevAt, prevOff, prevLine = st.At, st.Offset, line

		ov, oe := field("offer")
		if ov == "" || len(ov) > maxOfferIDBytes || strings.ContainsFunc(ov, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			oe.Allowed = fmt.Sprintf("an offer id (at most %d bytes, no control characters) or *", maxOfferIDBytes)
			return nil, oe
		}
		st.Offer = ov

		av, ae := field("available")
		switch av {
		case "1":
			st.Available = true
		case "0":
		default:
			ae.Allowed = "1 (available) or 0 (withdrawn)"
			return nil, ae
		}
		a.Steps = append(a.Steps, st)
	}
	return a, nil
}

// csvError turns an encoding/csv error into a SeriesError at its place.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		// pe.Column counts characters, not fields: say so in the problem.
		return &SeriesError{File: name, Line: pe.Line, Problem: fmt.Sprintf("malformed CSV at character %d", pe.Column), Allowed: "RFC 4180 CSV", Err: pe.Err}
	}
	return &SeriesError{File: name, Problem: "cannot read", Err: err}
}

// at returns the step's absolute time given the series start.
func (s Step) at(start time.Time) time.Time {
	if s.Relative {
		return start.Add(s.Offset)
	}
	return s.At
}
