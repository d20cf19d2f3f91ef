package pricing

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// csvTable reads a CSV file with a header row, giving cells by column name
// and errors that name the file, line, column and value.
type csvTable struct {
	file   string
	r      *csv.Reader
	header []string
	index  map[string]int
}

// csvRow is one record of a csvTable.
type csvRow struct {
	t    *csvTable
	rec  []string
	line int
}

// newCSVTable reads the header. Columns are matched by name, ignoring case
// and surrounding space; every name in required must be there. When known
// is non-nil, a column not in it is an error (hint, if set, may explain).
func newCSVTable(file string, r io.Reader, known, required []string, hint func(header []string) string) (*csvTable, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	t := &csvTable{file: file, r: cr, index: map[string]int{}}
	rec, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &ParseError{File: file, Problem: "empty file", Allowed: "a header row naming the columns, such as " + strings.Join(required, ",")}
	}
	if err != nil {
		return nil, t.syntax(err)
	}
	line, _ := cr.FieldPos(0)
	for i, name := range rec {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff") // a spreadsheet's byte-order mark
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if known != nil && !slices.Contains(known, name) {
			allowed := "one of " + strings.Join(known, ", ")
			h := ""
			if hint != nil {
				h = hint(rec)
			}
			if near := nearest(name, known, 1); h == "" && len(near) > 0 {
				h = " (did you mean " + near[0] + "?)"
			}
			allowed += h
			return nil, &ParseError{File: file, Line: line, Column: i + 1, Problem: "unknown column", Value: name, Allowed: allowed}
		}
		if j, dup := t.index[name]; dup {
			return nil, &ParseError{File: file, Line: line, Column: i + 1, Problem: "duplicate column", Value: name, Allowed: fmt.Sprintf("each column once (also column %d)", j+1)}
		}
		t.index[name] = i
		t.header = append(t.header, name)
	}
	var missing []string
	for _, name := range required {
		if _, ok := t.index[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, &ParseError{File: file, Line: line, Field: "header", Problem: "missing columns", Value: strings.Join(missing, ","), Allowed: "a header with at least " + strings.Join(required, ", ")}
	}
	return t, nil
}

func (t *csvTable) syntax(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: t.file, Line: pe.Line, Problem: "CSV syntax error: " + pe.Err.Error(), Err: err}
	}
	return &ParseError{File: t.file, Problem: "CSV read error: " + err.Error(), Err: err}
}

// next returns the next row, or nil at the end.
func (t *csvTable) next() (*csvRow, error) {
	rec, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, t.syntax(err)
	}
	line, _ := t.r.FieldPos(0)
	if len(rec) != len(t.header) {
		return nil, &ParseError{File: t.file, Line: line, Problem: fmt.Sprintf("a row of %d fields", len(rec)), Value: truncate(strings.Join(rec, ","), 80),
			Allowed: fmt.Sprintf("%d fields, one per header column", len(t.header))}
	}
	return &csvRow{t: t, rec: rec, line: line}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// get returns the trimmed cell of column col ("" if the table lacks it).
func (r *csvRow) get(col string) string {
	i, ok := r.t.index[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(r.rec[i])
}

// bad is the error for column col's cell.
func (r *csvRow) bad(col, allowed string, err error) error {
	pe := &ParseError{File: r.t.file, Line: r.line, Field: col, Value: r.get(col), Allowed: allowed, Err: err}
	if i, ok := r.t.index[col]; ok {
		pe.Column = i + 1
		pe.Line, _ = r.t.r.FieldPos(i)
	}
	return pe
}

// csvPlace is where an offer came from: its row, and the column of each of
// its plans, to locate Validate's errors.
type csvPlace struct {
	row      *csvRow
	planCols []string
}

// csvColumns maps the fields Validate names (relative to an offer, or to
// a plan for the keys starting with "plan.") to CSV columns; "alt.<col>"
// names the column to blame when the table lacks col.
type csvColumns map[string]string

// locateCSV turns a Validate error on offers[i] into a ParseError at the
// row and column it came from, with the cell as written.
func locateCSV(file string, err error, places []csvPlace, cols csvColumns) error {
	var fe *core.FieldError
	if !errors.As(err, &fe) {
		return fmt.Errorf("%s: %w", file, err)
	}
	var i, j int
	if n, _ := fmt.Sscanf(fe.Field, "offers[%d]", &i); n != 1 || i < 0 || i >= len(places) {
		return &ParseError{File: file, Field: fe.Field, Value: fe.Value, Allowed: fe.Allowed, Err: err}
	}
	p := places[i]
	rest := strings.TrimPrefix(strings.TrimPrefix(fe.Field, fmt.Sprintf("offers[%d]", i)), ".")
	col := cols[rest]
	if n, _ := fmt.Sscanf(rest, "plans[%d]", &j); n == 1 && j >= 0 && j < len(p.planCols) {
		sub := strings.TrimPrefix(rest, fmt.Sprintf("plans[%d]", j))
		sub = strings.TrimPrefix(sub, ".")
		if col = cols["plan."+sub]; col == "" {
			col = p.planCols[j]
		}
	}
	if alt, ok := cols["alt."+col]; ok {
		if _, ok := p.row.t.index[col]; !ok {
			col = alt
		}
	}
	if _, ok := p.row.t.index[col]; !ok {
		return &ParseError{File: file, Line: p.row.line, Field: rest, Value: fe.Value, Allowed: fe.Allowed, Err: err}
	}
	allowed := fe.Allowed
	var k int
	if n, _ := fmt.Sscanf(allowed, "a unique id (offers[%d] has it)", &k); n == 1 && k >= 0 && k < len(places) {
		allowed = fmt.Sprintf("a unique id (%s is also the id on line %d)", fe.Value, places[k].row.line)
	}
	pe := p.row.bad(col, allowed, err).(*ParseError)
	if pe.Value == "" {
		pe.Value = fe.Value
	}
	return pe
}
