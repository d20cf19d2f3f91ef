package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// openStore opens the SQLite file or PostgreSQL database db names. A
// PostgreSQL URL may name the schema to keep gpufleet's tables in with
// "schema=NAME" (or "search_path=NAME"), so that several deployments or
// test runs share one database; the schema is created if missing. A
// SQLite file is opened with synchronous=FULL when durable: a commit is
// on disk before the API answers, so an acknowledged job survives power
// loss, not only a crash of the process (synchronous=NORMAL in WAL mode).
// PostgreSQL's commit is durable as the database is configured; log, if
// set, hears when the channel of other replicas' token writes breaks.
func openStore(ctx context.Context, db string, durable bool, log *slog.Logger) (store.Store, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		dsn, schema, err := splitSchema(db)
		if err != nil {
			return nil, err
		}
		o := postgres.Options{Schema: schema}
		if log != nil {
			o.Log = func(msg string) { log.Warn("store: " + msg) }
		}
		st, err := postgres.Open(ctx, dsn, o)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, db, sqlite.Options{Durable: durable})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// splitSchema takes the schema out of a PostgreSQL URL's query: it is
// ours, not a connection parameter for the server.
func splitSchema(db string) (dsn, schema string, err error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", "", &core.FieldError{Field: "--db", Value: "(a postgres URL)", Allowed: "a valid URL: " + err.Error()}
	}
	// Not u.Query(): it drops what it cannot parse, and a schema lost
	// that way would put the tables in the default schema.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", &core.FieldError{Field: "--db", Value: "(the URL's query)", Allowed: "a query of key=value pairs joined by & (" + err.Error() + ")"}
	}
	for _, key := range []string{"schema", "search_path"} {
		v := q.Get(key)
		if v == "" {
			continue
		}
		if schema != "" && v != schema {
			return "", "", &core.FieldError{Field: "--db " + key, Value: v, Allowed: fmt.Sprintf("the same schema as %q, or only one of schema and search_path", schema)}
		}
		if strings.ContainsAny(v, ", ") {
			return "", "", &core.FieldError{Field: "--db " + key, Value: v, Allowed: "one schema name (gpufleet keeps all its tables in one schema)"}
		}
		schema = v
		q.Del(key)
	}
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}
