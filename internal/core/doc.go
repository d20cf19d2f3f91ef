// Package core holds gpufleet's domain: money, GPU shares, offers and their
// price plans, leases, teams, jobs, samples and events.
//
// Everything else in gpufleet speaks these types, so core imports nothing of
// ours and only the standard library. Decisions are made in integers: money
// in micro-units of a currency, GPU shares in milli-GPUs, memory in MiB.
package core
