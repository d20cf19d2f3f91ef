package api

import (
	"context"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/postgres/pgtest"
)

// pgStore opens a fresh PostgreSQL schema, dropped when t ends.
// PostgreSQL being down is a failure: CI starts it.
func pgStore(t testing.TB) store.Store {
	t.Helper()
	dsn, schema := pgtest.Schema(t, "gpufleet_api_")
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPostgresIsolationAndIdempotency runs the isolation and idempotent
// submission checks on PostgreSQL.
func TestPostgresIsolationAndIdempotency(t *testing.T) {
	f := newFixtureOn(t, pgStore(t))
	code, b, _ := f.call(t, "member", "GET", "/api/v1/jobs/jb", "")
	if code != 404 {
		t.Errorf("another team's job: %d %s", code, b)
	}
	body := `{"gpus":1}`
	c1, b1, _ := f.call(t, "member", "POST", "/api/v1/jobs", body, "Idempotency-Key", "k")
	c2, b2, _ := f.call(t, "member", "POST", "/api/v1/jobs", body, "Idempotency-Key", "k")
	c3, _, _ := f.call(t, "member", "POST", "/api/v1/jobs", `{"gpus":2}`, "Idempotency-Key", "k")
	if c1 != 201 || c2 != 200 || c3 != 409 || string(b1) != string(b2) {
		t.Errorf("idempotent submit: %d %d %d\n%s\n%s", c1, c2, c3, b1, b2)
	}
}

// BenchmarkSubmitPostgres is BenchmarkSubmit on PostgreSQL:
//
//	go test -run '^$' -bench SubmitPostgres -benchtime 10000x ./internal/api
func BenchmarkSubmitPostgres(b *testing.B) { benchSubmit(b, newFixtureOn(b, pgStore(b))) }
