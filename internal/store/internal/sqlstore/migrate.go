package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one schema change: a file NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// Sum is the SHA-256 of SQL: a migration changed after it was applied
	// is refused rather than silently skipped.
	Sum string
}

// Migrations reads the *.sql files of dir in fsys, ordered by version.
// Versions must start at 1 and have no gaps or repeats.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b), Sum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: version %d where %d was expected (no gaps, no repeats)", m.Version, i+1)
		}
	}
	return ms, nil
}

// Migrate applies the migrations not yet recorded in schema_migrations,
// in order, all in one transaction (both backends have transactional
// DDL). prelude runs first in that transaction: a lock that keeps
// concurrent migrators apart, then whatever must exist before the
// migrations table (a schema). ts is the type of a time column. Migrate
// refuses a database that records a migration this binary does not have,
// or one whose text changed.
func Migrate(ctx context.Context, b Backend, ms []Migration, prelude []string, ts string) error {
	t, err := b.Begin(ctx, false)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() { _ = t.Rollback(context.WithoutCancel(ctx)) }()
	for _, p := range prelude {
		if _, err := t.Exec(ctx, p); err != nil {
			return fmt.Errorf("migrate: %s: %w", p, err)
		}
	}
	if _, err := t.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		sum TEXT NOT NULL,
		applied_at `+ts+` NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: schema_migrations: %w", err)
	}
	rows, err := t.Query(ctx, `SELECT version, sum FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("migrate: read applied: %w", err)
	}
	applied := map[int]string{}
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: read applied: %w", err)
		}
		applied[v] = sum
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: read applied: %w", err)
	}
	for v := range applied {
		if v > len(ms) {
			return fmt.Errorf("migrate: the database is at schema version %d, newer than this binary's %d: %w", v, len(ms), errors.ErrUnsupported)
		}
	}
	for _, m := range ms {
		if sum, ok := applied[m.Version]; ok {
			if sum != m.Sum {
				return fmt.Errorf("migrate: migration %04d_%s changed after it was applied", m.Version, m.Name)
			}
			continue
		}
		if _, err := t.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate: apply %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := t.Exec(ctx, `INSERT INTO schema_migrations (version, name, sum, applied_at) VALUES ($1, $2, $3, $4)`,
			m.Version, m.Name, m.Sum, b.Time(time.Now())); err != nil {
			return fmt.Errorf("migrate: record %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	if err := t.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
