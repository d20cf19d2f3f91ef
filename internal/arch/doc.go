// Package arch holds no code, only the test that enforces gpufleet's
// import rules: core imports nothing of ours, and the decision packages
// (sched, fleet, billing, plan, engine) do no I/O — no net, no database,
// no os, no file system — so that the live server and the simulator can
// share them and every decision can be replayed.
package arch
