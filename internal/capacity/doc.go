// Package capacity is the one place that changes a node's free GPU, GPU
// memory and host capacity: [Take] and its exact inverse [Give], with the
// one memory rule ([GPUMem]) and the fit tests ([GPUFits], [HostFits]) they
// re-validate against. The live scheduler (sched), the engine's view of its
// leases and the openb placement policies (sched/placement) all change
// capacity through it, so that they cannot disagree on what fits.
//
// It imports only core: no decision package may be below it.
package capacity
