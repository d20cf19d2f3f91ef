package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrNoRows is what Row.Scan returns when a query found nothing, whatever
// the driver.
var ErrNoRows = errors.New("sqlstore: no rows")

// Querier runs statements, on a connection pool or in a transaction.
type Querier interface {
	// Exec runs a statement and returns the number of rows it changed.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Stmt is one statement of a batch.
type Stmt struct {
	SQL  string
	Args []any
}

// Batcher is a Querier that sends many statements at a time (PostgreSQL's
// pipeline: one round trip for many rows changed). Without it, the
// statements of a batch run one by one, which costs nothing more where
// the database is in the process (SQLite).
type Batcher interface {
	// ExecBatch runs stmts in order and returns the rows each changed;
	// on an error, failed is the index of the statement that failed.
	ExecBatch(ctx context.Context, stmts []Stmt) (n []int64, failed int, err error)
	// QueryRowBatch runs stmts in order and scans the one row each
	// returns with scan(i, row); on an error, failed is as for ExecBatch.
	QueryRowBatch(ctx context.Context, stmts []Stmt, scan func(i int, r Row) error) (failed int, err error)
}

// execBatch runs stmts on q as ExecBatch does, batched when q can.
func execBatch(ctx context.Context, q Querier, stmts []Stmt) ([]int64, int, error) {
	if b, ok := q.(Batcher); ok {
		return b.ExecBatch(ctx, stmts)
	}
	n := make([]int64, len(stmts))
	for i, s := range stmts {
		var err error
		if n[i], err = q.Exec(ctx, s.SQL, s.Args...); err != nil {
			return nil, i, err
		}
	}
	return n, 0, nil
}

// queryRowBatch runs stmts on q as QueryRowBatch does, batched when q
// can.
func queryRowBatch(ctx context.Context, q Querier, stmts []Stmt, scan func(i int, r Row) error) (int, error) {
	if b, ok := q.(Batcher); ok {
		return b.QueryRowBatch(ctx, stmts, scan)
	}
	for i, s := range stmts {
		if err := scan(i, q.QueryRow(ctx, s.SQL, s.Args...)); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// Rows is the result of Query.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is the result of QueryRow; Scan returns ErrNoRows when there was
// none.
type Row interface {
	Scan(dest ...any) error
}

// Txn is an open transaction.
type Txn interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Backend is what a database gives sqlstore.
type Backend interface {
	// Reader runs reads outside transactions; every write is in one.
	Reader() Querier
	// Begin opens a transaction for writing; serializable asks for
	// serializable isolation (SQLite always is).
	Begin(ctx context.Context, serializable bool) (Txn, error)
	// Retryable reports whether err (from a transaction) is a
	// serialization failure or deadlock after which the transaction may
	// simply be run again.
	Retryable(err error) bool
	// Classify wraps a driver error with store.ErrConflict (unique
	// violation) or store.ErrNotFound (foreign key violation), keeping
	// the driver's error in the chain; other errors pass unchanged.
	Classify(err error) error
	// Time converts a time into a query argument: NULL for the zero time,
	// else the backend's representation of t in UTC at microseconds.
	Time(t time.Time) any
	Close() error
}

// timeScan scans a nullable time column: NULL is the zero time, an
// integer is unix microseconds (SQLite), a time.Time is taken as it is
// (PostgreSQL); the result is in UTC.
type timeScan struct{ p *time.Time }

func (s timeScan) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.p = time.Time{}
	case int64:
		*s.p = time.UnixMicro(v).UTC()
	case time.Time:
		*s.p = v.UTC()
	default:
		return fmt.Errorf("scan time: unexpected %T", src)
	}
	return nil
}

// T returns a scanner for a nullable time column into p.
func T(p *time.Time) any { return timeScan{p} }

// strScan scans a nullable text column: NULL is "".
type strScan struct{ p *string }

func (s strScan) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.p = ""
	case string:
		*s.p = v
	case []byte:
		*s.p = string(v)
	default:
		return fmt.Errorf("scan text: unexpected %T", src)
	}
	return nil
}

// S returns a scanner for a nullable text column into p.
func S(p *string) any { return strScan{p} }

// nullStr is NULL for "", else s: for optional references, which a
// foreign key checks only when set.
func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// args builds a statement's arguments and their placeholders.
type args struct{ vals []any }

// p adds v and returns its placeholder.
func (a *args) p(v any) string {
	a.vals = append(a.vals, v)
	return "$" + strconv.Itoa(len(a.vals))
}

// list adds vs and returns "($i, $j, ...)".
func (a *args) list(vs ...any) string {
	ps := make([]string, len(vs))
	for i, v := range vs {
		ps[i] = a.p(v)
	}
	return "(" + strings.Join(ps, ", ") + ")"
}

// where collects AND-ed conditions.
type where struct {
	args
	conds []string
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}
