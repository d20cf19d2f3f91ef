// Package link is the agent's side of its connection to the server: what
// goes over it (Record, Sample, Summary, Heartbeat, Command), the Uplink
// interface a transport implements, and the Loop that keeps the outbox
// draining — heartbeats, commands, samples and events in order, with
// exponential backoff and full jitter while the server is away.
//
// The contract a server implements (the in-tree fake in link/fake is the
// reference): records carry the agent's sequence numbers, strictly
// increasing across SendSamples and SendEvents; the server applies each
// call's batch atomically and acknowledges, without applying again, any
// record whose Seq is not above the highest it has applied — a batch
// whose reply was lost is sent again. A gap in the numbers is a span the
// agent summarised: a Summary record covers it.
//
// HTTP is the transport: the Uplink (and LogSender) over the server's
// agent API, /api/v1/agent/…, with an agent token, a timeout on every
// request, and errors that name the request and what the server said.
//
// Package link must not import the agent's runner, spool or gpu packages,
// nor the server's, nor a decision package (engine, sched, fleet, billing,
// plan): the wire types are core's and its own; server.FleetReadings turns
// them into the idle ladder's input.
package link
