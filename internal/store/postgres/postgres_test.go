package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/internal/sqlstore"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// defaultDSN is the CI database; GPUFLEET_TEST_POSTGRES overrides it.
const defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	dsnOnce sync.Once
	dsnUsed string
	dsnErr  error
)

// testDSN returns a DSN that connects, trying the configured user and
// then root. PostgreSQL being down is a failure, never a skip: CI starts
// it, and a silently skipped backend is an untested one.
func testDSN(t testing.TB) string {
	t.Helper()
	dsnOnce.Do(func() {
		dsn := os.Getenv("GPUFLEET_TEST_POSTGRES")
		if dsn == "" {
			dsn = defaultDSN
		}
		candidates := []string{dsn}
		if u, err := url.Parse(dsn); err == nil && u.User != nil && u.User.Username() != "root" {
			u.User = url.User("root")
			candidates = append(candidates, u.String())
		}
		var errs []error
		for _, c := range candidates {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			conn, err := pgx.Connect(ctx, c)
			if err == nil {
				conn.Close(ctx)
				cancel()
				dsnUsed = c
				return
			}
			cancel()
			errs = append(errs, err)
		}
		dsnErr = errors.Join(errs...)
	})
	if dsnErr != nil {
		t.Fatalf("PostgreSQL is not reachable (set GPUFLEET_TEST_POSTGRES; CI starts the server on 127.0.0.1:5432, database test): %v", dsnErr)
	}
	return dsnUsed
}

// newSchema returns a fresh schema name and drops the schema when t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "gpufleet_test_" + hex.EncodeToString(b[:])
	dsn := testDSN(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// opener returns a storetest.Opener: a schema of its own per test, the
// same schema again when a test opens twice.
func opener() storetest.Opener {
	var mu sync.Mutex
	schemas := map[*testing.T]string{}
	return func(t *testing.T) store.Store {
		mu.Lock()
		schema, ok := schemas[t]
		mu.Unlock()
		if !ok {
			schema = newSchema(t) // may end t: not under mu
			mu.Lock()
			schemas[t] = schema
			mu.Unlock()
		}
		s, err := Open(t.Context(), testDSN(t), Options{Schema: schema})
		if err != nil {
			t.Fatalf("open schema %s: %v", schema, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, opener())
}

func TestAppendOnlyEvents(t *testing.T) {
	s, err := Open(t.Context(), testDSN(t), Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Pool().Exec(t.Context(), `INSERT INTO events (at, kind, subject, reason, attrs) VALUES (now(), 'k', 's', 'r', '{}')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE events SET reason = 'forged'`, `DELETE FROM events`, `TRUNCATE events`} {
		if _, err := s.Pool().Exec(t.Context(), q); err == nil {
			t.Errorf("%s: allowed on the append-only events table", q)
		}
	}
}

func TestMigrations(t *testing.T) {
	schema := newSchema(t)
	// Replicas starting together migrate once, the others wait and find
	// the schema up to date.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(t.Context(), testDSN(t), Options{Schema: schema})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
	s, err := Open(t.Context(), testDSN(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sqlstore.Migrations(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Pool().QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(ms) {
		t.Errorf("schema_migrations has %d rows (%v), want one per migration: %d", n, err, len(ms))
	}
	if _, err := s.Pool().Exec(t.Context(), "INSERT INTO schema_migrations (version, name, sum, applied_at) VALUES (999, 'future', 'x', now())"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(t.Context(), testDSN(t), Options{Schema: schema}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("open a newer schema: %v, want ErrUnsupported", err)
	}
	if _, err := Open(t.Context(), testDSN(t), Options{Schema: "Bad; DROP"}); err == nil {
		t.Error("a schema name that is not an identifier was accepted")
	}
}

func TestLeader(t *testing.T) {
	schema := newSchema(t)
	a, err := Open(t.Context(), testDSN(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), testDSN(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A deployment in another schema of the same database leads its own.
	other, err := Open(t.Context(), testDSN(t), Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var kb [8]byte
	_, _ = rand.Read(kb[:])
	key := int64(kb[0])<<40 | int64(kb[1])<<32 | int64(kb[2])<<24 | int64(kb[3])<<16 | int64(kb[4])<<8 | int64(kb[5])

	release, ok, err := a.TryLeader(t.Context(), key)
	if err != nil || !ok {
		t.Fatalf("first TryLeader: ok %v err %v", ok, err)
	}
	for _, s := range []*Store{a, b} {
		if _, ok, err := s.TryLeader(t.Context(), key); err != nil || ok {
			t.Errorf("second TryLeader: ok %v err %v, want refused (even from the holder's own pool)", ok, err)
		}
	}
	ro, ok, err := other.TryLeader(t.Context(), key)
	if err != nil || !ok {
		t.Errorf("TryLeader in another schema: ok %v err %v, want granted", ok, err)
	} else {
		ro()
	}
	release()
	release()
	r, ok, err := b.TryLeader(t.Context(), key)
	if err != nil || !ok {
		t.Fatalf("TryLeader after release: ok %v err %v", ok, err)
	}
	// A leader whose process dies loses the lock with its session.
	b.Close()
	r() // on a closed pool: must not hang or panic
	deadline := time.Now().Add(10 * time.Second)
	for {
		r2, ok, err := a.TryLeader(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			r2()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock outlived its holder's connection")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", Options{})
	if err == nil {
		t.Fatal("open of an unreachable server succeeded")
	}
	if got := fmt.Sprint(err); got == "" {
		t.Error("empty error")
	}
}

// holdOpen runs write in a transaction of s and keeps the transaction
// open once write is done; commit ends it and returns its error.
func holdOpen(t *testing.T, s *Store, write func(tx store.Tx) error) (commit func() error) {
	t.Helper()
	written, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Tx(t.Context(), func(tx store.Tx) error {
			if err := write(tx); err != nil {
				return err
			}
			close(written)
			<-release
			return nil
		})
	}()
	select {
	case <-written:
	case err := <-done:
		t.Fatalf("write in the transaction held open: %v", err)
	}
	return func() error { close(release); return <-done }
}

// TestReportCommittedLate: a report whose transaction took its sequence
// number first but committed after a later-numbered report was read is
// still pending once the loop deletes what it read. Deleting up to the
// highest number read dropped it, and its run never ended (a job stayed
// running after its agent said it exited 0).
func TestReportCommittedLate(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, testDSN(t), Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	early := store.AgentReport{Agent: "n1", Kind: "job-exited", Run: "j1-r1", At: at, Reason: "exit 0", Attrs: map[string]string{"exit_code": "0"}}
	late := store.AgentReport{Agent: "n2", Kind: "job-exited", Run: "j2-r1", At: at, Reason: "exit 0", Attrs: map[string]string{"exit_code": "0"}}

	commit := holdOpen(t, s, func(tx store.Tx) error { return tx.Agents().AppendReports(ctx, early) })
	if err := s.Agents().AppendReports(ctx, late); err != nil {
		t.Fatal(err)
	}
	read, err := s.Agents().PendingReports(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 1 || read[0].Run != late.Run {
		t.Fatalf("pending before the early report commits: %+v, want only %s", read, late.Run)
	}
	if err := commit(); err != nil {
		t.Fatalf("early report's transaction: %v", err)
	}
	if err := s.Agents().DeleteReports(ctx, []int64{read[0].Seq}); err != nil {
		t.Fatal(err)
	}
	left, err := s.Agents().PendingReports(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Run != early.Run || left[0].Seq >= read[0].Seq {
		t.Fatalf("pending after deleting what was read: %+v, want the early report %s (numbered before %d)", left, early.Run, read[0].Seq)
	}
}

// TestTokenCacheAcrossReplicas: each replica answers a token it read
// from its cache, and a revocation through one replica reaches the
// other's cache by its notice, well within sqlstore.TokenCacheTTL.
func TestTokenCacheAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	var mu sync.Mutex
	var logged []string
	open := func() *Store {
		s, err := Open(ctx, testDSN(t), Options{Schema: schema, Log: func(m string) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, m)
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	at := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	// Each store turns its cache on once it listens: wait for both.
	for deadline := time.Now().Add(10 * time.Second); !a.TokenCacheOn() || !b.TokenCacheOn(); {
		if time.Now().After(deadline) {
			t.Fatal("the stores' token listeners did not connect within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, secret := range []string{"s1", "s2"} {
		tok := store.Token{ID: fmt.Sprintf("t%d", i+1), Hash: store.HashToken(secret), Role: store.RoleAgent, Created: at}
		if err := a.Tokens().CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *Store, secret string) error {
		_, err := s.Tokens().TokenByHash(ctx, store.HashToken(secret), at.Add(time.Minute))
		return err
	}
	// Cached: a revocation written past the store (no notice) is not
	// seen by b until its entry ages out.
	if err := read(b, "s1"); err != nil {
		t.Fatalf("b reads t1: %v", err)
	}
	if _, err := a.Pool().Exec(ctx, `UPDATE tokens SET revoked_at = now() WHERE id = 't1'`); err != nil {
		t.Fatal(err)
	}
	if err := read(b, "s1"); err != nil {
		t.Errorf("b's read of t1 revoked behind the stores' back: %v, want it from b's cache", err)
	}
	// A revocation through a reaches b by its notice.
	if err := read(b, "s2"); err != nil {
		t.Fatalf("b reads t2: %v", err)
	}
	if err := a.Tokens().RevokeToken(ctx, "t2", at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for errors.Is(read(b, "s2"), nil) {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("t2, revoked through a, still works on b %s later (the TTL is %s: the notice did not arrive)", time.Since(start).Round(time.Millisecond), sqlstore.TokenCacheTTL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("b refused t2 %s after a revoked it", time.Since(start).Round(time.Microsecond))
	if err := read(b, "s2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("b reads t2 after its revocation: %v, want not found", err)
	}

	// A listener whose connection is cut turns its cache off, says so,
	// and listens again.
	if _, err := a.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`, `LISTEN "`+tokenChannel(schema)+`"`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(logged)
		mu.Unlock()
		if n >= 2 && a.TokenCacheOn() && b.TokenCacheOn() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after their listeners were cut: %d notes logged (want 2), caches on %v and %v", n, a.TokenCacheOn(), b.TokenCacheOn())
		}
	}
	mu.Lock()
	t.Logf("logged: %q", logged)
	mu.Unlock()
}

// TestSubmissionsWrittenInBulk: submissions that queue behind a running
// batch are written together (sqlstore's bulk write), every one answered
// as created and stored. A transaction holds the team's row so that the
// first batch waits on it while the rest queue.
func TestSubmissionsWrittenInBulk(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, testDSN(t), Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm := core.Team{ID: "ml", Name: "ML", Weight: 1}
	if err := s.Teams().CreateTeam(ctx, tm); err != nil {
		t.Fatal(err)
	}
	commit := holdOpen(t, s, func(tx store.Tx) error { return tx.Teams().UpdateTeam(ctx, tm) })
	const n = 64
	errs := make([]error, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			j := core.Job{ID: fmt.Sprintf("j%02d", i), Team: "ml", User: "alice", Tier: core.TierRegular,
				Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}, Submit: time.Date(2026, 12, 7, 0, 0, i, 0, time.UTC)}
			_, created[i], errs[i] = s.Jobs().SubmitJob(ctx, j, "")
		})
	}
	// The first batch waits on the team's row; the rest queue behind it.
	time.Sleep(300 * time.Millisecond)
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !created[i] {
			t.Fatalf("j%02d: created %v, %v", i, created[i], errs[i])
		}
	}
	if got := s.BulkWritten(); got < 2 {
		t.Errorf("%d submissions written in bulk, want the queued batch's (at least 2)", got)
	}
	units, err := s.Units().ListLiveUnits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != n {
		t.Errorf("%d live units, want %d", len(units), n)
	}
	t.Logf("%d of %d submissions written in bulk", s.BulkWritten(), n)
}
