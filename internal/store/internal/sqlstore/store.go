package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

// maxAttempts bounds how often a transaction is run after serialization
// failures.
const maxAttempts = 20

// Store implements store.Store over a Backend.
type Store struct {
	b      Backend
	group  grouper
	tokens tokenCache
	// tokenNotify is run in each transaction that writes tokens
	// (SetTokenNotify); "" where no other process writes the database.
	tokenNotify string
	// bulk writes a batch's submissions together (SetBulkSubmit);
	// bulked counts the submissions so written.
	bulk   bool
	bulked atomic.Int64
}

var _ store.Store = (*Store)(nil)

// New returns a store over b, whose schema must be migrated.
func New(b Backend) *Store {
	s := &Store{b: b}
	s.group = grouper{s: s, lanes: 1}
	return s
}

// Backend returns the store's backend.
func (s *Store) Backend() Backend { return s.b }

func (s *Store) ops() *ops { return &ops{s: s} }

// Teams implements store.Aggregates.
func (s *Store) Teams() store.Teams { return s.ops() }

// Users implements store.Aggregates.
func (s *Store) Users() store.Users { return s.ops() }

// Tokens implements store.Aggregates.
func (s *Store) Tokens() store.Tokens { return s.ops() }

// Jobs implements store.Aggregates.
func (s *Store) Jobs() store.Jobs { return s.ops() }

// Units implements store.Aggregates.
func (s *Store) Units() store.Units { return s.ops() }

// Leases implements store.Aggregates.
func (s *Store) Leases() store.Leases { return s.ops() }

// Events implements store.Aggregates.
func (s *Store) Events() store.Events { return s.ops() }

// Samples implements store.Aggregates.
func (s *Store) Samples() store.Samples { return s.ops() }

// Alerts implements store.Aggregates.
func (s *Store) Alerts() store.Alerts { return s.ops() }

// Loop implements store.Aggregates.
func (s *Store) Loop() store.Loop { return s.ops() }

// Agents implements store.Aggregates.
func (s *Store) Agents() store.Agents { return s.ops() }

// JobLogs implements store.Aggregates.
func (s *Store) JobLogs() store.JobLogs { return s.ops() }

// Close implements store.Store.
func (s *Store) Close() error { return s.b.Close() }

// Tx implements store.Store: serializable, run again (with jittered
// backoff) after a serialization failure.
func (s *Store) Tx(ctx context.Context, fn func(tx store.Tx) error) error {
	var last *ops
	err := s.run(ctx, true, func(t Txn) error {
		last = &ops{s: s, tx: t}
		return fn(last)
	})
	if last != nil && last.tokensWritten {
		s.tokens.invalidate() // after the commit, or its failure
	}
	return err
}

// run runs fn in a transaction, again after retryable failures.
func (s *Store) run(ctx context.Context, serializable bool, fn func(Txn) error) error {
	for attempt := 1; ; attempt++ {
		err := s.once(ctx, serializable, fn)
		if err == nil || !s.b.Retryable(err) || attempt == maxAttempts {
			return err
		}
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 7)))
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
	}
}

func (s *Store) once(ctx context.Context, serializable bool, fn func(Txn) error) (err error) {
	t, err := s.b.Begin(ctx, serializable)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	done := false
	defer func() {
		if !done {
			// A panic in fn: roll back and let it go on.
			_ = t.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(t); err != nil {
		done = true
		if rerr := t.Rollback(context.WithoutCancel(ctx)); rerr != nil {
			return errors.Join(err, fmt.Errorf("roll back: %w", rerr))
		}
		return err
	}
	done = true
	if err := t.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", s.b.Classify(err))
	}
	return nil
}

// ops implements every aggregate, outside a transaction (tx nil) or in
// one.
type ops struct {
	s  *Store
	tx Txn
	// tokensWritten: a token's revocation or binding changed in tx; the
	// token cache is cleared once tx ends.
	tokensWritten bool
}

// notifyTokens tells other processes, when q's transaction commits, that
// tokens changed.
func (o *ops) notifyTokens(ctx context.Context, q Querier) error {
	if o.s.tokenNotify == "" {
		return nil
	}
	if _, err := q.Exec(ctx, o.s.tokenNotify); err != nil {
		return o.fail(err, "notify token write")
	}
	return nil
}

// wroteTokens clears the token cache after a token write: at once
// outside a transaction (the write has committed), at the end of the
// transaction inside one.
func (o *ops) wroteTokens() {
	if o.tx == nil {
		o.s.tokens.invalidate()
		return
	}
	o.tokensWritten = true
}

var _ store.Tx = (*ops)(nil)

func (o *ops) Teams() store.Teams     { return o }
func (o *ops) Users() store.Users     { return o }
func (o *ops) Tokens() store.Tokens   { return o }
func (o *ops) Jobs() store.Jobs       { return o }
func (o *ops) Units() store.Units     { return o }
func (o *ops) Leases() store.Leases   { return o }
func (o *ops) Events() store.Events   { return o }
func (o *ops) Samples() store.Samples { return o }
func (o *ops) Alerts() store.Alerts   { return o }
func (o *ops) Loop() store.Loop       { return o }
func (o *ops) Agents() store.Agents   { return o }
func (o *ops) JobLogs() store.JobLogs { return o }

// r is where reads go.
func (o *ops) r() Querier {
	if o.tx != nil {
		return o.tx
	}
	return o.s.b.Reader()
}

// atomic runs fn all or nothing: in a new transaction (read committed on
// PostgreSQL: fn's statements are written to be safe there), or inside the
// enclosing one under a savepoint, so that a failed operation leaves the
// transaction as it was and usable, on both backends alike (PostgreSQL
// would otherwise refuse every later statement).
func (o *ops) atomic(ctx context.Context, fn func(q Querier) error) error {
	if o.tx == nil {
		return o.s.run(ctx, false, func(t Txn) error { return fn(t) })
	}
	if _, err := o.tx.Exec(ctx, "SAVEPOINT store_op"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(o.tx); err != nil {
		if _, rerr := o.tx.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT store_op"); rerr != nil {
			return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rerr))
		}
		_, _ = o.tx.Exec(context.WithoutCancel(ctx), "RELEASE SAVEPOINT store_op")
		return err
	}
	if _, err := o.tx.Exec(ctx, "RELEASE SAVEPOINT store_op"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// atomicGrouped is atomic for a short write that needs no transaction
// of its own (an agent's heartbeat, a token's last use): outside a
// transaction fn joins the next group commit (group.go) under a savepoint,
// answered only after its batch commits, so that it costs no COMMIT (no
// fsync on SQLite) of its own. fn may run more than once (after a
// retryable failure) and must set its results afresh each time; it runs
// its statements with the ctx it is given, which a grouped run does not
// cancel (a statement interrupted would end the whole batch).
func (o *ops) atomicGrouped(ctx context.Context, fn func(ctx context.Context, q Querier) error) error {
	if o.tx == nil {
		return o.s.grouped(ctx, fn)
	}
	return o.atomic(ctx, func(q Querier) error { return fn(ctx, q) })
}

// t binds a time.
func (o *ops) t(v time.Time) any { return o.s.b.Time(v) }

// fail wraps a driver error with context, classified.
func (o *ops) fail(err error, format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), o.s.b.Classify(err))
}
