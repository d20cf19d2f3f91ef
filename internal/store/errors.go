package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ErrNotFound is wrapped by every error that reports a missing row, or a
// row that refers to a missing one (a job for an unknown team).
var ErrNotFound = errors.New("store: not found")

// ErrConflict is wrapped by every error that reports a clash with what is
// stored: a duplicate id or client token, an idempotency key reused with a
// different body, a change to a row in a final state.
var ErrConflict = errors.New("store: conflict")

// Conflict returns an error wrapping ErrConflict with a lowercase detail.
func Conflict(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConflict, fmt.Sprintf(format, args...))
}

// NotFound returns an error wrapping ErrNotFound that names what was
// missing, e.g. NotFound("job", "j1").
func NotFound(what, id string) error {
	return fmt.Errorf("%s %q: %w", what, id, ErrNotFound)
}

// MaxIDLen is the longest id the store accepts, in bytes.
const MaxIDLen = 256

// MaxTextLen is the longest free text (names, reasons, attributes) the
// store accepts, in bytes.
const MaxTextLen = 64 << 10

// CheckID validates an id: non-empty, at most MaxIDLen bytes, valid text.
func CheckID(field, v string) error {
	if v == "" {
		return &core.FieldError{Field: field, Value: v, Allowed: "a non-empty id"}
	}
	if len(v) > MaxIDLen {
		return &core.FieldError{Field: field, Value: abbrev(v), Allowed: fmt.Sprintf("at most %d bytes", MaxIDLen)}
	}
	return CheckText(field, v)
}

// CheckText validates free text: valid UTF-8, no NUL byte, at most
// MaxTextLen bytes.
func CheckText(field, v string) error {
	if len(v) > MaxTextLen {
		return &core.FieldError{Field: field, Value: abbrev(v), Allowed: fmt.Sprintf("at most %d bytes", MaxTextLen)}
	}
	if !utf8.ValidString(v) {
		return &core.FieldError{Field: field, Value: abbrev(strings.ToValidUTF8(v, "\uFFFD")), Allowed: "valid UTF-8 text"}
	}
	if strings.IndexByte(v, 0) >= 0 {
		return &core.FieldError{Field: field, Value: abbrev(strings.ReplaceAll(v, "\x00", `\0`)), Allowed: "text without NUL bytes"}
	}
	return nil
}

// CheckOptionalID validates an id that may be empty.
func CheckOptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	return CheckID(field, v)
}

func abbrev(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}

func checkNonNeg(field string, v int64) error {
	if v < 0 {
		return &core.FieldError{Field: field, Value: fmt.Sprint(v), Allowed: ">= 0"}
	}
	return nil
}
