package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key that keeps migrators apart
// ("gpufleet" in ASCII).
const migrationLock = 0x677075666c656574

// Options tune Open; the zero value is the default.
type Options struct {
	// Schema is the schema to keep the tables in (created if missing);
	// empty uses the DSN's search_path, by default "public".
	Schema string
	// MaxConns is the pool size (default: 4 × GOMAXPROCS, at least 8).
	MaxConns int32
	// Log, when set, is told when the connection that carries other
	// replicas' token writes breaks (the token cache is off meanwhile).
	Log func(msg string)
}

// groupLanes is how many batches of grouped operations run at once. One:
// a batch's submissions cost a round trip together (bulk writes), so a
// second lane only halves the batches and doubles the commits; and every
// batch of a team's submissions locks its row, so lanes would wait on
// each other there anyway. docs/server.md has the figures.
const groupLanes = 1

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	*sqlstore.Store
	pool *pgxpool.Pool
	// schema is Options.Schema: leadership is per schema (see TryLeader).
	schema string

	// stopWatch ends watchTokens; watching is done when it has.
	stopWatch context.CancelFunc
	watching  chan struct{}
	// logf reports what the token watcher's connection does (Options.Log).
	logf func(string)

	mu sync.Mutex
	// leaders are the releases of leadership locks held, by their number:
	// Close gives them up, since the pool cannot close while their
	// connections are out.
	leaders map[int]func()
	next    int
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Leader = (*Store)(nil)
)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string) and brings its schema up to date.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if opts.Schema != "" {
		if !schemaName.MatchString(opts.Schema) {
			return nil, fmt.Errorf("open postgres: %w", &core.FieldError{Field: "schema", Value: opts.Schema, Allowed: "a lowercase identifier: letters, digits and _, at most 63"})
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.MaxConns = opts.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = int32(max(4*runtime.GOMAXPROCS(0), 8))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s@%s:%d/%s: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	b := &backend{pool: pool}
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// Under the lock, so that replicas starting together neither race to
	// create the schema nor migrate twice.
	prelude := []string{fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", int64(migrationLock))}
	if opts.Schema != "" {
		// The name matched schemaName: a plain identifier.
		prelude = append(prelude, "CREATE SCHEMA IF NOT EXISTS "+opts.Schema)
	}
	if err := sqlstore.Migrate(ctx, b, ms, prelude, "TIMESTAMPTZ"); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	st := sqlstore.New(b)
	st.SetGroupLanes(groupLanes)
	// A batch's submissions are written with one statement per table.
	st.SetBulkSubmit(true)
	// Tokens are cached in each replica (sqlstore.TokenCacheTTL); each
	// token write is a notice to the others, carried by the commit.
	channel := tokenChannel(opts.Schema)
	st.SetTokenNotify(`SELECT pg_notify('` + channel + `', '')`)
	wctx, stop := context.WithCancel(context.Background())
	s := &Store{Store: st, pool: pool, schema: opts.Schema, leaders: map[int]func(){}, stopWatch: stop, watching: make(chan struct{}), logf: opts.Log}
	go func() {
		defer close(s.watching)
		s.watchTokens(wctx, pool.Config().ConnConfig.Copy(), channel)
	}()
	return s, nil
}

func (s *Store) log(msg string) {
	if s.logf != nil {
		s.logf(msg)
	}
}

// Close gives up any leadership held and closes the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	held := make([]func(), 0, len(s.leaders))
	for _, r := range s.leaders {
		held = append(held, r)
	}
	s.mu.Unlock()
	for _, r := range held {
		r()
	}
	s.stopWatch()
	<-s.watching
	return s.Store.Close()
}

// Pool returns the connection pool, for health checks and metrics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// TryLeader implements store.Leader with a session-level advisory lock on
// a connection taken out of the pool for as long as the lock is held.
// Advisory locks are database-wide, so the lock taken is key mixed with
// the schema's name: the replicas of one deployment (one schema) compete,
// and deployments in other schemas of the same database do not block
// each other (they did: a test server in one schema kept a test in
// another from ever leading).
func (s *Store) TryLeader(ctx context.Context, key int64) (func(), bool, error) {
	key = lockKey(key, s.schema)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("try leader: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, fmt.Errorf("try leader: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	s.mu.Lock()
	n := s.next
	s.next++
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.leaders, n)
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var unlocked bool
			if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", key).Scan(&unlocked); err != nil || !unlocked {
				// The session is in doubt: close it, which drops its locks.
				_ = conn.Conn().Close(ctx)
			}
			conn.Release()
		})
	}
	s.leaders[n] = release
	s.mu.Unlock()
	return release, true, nil
}

// lockKey is the advisory lock key of key in schema: key itself in the
// default schema, else key xor the FNV-1a hash of the schema's name.
func lockKey(key int64, schema string) int64 {
	if schema == "" {
		return key
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return key ^ int64(h.Sum64())
}

// backend implements sqlstore.Backend over pgx.
type backend struct{ pool *pgxpool.Pool }

func (b *backend) Reader() sqlstore.Querier { return querier{b.pool} }

func (b *backend) Begin(ctx context.Context, serializable bool) (sqlstore.Txn, error) {
	opts := pgx.TxOptions{}
	if serializable {
		opts.IsoLevel = pgx.Serializable
	}
	tx, err := b.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return txn{querier{tx}, tx}, nil
}

func (b *backend) Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func (b *backend) Classify(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "23505":
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case "23503":
		return fmt.Errorf("%w: a referenced row does not exist: %w", store.ErrNotFound, err)
	}
	return err
}

func (b *backend) Time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return store.Micro(t)
}

func (b *backend) Close() error {
	b.pool.Close()
	return nil
}

// execer is what the pool and a transaction share.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

type querier struct{ e execer }

var _ sqlstore.Batcher = querier{}

// pipelined is how many statements one round trip of a batch sends: the
// round trips of a batch of n are n/pipelined, and what is buffered for
// one is bounded.
const pipelined = 1000

// ExecBatch implements sqlstore.Batcher.
func (q querier) ExecBatch(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, int, error) {
	n := make([]int64, 0, len(stmts))
	failed, err := q.batch(ctx, stmts, func(_ int, br pgx.BatchResults) error {
		tag, err := br.Exec()
		n = append(n, tag.RowsAffected())
		return err
	})
	if err != nil {
		return nil, failed, err
	}
	return n, 0, nil
}

// QueryRowBatch implements sqlstore.Batcher.
func (q querier) QueryRowBatch(ctx context.Context, stmts []sqlstore.Stmt, scan func(i int, r sqlstore.Row) error) (int, error) {
	return q.batch(ctx, stmts, func(i int, br pgx.BatchResults) error { return scan(i, row{br.QueryRow()}) })
}

// batch sends stmts pipelined at a time and reads each one's result with
// read, stopping at the first error.
func (q querier) batch(ctx context.Context, stmts []sqlstore.Stmt, read func(i int, br pgx.BatchResults) error) (int, error) {
	for lo := 0; lo < len(stmts); lo += pipelined {
		hi := min(lo+pipelined, len(stmts))
		b := &pgx.Batch{}
		for _, s := range stmts[lo:hi] {
			b.Queue(s.SQL, s.Args...)
		}
		br := q.e.SendBatch(ctx, b)
		for i := lo; i < hi; i++ {
			if err := read(i, br); err != nil {
				_ = br.Close()
				return i, err
			}
		}
		if err := br.Close(); err != nil {
			return hi - 1, err
		}
	}
	return 0, nil
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.e.Exec(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.e.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return row{q.e.QueryRow(ctx, sql, args...)}
}

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error {
	if err := r.Row.Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return sqlstore.ErrNoRows
		}
		return err
	}
	return nil
}

type txn struct {
	querier
	tx pgx.Tx
}

func (t txn) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }
func (t txn) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}
