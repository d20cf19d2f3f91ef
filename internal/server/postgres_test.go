package server

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/postgres/pgtest"
)

// pgOpener returns an opener of a fresh PostgreSQL schema, dropped when
// t ends. PostgreSQL being down is a failure: CI starts it.
func pgOpener(t *testing.T) func() (store.Store, error) {
	t.Helper()
	dsn, schema := pgtest.Schema(t, "gpufleet_server_")
	return func() (store.Store, error) {
		return postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	}
}

// TestPostgresRestartAndLeader: the loop on PostgreSQL survives a restart
// with nothing lost or doubled, and only one replica holds the lock.
func TestPostgresRestartAndLeader(t *testing.T) {
	open := pgOpener(t)
	w := newWorldOn(t, open)
	w.submit("j1", core.TierCore, 30*time.Minute)
	w.run(3 * time.Minute)
	w.restart()
	w.submit("j2", core.TierCore, 10*time.Minute)
	w.runEvery(3*time.Hour, time.Minute)
	for _, id := range []string{"j1", "j2"} {
		if j := w.job(id); j.State != core.JobSucceeded {
			t.Errorf("job %s %s", id, j.State)
		}
	}
	if len(w.held()) != 0 || len(w.cloud.Machines()) != len(w.leases()) {
		t.Errorf("machines %d held %d leases %d", len(w.cloud.Machines()), len(w.held()), len(w.leases()))
	}
	replica, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	ctx := context.Background()
	release, ok, err := w.st.(store.Leader).TryLeader(ctx, LeaderKey)
	if err != nil || !ok {
		t.Fatalf("first replica: %v %v", ok, err)
	}
	if _, ok, err := replica.(store.Leader).TryLeader(ctx, LeaderKey); err != nil || ok {
		t.Fatalf("second replica leads too: %v %v", ok, err)
	}
	release()
	r2, ok, err := replica.(store.Leader).TryLeader(ctx, LeaderKey)
	if err != nil || !ok {
		t.Fatalf("second replica after release: %v %v", ok, err)
	}
	r2()
}
