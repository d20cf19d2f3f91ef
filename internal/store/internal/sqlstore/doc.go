// Package sqlstore implements store.Store once, in plain SQL, for both
// backends: package sqlite and package postgres give it a Backend (their
// connections, how a time is bound, how a driver error is classified) and
// their own migrations, and it does the rest. Queries are written with
// PostgreSQL's numbered placeholders ($1); the SQLite backend rewrites
// them to SQLite's (?1). Every value is bound as a parameter; no value is
// ever spliced into SQL text.
//
// sqlstore imports store and core; it must not import a driver.
package sqlstore
