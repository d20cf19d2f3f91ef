// Package trace reads the workload traces gpufleet's simulator replays:
// for now the Alibaba openb GPU-sharing trace (cluster-trace-gpu-v2023,
// the FGD paper's data) — its node inventory and its pod list. Helios,
// Philly, Alibaba PAI and a generic CSV will join it here.
//
// A reader turns a file into plain records and nothing more: it does not
// decide what a record means for scheduling (that is the simulator's job)
// and it never panics on bad input — every problem comes back as a
// *ParseError naming the file, line, column and value.
//
// trace may read files (it is the I/O edge of the simulator), but it must
// not import the decision packages (sched, fleet, billing, plan, engine) or
// the simulator: they depend on it, not the other way round.
package trace
