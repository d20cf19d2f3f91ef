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
// Executors: how a unit runs on a machine and how its end is known. On
// a lease whose machine has an agent (agents.go) the unit is dispatched
// to that agent as a run command, queued in the store in the tick's own
// transaction, and the agent's exit report decides success or failure;
// a job without a command runs "sleep" for its estimated duration as a
// real process, with a unit.sleep event saying so. A reclaim notice on
// such a lease sends the checkpoint command; a unit the step stops gets
// the stop command (kill when its machine is gone or its job cancelled).
// An agent silent past AgentConfig.SuspectAfter is suspect, past
// DownAfter down: its lease is marked failed and its units go back to the
// queue from their last checkpoints. A run an agent still reports that is
// no longer its unit's (requeued while the agent was partitioned) is
// killed, so the unit never runs twice. AgentPool is the static provider:
// machines are the agents that joined with an offer.
//
// Config.Executor ends the units of leases no agent serves; nil (serve)
// means only agents run units, and a ready machine whose agent has not
// joined within AgentConfig.BootTimeout fails its lease, is released and
// requeues its units. VirtualTime, the simulator's executor, ends a unit
// once its estimated duration has run on the loop's clock (exit 0).
package server
