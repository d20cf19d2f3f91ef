// Package sim is gpufleet's discrete-event simulator: it replays a
// workload through the very engine.Step the server runs, on a virtual
// clock, against the simulated provider, under gpufleet's policy and the
// baselines a user would otherwise pick (static-peak, reactive,
// autostop), and measures cost, paid and allocated GPU-hours, idle share,
// waiting per tier, deadline misses, preemptions and lost work — against
// a lower bound no policy can beat.
//
// A run is deterministic per seed. sim does no I/O of its own: traces and
// catalogs come in parsed, results go out as values.
package sim
