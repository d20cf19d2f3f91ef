// Package pgtest gives tests of packages above the store a PostgreSQL
// schema of their own, dropped when the test ends. PostgreSQL being down
// is a failure, never a skip: CI starts it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DSN is the test server: GPUFLEET_TEST_POSTGRES, or the local one.
func DSN() string {
	if dsn := os.Getenv("GPUFLEET_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Schema returns the DSN and a fresh schema name starting with prefix;
// the schema is dropped when t ends.
func Schema(t testing.TB, prefix string) (dsn, schema string) {
	t.Helper()
	dsn = DSN()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema = prefix + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return dsn, schema
}
