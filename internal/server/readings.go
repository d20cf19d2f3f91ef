package server

import (
	"github.com/gpufleet/gpufleet/internal/agent/link"
	fleetpkg "github.com/gpufleet/gpufleet/internal/fleet"
)

// FleetReadings turns the agent protocol's samples into what fleet.Ladder
// consumes, as the agent sent them (the agent's zombie tests use it); the
// loop reads the same from the store's samples (agentTick.readings, by
// core.Sample.Procs). It lives on the server's side of the protocol, so
// that the agent and link import no decision package. It gives one
// reading per job placed on a device, NoProcess set when the GPU source
// lists the device's processes and none is the job's. A sample whose
// utilization is Unknown gives no reading: the ladder would take it for
// idle. Devices without a job give none either: the ladder is about
// allocated GPUs.
//
// Two jobs sharing a GPU give two readings with the same lease and GPU
// index, which fleet.Ladder keys on; it then sees the unit change at each
// step (see the agent's report on shared GPUs).
func FleetReadings(samples []link.Sample) []fleetpkg.GPUReading {
	var out []fleetpkg.GPUReading
	for _, s := range samples {
		if s.UtilPct == link.Unknown {
			continue
		}
		for _, j := range s.Jobs {
			out = append(out, fleetpkg.GPUReading{
				LeaseID: s.LeaseID, GPU: s.GPU, Unit: j.Job, Team: j.Team,
				UtilPct: s.UtilPct, At: s.At, NoProcess: j.Processes == 0,
			})
		}
	}
	return out
}
