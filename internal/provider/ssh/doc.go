// Package ssh is a provider.Provider over machines reached by SSH — the
// model of dstack's SSH fleets and SkyPilot's SSH node pools: a list of
// hosts in a config file, each one machine of an offer (named, or matched
// from its GPUs as nvidia-smi reads them), one lease at a time.
//
// Acquire takes a free host of the offer and, in the background, logs in
// (golang.org/x/crypto/ssh; the host key is always checked against a
// known_hosts file, never skipped), reads the GPUs, copies this gpufleet
// binary when the host lacks it, and starts "gpufleet agent" for the
// lease with its join token under systemd-run --user or setsid with a pid
// file. Release stops it: SIGTERM to its process group, a grace, then
// SIGKILL. Poll checks the agents and reports a machine ready when its
// agent runs, failed when it is gone or its host unreachable.
//
// Which lease holds which host is kept in a small state file (JSON,
// written atomically, 0600) so that a restarted server finds its
// machines again; a failed machine is kept, with its reason, until the
// caller releases it. A host that fails a start is passed over for a
// while so that a broken host does not eat every lease.
//
// The package does network and file I/O; it imports core, clock and
// provider of ours, and nothing of the server.
package ssh
