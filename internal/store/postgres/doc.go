// Package postgres is the store for scale: PostgreSQL through a pgx
// connection pool, for several server replicas sharing one database. The
// schema lives in the connection's search_path (Options.Schema picks one),
// migrations/ holds it in PostgreSQL's dialect, embedded and applied in
// order on Open under a transaction-scoped advisory lock, so replicas
// starting together migrate once.
//
// Times are TIMESTAMPTZ (microseconds, as the SQLite backend keeps them);
// lists and maps are JSONB. Store.Tx runs serializable and retries
// serialization failures; single operations run read committed with
// statements written to be safe there. TryLeader elects the one replica
// that runs the control loop with a session-level advisory lock, keyed by
// the schema as well, so that deployments sharing a database in their own
// schemas each elect their own.
//
// postgres imports store and its shared SQL implementation; nothing of ours
// imports it but cmd and tests.
package postgres
