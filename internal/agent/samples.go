package agent

import (
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/agent/runner"
)

// PGIDFunc returns the process group of a process, and whether it could
// tell (the process may have gone).
type PGIDFunc func(pid int) (int, bool)

// Getpgid is the real PGIDFunc. GPU sources report host pids, which is
// what it reads: the agent must run in the host's pid namespace.
func Getpgid(pid int) (int, bool) {
	pg, err := syscall.Getpgid(pid)
	return pg, err == nil
}

// Samples turns one round of readings into link samples stamped at, each
// listing the running jobs placed on its device and how many of the
// device's processes belong to each job's process group. A job names its
// devices as CUDA_VISIBLE_DEVICES does: an index names a physical GPU, a
// UUID a GPU or a MIG device.
func Samples(leaseID string, at time.Time, readings []gpu.Reading, jobs []runner.Proc, pgidOf PGIDFunc) []link.Sample {
	if pgidOf == nil {
		pgidOf = Getpgid
	}
	out := make([]link.Sample, 0, len(readings))
	for _, r := range readings {
		s := link.Sample{
			LeaseID: leaseID, GPU: r.Index, UUID: r.UUID, Model: r.Name, At: at,
			MIG: r.MIG, ParentUUID: r.ParentUUID, MIGIndex: r.MIGIndex,
			UtilPct: r.UtilPct, MemUsedMiB: r.MemUsedMiB, MemTotalMiB: r.MemTotalMiB, PowerW: r.PowerW, TempC: r.TempC,
			Processes: link.Unknown,
		}
		if r.ProcessesKnown {
			s.Processes = len(r.Processes)
		}
		for _, j := range jobs {
			if !placedOn(j.GPUs, r) {
				continue
			}
			on := link.JobOnGPU{Job: j.ID, Team: j.Team, Processes: link.Unknown}
			if r.ProcessesKnown {
				on.Processes = 0
				for _, p := range r.Processes {
					if pg, ok := pgidOf(p.PID); ok && pg == j.PGID {
						on.Processes++
					}
				}
			}
			s.Jobs = append(s.Jobs, on)
		}
		out = append(out, s)
	}
	return out
}

// placedOn reports whether a job's CUDA_VISIBLE_DEVICES entries name r.
func placedOn(devices []string, r gpu.Reading) bool {
	if r.UUID != "" && slices.Contains(devices, r.UUID) {
		return true
	}
	return !r.MIG && slices.Contains(devices, strconv.Itoa(r.Index))
}
