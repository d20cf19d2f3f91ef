package bound

import "github.com/gpufleet/gpufleet/internal/core"

// Admissible returns the indexes of the offers whose machines can run j:
// hardware it may run on (core.Request.Admits), and enough GPUs for
// j's part of it. A job that one admissible machine holds whole runs on
// one machine (a single-node job: the scheduler never spreads it over
// smaller ones, see sched.MachineShapes); a larger gang is split evenly
// over the fewest machines of the largest admissible size, so each
// machine holds at least ceil(G / ceil(G / largest)) of its G GPUs —
// what a launcher with the same number of processes per node needs. The
// bounds count only these offers, so they bind every policy that runs
// jobs this way; the engine's scheduler and fleet do.
func Admissible(j *core.Job, offers []core.Offer) []int {
	largest := 0
	for i := range offers {
		if fits(j, &offers[i]) {
			largest = max(largest, offers[i].GPUs)
		}
	}
	if largest == 0 {
		return nil
	}
	g := max(j.Request.GPUs, 1)
	machines := (g + largest - 1) / largest
	perMachine := (g + machines - 1) / machines
	var out []int
	for i := range offers {
		if fits(j, &offers[i]) && offers[i].GPUs >= perMachine {
			out = append(out, i)
		}
	}
	return out
}

// fits: hardware j may run on (core's one rule, the scheduler's).
func fits(j *core.Job, o *core.Offer) bool {
	return o.GPUs > 0 && j.Request.Admits(o.Hardware())
}
