package main

import (
	"context"
	"strings"

	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// openStore opens the SQLite file or PostgreSQL database db names.
func openStore(ctx context.Context, db string) (store.Store, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		st, err := postgres.Open(ctx, db, postgres.Options{})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	return st, nil
}
