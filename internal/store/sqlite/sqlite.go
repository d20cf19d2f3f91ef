package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune Open; the zero value is the default.
type Options struct {
	// BusyTimeout is how long a connection waits for a lock held by
	// another process before failing (default 10 s).
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool (default: GOMAXPROCS, at
	// least 4).
	ReadConns int
	// Durable sets synchronous=FULL: every commit is on disk before it
	// returns, surviving power loss, at a cost in write throughput.
	Durable bool
}

// Store is a store.Store on one SQLite file.
type Store struct {
	*sqlstore.Store
	path string
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Leader = (*Store)(nil)
)

// Open opens (creating if needed) the database file at path and brings
// its schema up to date.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open sqlite: path %q: want a file path without '?' or '#' (tests use a file in a temporary directory)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = max(runtime.GOMAXPROCS(0), 4)
	}
	sync := "NORMAL"
	if opts.Durable {
		sync = "FULL"
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(%s)", opts.BusyTimeout.Milliseconds(), sync)
	// The writer: one connection; BEGIN IMMEDIATE takes the write lock at
	// the start, so a transaction never fails upgrading a read lock.
	wdb, err := sql.Open("sqlite", abs+"?"+common+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := wdb.PingContext(ctx); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	rdb, err := sql.Open("sqlite", abs+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: readers: %w", abs, err)
	}
	rdb.SetMaxOpenConns(opts.ReadConns)
	rdb.SetMaxIdleConns(opts.ReadConns)
	b := &backend{w: wdb, r: rdb}
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	if err := sqlstore.Migrate(ctx, b, ms, "", "INTEGER"); err != nil {
		b.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	return &Store{Store: sqlstore.New(b), path: abs}, nil
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

// backend implements sqlstore.Backend over database/sql.
type backend struct {
	w, r *sql.DB
	once sync.Once
	err  error
}

func (b *backend) Reader() sqlstore.Querier { return querier{b.r} }
func (b *backend) Writer() sqlstore.Querier { return querier{b.w} }

func (b *backend) Begin(ctx context.Context, _ bool) (sqlstore.Txn, error) {
	tx, err := b.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, b.Classify(err)
	}
	return txn{querier{tx}, tx}, nil
}

// Retryable is false: with one writer and BEGIN IMMEDIATE, a transaction
// never fails on a conflict with another.
func (b *backend) Retryable(error) bool { return false }

func (b *backend) Classify(err error) error {
	var se *sqlite3.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() {
	case sqlite3lib.SQLITE_CONSTRAINT_UNIQUE, sqlite3lib.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case sqlite3lib.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("%w: a referenced row does not exist: %w", store.ErrNotFound, err)
	}
	return err
}

func (b *backend) Time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func (b *backend) Close() error {
	b.once.Do(func() {
		// Fold the WAL back into the main file so that the file alone is
		// the database; best effort.
		_, _ = b.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		b.err = errors.Join(b.r.Close(), b.w.Close())
	})
	return b.err
}

// execer is what *sql.DB and *sql.Tx share.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type querier struct{ e execer }

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.e.ExecContext(ctx, rebind(query), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.e.QueryContext(ctx, rebind(query), args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return sqlRow{q.e.QueryRowContext(ctx, rebind(query), args...)}
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

type sqlRow struct{ *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	if err := r.Row.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return sqlstore.ErrNoRows
		}
		return err
	}
	return nil
}

type txn struct {
	querier
	tx *sql.Tx
}

func (t txn) Commit(context.Context) error { return t.tx.Commit() }
func (t txn) Rollback(context.Context) error {
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

var (
	placeholder = regexp.MustCompile(`\$(\d+)`)
	rebound     sync.Map // query → rewritten query
)

// rebind rewrites PostgreSQL placeholders ($1) to SQLite's numbered ones
// (?1), which bind the same argument wherever they repeat. Short queries
// (all but bulk inserts, whose text varies with their size) are cached.
func rebind(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	out := placeholder.ReplaceAllString(q, "?$1")
	if len(q) < 2048 {
		rebound.Store(q, out)
	}
	return out
}
