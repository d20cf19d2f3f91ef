// Package sqlite is the embedded store: one SQLite file (modernc.org/sqlite,
// pure Go, no cgo) in WAL mode, with a busy timeout and foreign keys on.
// All writes go through one connection, so writers queue in the process
// instead of meeting "database is locked"; reads use a pool of read-only
// connections, which WAL lets run beside the writer.
//
// Times are INTEGER unix microseconds in UTC — the precision PostgreSQL
// keeps, so both backends return the same instants — and NULL for none.
// The schema is in migrations/, embedded and applied in order on Open.
//
// By default synchronous=NORMAL: a committed transaction survives the
// process being killed (kill -9), but the last few may be lost to a power
// failure; Options.Durable asks for synchronous=FULL.
//
// sqlite imports store and its shared SQL implementation; nothing of ours
// imports it but cmd and tests.
package sqlite
