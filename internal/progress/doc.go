// Package progress shows how far long work has come (a simulation per
// policy, the LP bound, a generated trace, a portfolio's solves): one
// line per task, redrawn in place, with done / total, the rate and the
// time left. It draws only on a terminal and when the user has not asked
// for quiet, so that scripts, pipes and logs never see it.
//
// It imports nothing of gpufleet's: any long-running package can report
// through a plain func(done, total int) that a Task satisfies.
package progress
