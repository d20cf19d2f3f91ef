package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Group commit: operations that each would be a transaction of their own
// (a job submission) are gathered while a transaction is being written
// and run together in the next one, each under a savepoint, so that one
// commit (SQLite's WAL write and fsync, PostgreSQL's WAL flush and round
// trip) serves many. Nothing waits on purpose: a batch is whatever queued
// while the one before it ran, so a lone operation is committed at once
// and a busy store commits in larger batches. Each operation is answered
// only after its batch commits; one that fails is rolled back to its
// savepoint and answered with its error, the rest of the batch going on;
// a batch whose BEGIN or COMMIT fails answers every operation in it with
// the error (none was committed).

// maxGroup bounds a batch: the write lock is held for its whole run.
const maxGroup = 256

// groupOp is one operation waiting for a batch.
type groupOp struct {
	ctx     context.Context
	fn      func(ctx context.Context, q Querier) error
	done    chan error
	attempt int
	// sub is set for a job submission, which a batch may write together
	// with the others (bulk.go); fn writes it alone.
	sub *submission
}

// grouper gathers operations into batches, at most lanes batches running
// at a time.
type grouper struct {
	s       *Store
	lanes   int
	mu      sync.Mutex
	queue   []*groupOp
	running int
}

// SetGroupLanes sets how many batches of grouped operations may run at
// once: 1 where the database has one writer (SQLite), more where
// transactions run side by side (PostgreSQL). Call it before use.
func (s *Store) SetGroupLanes(n int) { s.group.lanes = max(n, 1) }

// grouped runs fn in a grouped transaction under a savepoint and returns
// its error, or the batch's if the batch did not commit. fn may run more
// than once (after a retryable failure) and must set its results afresh
// each time. Its ctx is not cancelled: a statement interrupted inside a
// shared transaction could end the whole transaction; the caller's ctx is
// checked before fn runs and while it waits.
func (s *Store) grouped(ctx context.Context, fn func(ctx context.Context, q Querier) error) error {
	return s.groupedSubmit(ctx, nil, fn)
}

// groupedSubmit is grouped for a job submission sub, whose fn writes it
// alone: a batch may write it with the batch's other submissions instead
// (bulk.go).
func (s *Store) groupedSubmit(ctx context.Context, sub *submission, fn func(ctx context.Context, q Querier) error) error {
	op := &groupOp{ctx: ctx, fn: fn, done: make(chan error, 1), sub: sub}
	s.group.push(op)
	// Once queued, the answer is waited for even if ctx ends: the
	// operation may be in a transaction that commits, and the caller must
	// not be told it failed when it did not.
	return <-op.done
}

func (g *grouper) push(ops ...*groupOp) {
	g.mu.Lock()
	g.queue = append(g.queue, ops...)
	start := g.running < max(g.lanes, 1)
	if start {
		g.running++
	}
	g.mu.Unlock()
	if start {
		go g.loop()
	}
}

// loop runs batches until the queue is empty.
func (g *grouper) loop() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		n := min(len(g.queue), maxGroup)
		batch := make([]*groupOp, n)
		copy(batch, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()
		g.run(batch)
	}
}

// run runs one batch in one transaction.
func (g *grouper) run(batch []*groupOp) {
	ctx := context.Background()
	live := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	t, err := g.s.b.Begin(ctx, false)
	if err != nil {
		for _, op := range live {
			op.done <- fmt.Errorf("begin transaction: %w", err)
		}
		return
	}
	errs := make([]error, len(live))
	var retry []*groupOp
	// Submissions written together go last: their teams' rows are
	// locked from there to the commit (bulk.go).
	var subs []*submission
	var subAt []int
	if g.s.bulk {
		for i, op := range live {
			if op.sub != nil {
				subs, subAt = append(subs, op.sub), append(subAt, i)
			}
		}
		if len(subs) < 2 {
			subs, subAt = nil, nil
		}
	}
	broken := func(err error) {
		// What the transaction holds is no longer known: none of it is
		// committed.
		rerr := t.Rollback(ctx)
		for _, op := range live {
			op.done <- errors.Join(err, rerr)
		}
	}
	for i, op := range live {
		if subs != nil && op.sub != nil {
			continue
		}
		if errs[i] = g.one(ctx, t, op); errors.Is(errs[i], errSavepoint) {
			broken(errs[i])
			return
		}
	}
	if subs != nil {
		whole, err := g.s.bulkSubmit(ctx, t, subs)
		if err != nil {
			broken(err)
			return
		}
		for _, i := range subAt {
			if whole {
				break
			}
			// Not written together: each alone, with its own answer.
			if errs[i] = g.one(ctx, t, live[i]); errors.Is(errs[i], errSavepoint) {
				broken(errs[i])
				return
			}
		}
	}
	if err := t.Commit(ctx); err != nil {
		err = fmt.Errorf("commit: %w", g.s.b.Classify(err))
		for _, op := range live {
			if g.s.b.Retryable(err) && op.attempt+1 < maxAttempts {
				op.attempt++
				retry = append(retry, op)
				continue
			}
			op.done <- err
		}
	} else {
		for i, op := range live {
			if errs[i] != nil && g.s.b.Retryable(errs[i]) && op.attempt+1 < maxAttempts {
				// Rolled back to its savepoint: nothing of it committed.
				op.attempt++
				retry = append(retry, op)
				continue
			}
			op.done <- errs[i]
		}
	}
	if len(retry) > 0 {
		g.push(retry...)
	}
}

// errSavepoint marks a failure of the batch's own statements (a
// savepoint that could not be set or undone): the transaction is no
// longer known to be sound.
var errSavepoint = errors.New("sqlstore: grouped transaction broken")

// one runs op under a savepoint of t.
func (g *grouper) one(ctx context.Context, t Txn, op *groupOp) (err error) {
	if _, err := t.Exec(ctx, "SAVEPOINT store_group"); err != nil {
		return fmt.Errorf("%w: savepoint: %w", errSavepoint, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlstore: grouped operation panicked: %v", p)
		}
		if err == nil {
			if _, rerr := t.Exec(ctx, "RELEASE SAVEPOINT store_group"); rerr != nil {
				err = fmt.Errorf("%w: release savepoint: %w", errSavepoint, rerr)
			}
			return
		}
		if _, rerr := t.Exec(ctx, "ROLLBACK TO SAVEPOINT store_group"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("%w: roll back to savepoint: %w", errSavepoint, rerr))
			return
		}
		_, _ = t.Exec(ctx, "RELEASE SAVEPOINT store_group")
	}()
	return op.fn(context.WithoutCancel(op.ctx), t)
}
