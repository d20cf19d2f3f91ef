// Package placement decides where one request goes: which node, and which
// of its GPUs. It holds the filters every scheduler shares (is the model
// allowed, is there host CPU and memory, are there enough GPUs with enough
// free share), [Apply] and its exact inverse [Remove], which change a
// node's free capacity through package capacity (the one place that does,
// shared with the live scheduler and the engine), and the placement policies
// behind a one-method interface ([Policy]):
//
//   - the baselines of the FGD paper (Weng et al., "Beware of
//     Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
//     Gradient Descent", USENIX ATC '23), as its simulator defines them:
//     Random, DotProd, GpuClustering, GpuPacking, BestFit and FGD;
//   - gpufleet's default policy, which must do at least as well as FGD.
//
// FGD scores a node by how much a placement increases its fragmentation
// measured against a target workload ([Workload]: the popular pod types of
// a trace with their counts). Each policy keeps what it needs between calls
// (per-node fragmentation, per-request-type scores) and recomputes it only
// for the nodes whose free capacity changed, so a policy value serves one
// sequence of decisions over one set of nodes; do not share one between
// goroutines.
//
// Scores are int64. Where a baseline is defined in floating point by the
// simulator (BestFit, DotProd, FGD's sigmoid) it is evaluated the same way
// and truncated to an integer exactly where the simulator truncates,
// because the truncation decides which nodes tie. A tie goes to the first
// node offered — the artifact's scheduler does that over a seeded shuffle
// of the nodes, and it matters: it packs — or, given a seeded [Rand], to
// one drawn uniformly, as stock Kubernetes does.
//
// Like the rest of internal/sched this package is pure: no os, net, io/fs,
// database/sql, log, no wall clock and no global randomness — state and a
// seeded random source in, a decision out. internal/arch enforces it.
package placement
