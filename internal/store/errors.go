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

// RowError is a clash with a stored row, or a missing one, said in words
// a user may read: Field names the input whose Value clashed or was
// missing (id, team, user, idempotency_key), Msg the whole sentence
// (team "ml" already exists). It wraps Kind, ErrConflict or ErrNotFound.
// Its text never holds a database's own message: the API shows it as it
// is, and answers a bare ErrConflict or ErrNotFound from a driver with a
// message of its own.
type RowError struct {
	Kind         error
	Field, Value string
	Msg          string
}

func (e *RowError) Error() string { return e.Msg }

// Unwrap returns Kind.
func (e *RowError) Unwrap() error { return e.Kind }

// Conflict returns an error wrapping ErrConflict with a lowercase detail.
func Conflict(format string, args ...any) error {
	return &RowError{Kind: ErrConflict, Msg: fmt.Sprintf(format, args...)}
}

// Exists is the conflict of creating a row whose id (in field) is taken:
// Exists("id", "team", "ml") says team "ml" already exists.
func Exists(field, what, id string) error {
	return &RowError{Kind: ErrConflict, Field: field, Value: id, Msg: fmt.Sprintf("%s %q already exists", what, id)}
}

// NotFound returns an error wrapping ErrNotFound that names what was
// missing, e.g. NotFound("job", "j1"): job "j1" does not exist.
func NotFound(what, id string) error {
	return &RowError{Kind: ErrNotFound, Value: id, Msg: fmt.Sprintf("%s %q does not exist", what, id)}
}

// Missing is NotFound for a row that input field refers to:
// Missing("team", "team", "zz") for a job of an unknown team.
func Missing(field, what, id string) error {
	return &RowError{Kind: ErrNotFound, Field: field, Value: id, Msg: fmt.Sprintf("%s %q does not exist", what, id)}
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
