// Package trace reads the workload traces gpufleet's simulator replays
// and its planner sizes from: Helios and Philly (the DIR-LAB interval form
// and HeliosData's cluster log), Alibaba PAI 2020 job and task tables,
// Alibaba openb (cluster-trace-gpu-v2023, the FGD paper's data: node
// inventory and pods), and a generic CSV; it also generates synthetic
// traces of any size and holds the workload profile — the assumptions a
// trace lacks (tiers, interruptible share, deadlines, checkpoints, start
// and time zone) — that turns a trace into jobs.
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
