package fleet

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// GPUReading is the latest telemetry of one allocated GPU.
type GPUReading struct {
	LeaseID string
	GPU     int
	// Unit is the key of the unit on the GPU; Team its owner.
	Unit, Team string
	UtilPct    int
	At         time.Time
	// NoProcess is set when the agent sees no process on the GPU.
	NoProcess bool
}

// Rung is a step of the idle ladder (core's, which the store keeps).
type Rung = core.Rung

// The rungs: a GPU is fine, then alerted, then its owner notified, then
// acted on.
const (
	RungNone   = core.RungNone
	RungAlert  = core.RungAlert
	RungNotify = core.RungNotify
	RungAct    = core.RungAct
)

// LadderState is what the ladder remembers of one GPU between steps
// (core's, which the store keeps).
type LadderState = core.LadderState

// Alert is one event of the ladder, with its reason.
type Alert struct {
	Kind    string // idle-alert, idle-notify, idle-action, zombie
	LeaseID string
	GPU     int
	Unit    string
	Team    string
	Action  IdleAction
	Reason  string
}

// GPUKey names one unit's use of one GPU in ladder state: several units
// sharing a GPU each have their own ladder.
func GPUKey(lease string, gpu int, unit string) string {
	return fmt.Sprintf("%s/%d|%s", lease, gpu, unit)
}

// Ladder advances the idle ladder on the latest readings. A GPU under
// IdleUtilPct continuously for IdleFor raises an alert; NotifyAfter later
// the owner is notified; ActAfter after that the IdleAction is taken. Each
// rung fires once. A GPU whose agent reports no process for ZombieAfter is
// a zombie. It returns the new state and the alerts of this step.
func Ladder(now time.Time, readings []GPUReading, prev map[string]LadderState, cfg Config) (map[string]LadderState, []Alert) {
	cfg = cfg.Defaults()
	next := make(map[string]LadderState, len(readings))
	var alerts []Alert
	for _, r := range readings {
		k := GPUKey(r.LeaseID, r.GPU, r.Unit)
		s := prev[k]
		if s.Unit != r.Unit {
			s = LadderState{Unit: r.Unit} // a new unit starts a new ladder
		}
		if r.UtilPct < cfg.IdleUtilPct {
			if s.LowSince.IsZero() {
				s.LowSince = r.At
			}
		} else {
			s.LowSince, s.Rung = time.Time{}, RungNone
		}
		if r.NoProcess {
			if s.NoProcSince.IsZero() {
				s.NoProcSince = r.At
			}
		} else {
			s.NoProcSince, s.Zombie = time.Time{}, false
		}
		base := Alert{LeaseID: r.LeaseID, GPU: r.GPU, Unit: r.Unit, Team: r.Team}
		if !s.NoProcSince.IsZero() && now.Sub(s.NoProcSince) >= cfg.ZombieAfter && !s.Zombie {
			a := base
			a.Kind, a.Action = "zombie", IdleStop
			a.Reason = fmt.Sprintf("GPU %d of %s holds %s but its agent has seen no process for %s: zombie, stopping it and releasing the GPU", r.GPU, r.LeaseID, r.Unit, now.Sub(s.NoProcSince).Round(time.Minute))
			alerts = append(alerts, a)
			s.Zombie = true
		}
		if !s.LowSince.IsZero() && !s.Zombie { // a zombie is being stopped: no idle rungs on top
			low := now.Sub(s.LowSince)
			fire := func(rung Rung, after time.Duration, kind, text string, act IdleAction) {
				if s.Rung < rung && low >= after {
					a := base
					a.Kind, a.Action, a.Reason = kind, act, text
					alerts = append(alerts, a)
					s.Rung = rung
				}
			}
			fire(RungAlert, cfg.IdleFor, "idle-alert", fmt.Sprintf("GPU %d of %s under %d%% utilization for %s (unit %s)", r.GPU, r.LeaseID, cfg.IdleUtilPct, low.Round(time.Minute), r.Unit), "")
			fire(RungNotify, cfg.IdleFor+cfg.NotifyAfter, "idle-notify", fmt.Sprintf("team %s notified: %s idle on GPU %d of %s for %s", r.Team, r.Unit, r.GPU, r.LeaseID, low.Round(time.Minute)), "")
			fire(RungAct, cfg.IdleFor+cfg.NotifyAfter+cfg.ActAfter, "idle-action", fmt.Sprintf("%s still idle after %s: policy %q", r.Unit, low.Round(time.Minute), cfg.IdleAction), cfg.IdleAction)
		}
		next[k] = s
	}
	return next, alerts
}
