package core

import (
	"fmt"
	"strings"
)

// FieldError says which field had which value and what is allowed. Every
// validation error in gpufleet is one, possibly wrapped with a location.
type FieldError struct {
	Field   string
	Value   string
	Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: invalid value %q: want %s", e.Field, e.Value, e.Allowed)
}

// ParseError is an error in an input file — a catalog, a trace, a
// profile, a series: where it is (File, Line and, for CSV, Column), which
// field (a path such as offers[3].plans[1].price, or a CSV column name),
// the value found and what is allowed. It prints as
//
//	catalog.yaml:17: offers[3].plans[1].price: invalid value "-2": want a price >= 0
type ParseError struct {
	File string
	// Line is 1-based; 0 when the error is about the whole file.
	Line int
	// Column is the 1-based CSV column number; 0 for YAML.
	Column int
	// Field is the field path (YAML) or the column name (CSV).
	Field string
	// Value is the text found, as written.
	Value string
	// Problem says what is wrong; empty means "invalid value".
	Problem string
	// Allowed says what is allowed instead.
	Allowed string
	// Err is the underlying error, if any.
	Err error
}

// Error formats e as "file:line: field: problem "value": want allowed".
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	switch {
	case e.Column > 0 && e.Field != "":
		fmt.Fprintf(&b, "column %d (%s): ", e.Column, e.Field)
	case e.Column > 0:
		fmt.Fprintf(&b, "column %d: ", e.Column)
	case e.Field != "":
		b.WriteString(e.Field + ": ")
	}
	problem := e.Problem
	if problem == "" {
		problem = "invalid value"
	}
	b.WriteString(problem)
	if e.Value != "" || e.Problem == "" {
		fmt.Fprintf(&b, " %q", e.Value)
	}
	if e.Allowed != "" {
		b.WriteString(": want " + e.Allowed)
	}
	if e.Err != nil && !strings.Contains(b.String(), e.Err.Error()) {
		b.WriteString(" (" + e.Err.Error() + ")")
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }
