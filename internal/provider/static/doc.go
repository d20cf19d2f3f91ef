// Package static is the provider of machines gpufleet does not rent by
// the call: machines you own, or rent long-term, declared as a list of
// offers and counts. They are always ready and never reclaimed; Acquire
// hands out a free one and Release returns it to the pool.
//
// Each hand-out is its own lease with its own provider ID
// ("<offer>#<n>@<k>": machine n of the offer, its k-th lease), so that a
// retried Release of an old lease can never free the machine from the
// lease that holds it now.
//
// The package keeps its state in memory only: it must not do network or
// file I/O, log, or read the wall clock (time comes from the injected
// clock and Poll's now). It imports core, clock and provider of ours.
package static
