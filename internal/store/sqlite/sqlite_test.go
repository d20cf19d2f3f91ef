package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/storetest"
)

// opener returns a storetest.Opener: a new file per test, the same file
// again when a test opens twice.
func opener() storetest.Opener {
	var mu sync.Mutex
	paths := map[*testing.T]string{}
	return func(t *testing.T) store.Store {
		mu.Lock()
		path, ok := paths[t]
		mu.Unlock()
		if !ok {
			path = filepath.Join(t.TempDir(), "gpufleet.db") // may end t: not under mu
			mu.Lock()
			paths[t] = path
			mu.Unlock()
		}
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, opener())
}

func TestOpenRefusesURIs(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=memory", "a#b"} {
		if _, err := Open(t.Context(), p, Options{}); err == nil {
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func TestPragmas(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "p.db"), Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.Backend().(*backend)
	for _, tc := range []struct {
		pragma string
		want   string
	}{{"journal_mode", "wal"}, {"foreign_keys", "1"}, {"synchronous", "2"}, {"busy_timeout", "10000"}} {
		var got string
		if err := b.wconn.QueryRowContext(t.Context(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("writer %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
	var qo string
	if err := b.r.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&qo); err != nil || qo != "1" {
		t.Errorf("readers query_only = %s (%v), want 1", qo, err)
	}
	// The schema refuses to change the audit trail, whoever asks.
	if _, err := b.wconn.ExecContext(t.Context(), `INSERT INTO events (at, kind, subject, reason, attrs) VALUES (1, 'k', 's', 'r', '{}')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE events SET reason = 'forged'`, `DELETE FROM events`} {
		if _, err := b.wconn.ExecContext(t.Context(), q); err == nil {
			t.Errorf("%s: allowed on the append-only events table", q)
		}
	}
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := s.Backend().(*backend)
	var n int
	if err := b.r.QueryRowContext(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n < 1 {
		t.Fatalf("schema_migrations has %d rows (%v)", n, err)
	}
	// A database from a newer binary is refused, not half-used.
	if _, err := b.wconn.ExecContext(t.Context(), "INSERT INTO schema_migrations (version, name, sum, applied_at) VALUES (999, 'future', 'x', 0)"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(t.Context(), path, Options{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("open a newer schema: %v, want ErrUnsupported", err)
	}
}

func TestLeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	a, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	release, ok, err := a.TryLeader(t.Context(), 7)
	if err != nil || !ok {
		t.Fatalf("first TryLeader: ok %v err %v", ok, err)
	}
	if _, ok, err := b.TryLeader(t.Context(), 7); err != nil || ok {
		t.Errorf("second TryLeader on the same file: ok %v err %v, want refused", ok, err)
	}
	if r, ok, err := b.TryLeader(t.Context(), 8); err != nil || !ok {
		t.Errorf("TryLeader on another key: ok %v err %v", ok, err)
	} else {
		r()
	}
	release()
	release() // twice is fine
	r, ok, err := b.TryLeader(t.Context(), 7)
	if err != nil || !ok {
		t.Errorf("TryLeader after release: ok %v err %v", ok, err)
	} else {
		r()
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := a.TryLeader(ctx, 9); err == nil {
		t.Error("TryLeader with a cancelled context succeeded")
	}
	_ = os.Remove(path)
}

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                          "SELECT 1",
		"a = $1 AND b = $2 OR c = $1":       "a = ?1 AND b = ?2 OR c = ?1",
		"VALUES ($10, $2)":                  "VALUES (?10, ?2)",
		"INSERT INTO t VALUES ($1), ($123)": "INSERT INTO t VALUES (?1), (?123)",
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}
