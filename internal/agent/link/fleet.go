package link

import "github.com/gpufleet/gpufleet/internal/fleet"

// FleetReadings turns samples into what fleet.Ladder consumes: one
// reading per job placed on a device, NoProcess set when the GPU source
// lists the device's processes and none is the job's. A sample whose
// utilization is Unknown gives no reading: the ladder would take it for
// idle. Devices without a job give none either: the ladder is about
// allocated GPUs.
//
// Two jobs sharing a GPU give two readings with the same lease and GPU
// index, which fleet.Ladder keys on; it then sees the unit change at each
// step (see the agent's report on shared GPUs).
func FleetReadings(samples []Sample) []fleet.GPUReading {
	var out []fleet.GPUReading
	for _, s := range samples {
		if s.UtilPct == Unknown {
			continue
		}
		for _, j := range s.Jobs {
			out = append(out, fleet.GPUReading{
				LeaseID: s.LeaseID, GPU: s.GPU, Unit: j.Job, Team: j.Team,
				UtilPct: s.UtilPct, At: s.At, NoProcess: j.Processes == 0,
			})
		}
	}
	return out
}
