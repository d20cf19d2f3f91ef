// Package audit computes gpufleet's periodic audit: for each calendar
// week or month of a range, in a given time zone, and for each team, GPU
// model and job, the paid, allocated and busy GPU-hours, the cost with its
// idle part on its own line, the zombies found and released and the
// alerts; and recommendations, each with the saving it is worth in the
// period (exact, in core.Micros) and the numbers that justify it.
//
// The recommendations are the right-sizing advice of the product brief:
// right-size memory (a smaller GPU model or a share), right-size count
// (fewer GPUs), a GPU-model downgrade, lease changes (the committed base
// the planner of package plan would hold for the observed demand) and
// moving deferrable work off-peak. Thresholds are in [Config], with
// documented defaults. A job gets at most one job-level recommendation,
// the one that saves most; the others are listed as superseded, so no
// saving is counted twice.
//
// Like the decision packages, audit is pure: leases, runs, jobs, samples,
// alerts, the catalog's offers and the range come in as an [Input]; a
// [Report] comes out. It does no I/O and never reads the clock. Package
// load builds an Input from a store; package report renders a Report as
// JSON, CSV and HTML.
package audit
