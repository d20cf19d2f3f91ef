// Package storetest is the conformance suite every store backend must
// pass: one Run, called from each backend's tests, so that SQLite and
// PostgreSQL are held to exactly the same contract. Behaviour the suite
// does not check is not part of the contract.
//
// storetest imports store, core and the engine's types (to check that
// what the loop keeps survives a restart field for field); it must not
// import a backend.
package storetest
