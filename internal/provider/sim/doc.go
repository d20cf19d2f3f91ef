// Package sim is gpufleet's simulated provider: an in-process fake cloud
// (Cloud) that implements provider.Provider. Tests, the demo server
// ("gpufleet serve" with no flags) and the discrete-event simulator all rent
// from it, so the code that acquires and releases machines is exercised the
// same way everywhere.
//
// A Cloud rents the offers of a catalog. Each machine is provisioning from
// its launch until a drawn provisioning delay has passed, then ready, or
// failed with a configured probability. Spot machines are taken back
// either at random, as a Poisson process at the rate of the plan's reclaim
// model (core.ReclaimModel.MonthlyRateBP), or when an availability series
// (ParseAvailability) says their offer is withdrawn; either way a reclaim
// notice comes first, its lead time the plan's NoticeSeconds unless
// configured. Offers may have a limit on concurrent machines, past which
// Acquire fails with provider.ErrCapacity.
//
// Machines are named sim-000001 and on in acquisition order, or
// sim-INCARNATION-000001 with Config.Incarnation set: a live server sets
// a new incarnation at each start, as its machines die with the process
// while the store keeps their leases.
//
// Everything is deterministic per seed: randomness comes only from the
// math/rand/v2 source in Config, time only from the clock in Config (the
// launch time of Acquire) and the now given to Poll. The simulator passes a
// clock.Manual and jumps from one NextEventAt to the next.
//
// The package must not do network or file I/O, log, or read the wall
// clock: it imports no os, net, log or database package, and no
// math/rand (v1) global state. The availability series is parsed from an
// io.Reader; opening the file is the caller's job. It imports core, clock
// and provider of ours, and not pricing (which reads files): pass a
// catalog's Offers.
package sim
