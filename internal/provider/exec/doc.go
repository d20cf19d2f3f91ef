// Package exec is a provider.Provider that rents machines by running the
// user's own scripts — a cloud CLI, an IDC's API, a ticket system —
// with one JSON object on stdin and one on stdout per call. The protocol
// is in docs/exec-provider.md; examples/exec-provider/provider.sh is a
// complete script that keeps its machines in a directory.
//
// A script is untrusted output as far as the server is concerned: every
// call has a timeout that kills the script's whole process group, output
// is capped, and anything that is not exactly the protocol's JSON is an
// error that names the script, the operation and what was wrong, so the
// control loop retries (with the same client token) instead of acting on
// garbage.
package exec
