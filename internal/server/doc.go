// Package server runs gpufleet live: the control loop that turns the
// store's jobs into engine decisions and the decisions into provider
// calls, restart-safe, and the wiring of the loop with the API.
//
// Each tick the loop loads the engine state from the store (jobs
// submitted through the API are there as pending units), feeds it the
// provider's events, calls engine.Step, and writes the decisions as
// events with their reasons, the units, the leases (every new lease as an
// intent in state requested, its id as the client token) and the loop
// state in one transaction, before any provider call. Only then does it
// act: Acquire for every lease still requested (idempotent by client
// token, so a retry or a restart never rents twice) and Release for the
// leases it released. On start it reconciles the store's leases with the
// provider's list: machines the store lacks are adopted, machines the
// provider no longer has are marked failed, machines of released leases
// are released again.
//
// Until node agents report exit status, a running unit with an
// estimated duration is marked succeeded once that much work has run on
// its lease: the sim provider's stand-in for a job's exit.
package server
