// Package store is where gpufleet keeps what must outlive a process: teams,
// users and their tokens, jobs and the state of each of their units,
// leases from the intent written before a provider is called to their end,
// the append-only audit trail of decisions, GPU samples, alerts and the
// control loop's own counters.
//
// The interfaces are cut by aggregate, each small and about one thing
// (Teams, Users, Tokens, Jobs, Units, Leases, Events, Samples, Alerts,
// Loop); a Store bundles them with Tx, which runs a function over all of
// them atomically so that the loop can persist a tick's decisions and the
// state changes they cause as one. Two backends implement Store: package
// sqlite (the embedded default) and package postgres (for several
// replicas). Package storetest is the conformance suite both must pass;
// behaviour that is not in the suite is not part of the contract.
//
// Conventions every backend keeps:
//   - Errors wrap ErrNotFound or ErrConflict, or are a *core.FieldError
//     naming the field, the value and what is allowed; all carry lowercase
//     context and can be inspected with errors.Is and errors.As.
//   - Money is int64 micro-units, GPU shares int64 milli-GPUs, durations
//     int64 nanoseconds. Times are returned in UTC and kept to the
//     microsecond (the precision of PostgreSQL's timestamptz), so both
//     backends give back the same instants; a zero time is stored as NULL.
//   - Text must be valid UTF-8 without NUL bytes (PostgreSQL cannot store
//     NUL); anything else is stored verbatim and only ever bound as a query
//     parameter, never spliced into SQL.
//   - List methods page with an opaque cursor over an increasing sequence
//     (keyset pagination): pages neither repeat nor skip rows that existed
//     when the listing started, whatever is inserted meanwhile.
//
// store persists core types and rows of its own, and imports only core:
// not the decision packages (engine, sched, fleet, billing, plan), so that
// a change of the engine's working state is not a change of the schema,
// and not api, cmd or a backend. The server's loop turns the engine's
// state into rows and back (internal/server/loadstate.go); the arch test
// enforces this.
package store
