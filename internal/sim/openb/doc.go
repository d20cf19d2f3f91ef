// Package openb replays the Alibaba openb GPU-sharing trace the way the FGD
// paper's artifact (hkust-adsl/kubernetes-scheduler-simulator) does, to
// measure how well a placement policy avoids GPU fragmentation:
//
//   - the cluster is the node list (the artifact uses the GPU nodes);
//   - the pods, sorted by name, are shuffled with the seed (math/rand, as
//     the artifact's Go does, so a seed gives the artifact's order), then
//     pruned or topped up with random copies until their total GPU
//     request reaches the inflation ratio × the cluster's GPU capacity
//     (the artifact's workloadTuningConfig, 1.3 in the paper);
//   - they arrive in that order and never leave; a pod that fits nowhere
//     stays unallocated;
//   - the result is the GPU allocation ratio when everything has arrived,
//     the GPUs left unallocated, and the curve of both (and of
//     fragmentation) after each 1% of capacity has arrived.
//
// Placement decisions are made by internal/sched/placement's policies;
// free capacity changes through internal/capacity and fragmentation is
// placement.FragMeter's, the same as in the live scheduler and the
// engine. A run is a pure function of its inputs and its
// seed. The package reads no files (the caller hands it parsed records
// from internal/trace) and must not import cmd/ or anything that does I/O
// beyond that.
package openb
