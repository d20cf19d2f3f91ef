package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	path      string
	tightened []string
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
	tightened, err := ownerOnly(abs)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
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
	// The writer: one connection, held (see backend).
	wdb, err := sql.Open("sqlite", abs+"?"+common+"&_pragma=journal_mode(WAL)")
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
	b, err := newBackend(ctx, wdb, rdb)
	if err != nil {
		rdb.Close()
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: writer: %w", abs, err)
	}
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	if err := sqlstore.Migrate(ctx, b, ms, nil, "INTEGER"); err != nil {
		b.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
	}
	return &Store{Store: sqlstore.New(b), path: abs, tightened: tightened}, nil
}

// ownerOnly makes the database file and its -wal and -shm files readable
// and writable by their owner only: they hold token hashes, job commands
// and the audit trail. A new database file is created 0600 before SQLite
// opens it (SQLite would create it 0644, less the umask), and SQLite
// gives the -wal and -shm files it creates the database file's mode. An
// existing file with group or other bits has them taken away; its path is
// returned for the caller to report.
func ownerOnly(db string) ([]string, error) {
	f, err := os.OpenFile(db, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrExist):
		return nil, err
	}
	if runtime.GOOS == "windows" {
		return nil, nil // no group or other bits to take away
	}
	var tightened []string
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m := st.Mode().Perm(); m&0o077 != 0 {
			if err := os.Chmod(p, m&^0o077); err != nil {
				return nil, fmt.Errorf("make %s owner-only: %w", p, err)
			}
			tightened = append(tightened, fmt.Sprintf("%s (was %#o)", p, m))
		}
	}
	return tightened, nil
}

// Tightened lists the files Open found readable or writable by group or
// others and made owner-only, each with its former mode.
func (s *Store) Tightened() []string { return s.tightened }

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

var errClosed = errors.New("sqlite: store is closed")

// backend implements sqlstore.Backend over database/sql: one writer
// connection held for the store's life, taken in turn (a one-slot
// semaphore that a waiting caller can give up on with its context), and a
// pool of readers. Statements are prepared once and kept: parsing SQL is
// most of the cost of a small write.
type backend struct {
	w, r *sql.DB
	// turn is the writer's semaphore; who holds it owns wconn and wstmts.
	turn   chan struct{}
	wconn  *sql.Conn
	wstmts map[string]*sql.Stmt
	rstmts sync.Map // query → *sql.Stmt on the read pool
	closed chan struct{}
	once   sync.Once
	err    error
}

func newBackend(ctx context.Context, w, r *sql.DB) (*backend, error) {
	conn, err := w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &backend{w: w, r: r, turn: make(chan struct{}, 1), wconn: conn, wstmts: map[string]*sql.Stmt{}, closed: make(chan struct{})}, nil
}

func (b *backend) Reader() sqlstore.Querier { return reader{b} }

// Begin waits for the writer's turn and starts a transaction with BEGIN
// IMMEDIATE: it takes the file's write lock at once (waiting up to the
// busy timeout for another process), so that no statement in it can fail
// for a lock later.
func (b *backend) Begin(ctx context.Context, _ bool) (sqlstore.Txn, error) {
	select {
	case b.turn <- struct{}{}:
	case <-b.closed:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-b.closed:
		<-b.turn
		return nil, errClosed
	default:
	}
	t := &txn{b: b}
	if _, err := b.wconn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		// A context that ends as BEGIN runs can report an error for a
		// BEGIN that took effect: end whatever began, so that the next
		// writer does not find the connection inside a transaction.
		_, _ = b.wconn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		<-b.turn
		return nil, b.Classify(err)
	}
	return t, nil
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
		close(b.closed)
		b.turn <- struct{}{} // wait for the writer to be free, and keep it
		for _, st := range b.wstmts {
			_ = st.Close()
		}
		b.rstmts.Range(func(_, v any) bool { _ = v.(*sql.Stmt).Close(); return true })
		// Fold the WAL back into the main file so that the file alone is
		// the database; best effort.
		_, _ = b.wconn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
		b.err = errors.Join(b.wconn.Close(), b.r.Close(), b.w.Close())
	})
	return b.err
}

// cacheable reports whether a query's statement is worth keeping: bulk
// inserts, whose text varies with their size, are not.
func cacheable(q string) bool { return len(q) < 2048 }

// reader runs queries on the read pool.
type reader struct{ b *backend }

func (r reader) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if v, ok := r.b.rstmts.Load(q); ok {
		return v.(*sql.Stmt), nil
	}
	st, err := r.b.r.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if v, loaded := r.b.rstmts.LoadOrStore(q, st); loaded {
		_ = st.Close()
		return v.(*sql.Stmt), nil
	}
	return st, nil
}

func (r reader) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return 0, fmt.Errorf("sqlite: write outside a transaction: %s", query)
}

func (r reader) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	q := rebind(query)
	if !cacheable(q) {
		rows, err := r.b.r.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return sqlRows{rows}, nil
	}
	st, err := r.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (r reader) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	q := rebind(query)
	if !cacheable(q) {
		return sqlRow{r.b.r.QueryRowContext(ctx, q, args...)}
	}
	st, err := r.stmt(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return sqlRow{st.QueryRowContext(ctx, args...)}
}

// txn is a transaction on the writer connection; it holds the writer's
// turn until it ends.
type txn struct {
	b    *backend
	done bool
}

func (t *txn) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := t.b.wstmts[q]; ok {
		return st, nil
	}
	st, err := t.b.wconn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	t.b.wstmts[q] = st
	return st, nil
}

func (t *txn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if q := rebind(query); !cacheable(q) || len(args) == 0 {
		res, err = t.b.wconn.ExecContext(ctx, q, args...)
	} else {
		var st *sql.Stmt
		if st, err = t.stmt(ctx, q); err == nil {
			res, err = st.ExecContext(ctx, args...)
		}
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *txn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	q := rebind(query)
	var rows *sql.Rows
	var err error
	if !cacheable(q) {
		rows, err = t.b.wconn.QueryContext(ctx, q, args...)
	} else {
		var st *sql.Stmt
		if st, err = t.stmt(ctx, q); err == nil {
			rows, err = st.QueryContext(ctx, args...)
		}
	}
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (t *txn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	q := rebind(query)
	if !cacheable(q) {
		return sqlRow{t.b.wconn.QueryRowContext(ctx, q, args...)}
	}
	st, err := t.stmt(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return sqlRow{st.QueryRowContext(ctx, args...)}
}

func (t *txn) end(ctx context.Context, sql string) error {
	if t.done {
		return nil
	}
	t.done = true
	defer func() { <-t.b.turn }()
	_, err := t.b.wconn.ExecContext(ctx, sql)
	if err != nil && sql == "COMMIT" {
		// A failed COMMIT leaves the transaction open: end it, so that
		// the next writer starts clean.
		_, _ = t.b.wconn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

// Commit is not cancelled by ctx: the work is done and the write lock
// held, and a COMMIT interrupted by a context would leave the caller not
// knowing whether it took effect.
func (t *txn) Commit(ctx context.Context) error { return t.end(context.WithoutCancel(ctx), "COMMIT") }
func (t *txn) Rollback(ctx context.Context) error {
	return t.end(context.WithoutCancel(ctx), "ROLLBACK")
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

// errRow is a row whose query could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

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
