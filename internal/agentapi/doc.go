// Package agentapi is the server's side of the agent protocol, the
// /api/v1/agent routes node agents call: join and heartbeat, batches of
// samples and events, the commands waiting and their acknowledgement,
// and run logs. The REST API (internal/api) mounts these routes on its
// mux, so the server keeps one address, one /metrics and one OpenAPI
// document; the routes users call about agents (the node listing, a
// job's log) are the REST API's.
//
// Every route takes an agent token; the body names the agent (one token
// may serve a whole fleet, though a token per machine limits what a
// stolen one can do). The wire types are the agent's own (package
// internal/agent/link), so the two sides cannot drift apart.
//
// Records (samples, summaries, events) carry the agent's outbox sequence
// numbers, strictly increasing within an epoch (one spool's life). A
// batch is applied in one transaction with the agent's new high-water
// mark; a record at or below the mark is acknowledged without being
// applied again, so a batch resent after a lost reply is harmless.
//
// It depends on the store, the shared HTTP plumbing (internal/httpapi)
// and the wire types; it must not import internal/api (the REST API
// mounts it, not the other way round), nor the control loop or a
// decision package: what the agents report is the loop's to act on.
package agentapi
