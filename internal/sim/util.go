package sim

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// Utilization series in a replay (Config.Util, gpufleet sim --util).
//
// Busy GPU-time: each stretch of a unit's run counts its allocated
// milli-GPUs × the time integral of its job's utilization over the
// stretch (gpuutil.Set.Busy, relative times counting from the unit's
// first start); a job without a series counts as busy all the time it
// holds GPUs, as every job did before series were taken in, and is
// counted in UtilMissingJobs.
//
// The idle ladder: at every step each running unit's GPUs read its job's
// utilization at that instant (gpuutil.Set.At), the readings the server
// takes from its agents, and engine.Step runs the one ladder rule
// (fleet.IdleLow) on them; alerts are counted by kind in IdleAlerts.

// addBusy adds the busy part of u's run over [from, to) to r.
func (r *Result) addBusy(u *engine.Unit, from, to time.Time) {
	secs := int64(to.Sub(from) / time.Second)
	if r.util == nil {
		return
	}
	id := u.Job.ID
	bpms, ok := r.util.Busy(id, r.first[u.Key()], from, from.Add(time.Duration(secs)*time.Second))
	if !ok {
		r.BusyMilliSec += int64(u.Milli()) * secs
		if !r.utilMissing[id] {
			r.utilMissing[id] = true
			r.UtilMissingJobs++
		}
		return
	}
	// basis-point milliseconds → busy milliseconds → milli-GPU-seconds.
	r.BusyMilliSec += int64(u.Milli()) * (bpms / 10000) / 1000
}

// readings sets the state's GPU readings from the utilization series,
// as the server's agents would report them at now.
func (r *run) readings(now time.Time) {
	if r.cfg.Util == nil {
		return
	}
	r.st.Readings = r.st.Readings[:0]
	for _, u := range r.st.Units {
		if u.State != core.JobRunning {
			continue
		}
		bp, ok := r.cfg.Util.At(u.Job.ID, r.first[u.Key()], now)
		if !ok {
			continue
		}
		for _, p := range u.Parts {
			for _, g := range p.GPUs {
				r.st.Readings = append(r.st.Readings, fleet.GPUReading{LeaseID: p.LeaseID, GPU: g, Unit: u.Key(), Team: u.Job.Team, UtilPct: bp / 100, At: now})
			}
		}
	}
}

// countAlerts counts the idle ladder's alerts of a step by kind.
func (r *Result) countAlerts(alerts []fleet.Alert) {
	for _, a := range alerts {
		switch a.Kind {
		case "idle-alert", "idle-notify", "idle-action", "zombie":
			if r.IdleAlerts == nil {
				r.IdleAlerts = map[string]int{}
			}
			r.IdleAlerts[a.Kind]++
		}
	}
}
