package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeBackend records the statements of its transactions; Commit fails
// with commitErr, and Retryable reports retryErr.
type fakeBackend struct {
	mu        sync.Mutex
	log       []string
	commitErr error
	retryErr  error
	begun     int
	// gate, when set, holds the first Begin until it is closed, so that
	// operations queue behind it.
	gate chan struct{}
}

type fakeTxn struct{ b *fakeBackend }

func (b *fakeBackend) rec(s string) {
	b.mu.Lock()
	b.log = append(b.log, s)
	b.mu.Unlock()
}

func (b *fakeBackend) Reader() Querier { return nil }
func (b *fakeBackend) Begin(context.Context, bool) (Txn, error) {
	b.mu.Lock()
	b.begun++
	first, gate := b.begun == 1, b.gate
	b.mu.Unlock()
	if first && gate != nil {
		<-gate
	}
	b.rec("BEGIN")
	return fakeTxn{b}, nil
}
func (b *fakeBackend) Retryable(err error) bool {
	return b.retryErr != nil && errors.Is(err, b.retryErr)
}
func (b *fakeBackend) Classify(err error) error { return err }
func (b *fakeBackend) Time(t time.Time) any     { return t }
func (b *fakeBackend) Close() error             { return nil }

func (t fakeTxn) Exec(_ context.Context, q string, _ ...any) (int64, error) {
	t.b.rec(q)
	return 1, nil
}
func (t fakeTxn) Query(context.Context, string, ...any) (Rows, error) { return nil, nil }
func (t fakeTxn) QueryRow(context.Context, string, ...any) Row        { return nil }
func (t fakeTxn) Commit(context.Context) error {
	t.b.rec("COMMIT")
	return t.b.commitErr
}
func (t fakeTxn) Rollback(context.Context) error { t.b.rec("ROLLBACK"); return nil }

// submitAll runs n grouped operations at once, the first held in its
// Begin until all n are queued, so that the other n-1 form one batch;
// op i runs fn(i).
func submitAll(t *testing.T, s *Store, b *fakeBackend, n int, fn func(i int, q Querier) error) []error {
	t.Helper()
	b.gate = make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[0] = s.grouped(context.Background(), func(_ context.Context, q Querier) error { return fn(0, q) })
	})
	// Wait for the first to hold the batch, then queue the rest.
	for {
		b.mu.Lock()
		begun := b.begun
		b.mu.Unlock()
		if begun == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// One at a time, so that the queue's order is 1..n-1: a batch runs
	// its operations in the order they came.
	for i := 1; i < n; i++ {
		wg.Go(func() {
			errs[i] = s.grouped(context.Background(), func(_ context.Context, q Querier) error { return fn(i, q) })
		})
		for {
			s.group.mu.Lock()
			queued := len(s.group.queue)
			s.group.mu.Unlock()
			if queued == i {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(b.gate)
	wg.Wait()
	return errs
}

// A batch with one failing operation commits the others: the failing
// one is rolled back to its savepoint and answered with its own error.
func TestGroupOneFailureCommitsTheRest(t *testing.T) {
	b := &fakeBackend{}
	s := New(b)
	bad := errors.New("bad submission")
	errs := submitAll(t, s, b, 6, func(i int, q Querier) error {
		_, _ = q.Exec(context.Background(), fmt.Sprintf("INSERT %d", i))
		if i == 3 {
			return bad
		}
		return nil
	})
	for i, err := range errs {
		if i == 3 && !errors.Is(err, bad) {
			t.Errorf("op 3: %v, want its own error", err)
		}
		if i != 3 && err != nil {
			t.Errorf("op %d: %v, want nil", i, err)
		}
	}
	// The second batch holds ops 1..5: op 3 is undone to its savepoint,
	// and the batch commits once.
	want := []string{"BEGIN"}
	for i := 1; i < 6; i++ {
		want = append(want, "SAVEPOINT store_group", fmt.Sprintf("INSERT %d", i))
		if i == 3 {
			want = append(want, "ROLLBACK TO SAVEPOINT store_group")
		}
		want = append(want, "RELEASE SAVEPOINT store_group")
	}
	want = append(want, "COMMIT")
	second := b.log[slices.Index(b.log, "COMMIT")+1:]
	if !slices.Equal(second, want) {
		t.Errorf("second batch:\n%q\nwant\n%q", second, want)
	}
	if b.begun != 2 {
		t.Errorf("%d transactions, want 2 (one for the first, one for the other five)", b.begun)
	}
}

// A batch whose commit fails answers every operation in it with the
// error: none is told it succeeded.
func TestGroupCommitFailureFailsAll(t *testing.T) {
	broken := errors.New("disk full")
	b := &fakeBackend{commitErr: broken}
	s := New(b)
	errs := submitAll(t, s, b, 5, func(int, Querier) error { return nil })
	for i, err := range errs {
		if !errors.Is(err, broken) {
			t.Errorf("op %d: %v, want the commit's error", i, err)
		}
	}
}

// A panic in one operation is its error; the batch goes on.
func TestGroupPanicIsItsOwnError(t *testing.T) {
	b := &fakeBackend{}
	s := New(b)
	errs := submitAll(t, s, b, 3, func(i int, _ Querier) error {
		if i == 2 {
			panic("boom")
		}
		return nil
	})
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Errorf("errors %v, want only op 2's", errs)
	}
}

// An operation failing with a retryable error (a deadlock on PostgreSQL)
// runs again in a later batch.
func TestGroupRetriesRetryable(t *testing.T) {
	deadlock := errors.New("deadlock")
	b := &fakeBackend{retryErr: deadlock}
	s := New(b)
	var mu sync.Mutex
	runs := map[int]int{}
	errs := submitAll(t, s, b, 3, func(i int, _ Querier) error {
		mu.Lock()
		defer mu.Unlock()
		runs[i]++
		if i == 1 && runs[i] == 1 {
			return deadlock
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("op %d: %v", i, err)
		}
	}
	if runs[1] != 2 || runs[0] != 1 || runs[2] != 1 {
		t.Errorf("runs %v, want op 1 twice, the others once", runs)
	}
}

// An operation whose context ended before its batch began is not run.
func TestGroupCancelledBeforeBatch(t *testing.T) {
	b := &fakeBackend{}
	s := New(b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := s.grouped(ctx, func(context.Context, Querier) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("err %v, ran %v: want context.Canceled, not run", err, ran)
	}
}
