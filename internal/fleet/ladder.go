package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	return lease + "/" + strconv.Itoa(gpu) + "|" + unit
}

// Ladder advances the idle ladder on the latest readings. Each GPU keeps
// its unit's readings over the last IdleWindow in its state; the GPU is
// low while IdleLow says so of that window, and low since the start of
// the first such window. Low for IdleFor raises an alert; NotifyAfter
// later the owner is notified; ActAfter after that the IdleAction is
// taken. Each rung fires once. A GPU whose agent reports no process for ZombieAfter is
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
		from := now.Add(-cfg.IdleWindow)
		s.Window = pushPoint(s.Window, core.UtilPoint{At: r.At, Pct: r.UtilPct}, from)
		if IdleLow(s.Window, now, cfg.IdleWindow, cfg.IdleBurstBP, cfg.IdleUtilPct) {
			if s.LowSince.IsZero() {
				s.LowSince = from
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
			// The reasons are formatted only for a rung that fires: the
			// ladder sees every GPU at every step.
			fire := func(rung Rung, after time.Duration, kind string, text func() string, act IdleAction) {
				if s.Rung < rung && low >= after {
					a := base
					a.Kind, a.Action, a.Reason = kind, act, text()
					alerts = append(alerts, a)
					s.Rung = rung
				}
			}
			fire(RungAlert, cfg.IdleFor, "idle-alert", func() string {
				return fmt.Sprintf("GPU %d of %s under %d%% utilization for %s (unit %s; mean over %s, busiest %s left out)", r.GPU, r.LeaseID, cfg.IdleUtilPct, low.Round(time.Minute), r.Unit, cfg.IdleWindow, burstTime(cfg.IdleWindow, cfg.IdleBurstBP))
			}, "")
			fire(RungNotify, cfg.IdleFor+cfg.NotifyAfter, "idle-notify", func() string {
				return fmt.Sprintf("team %s notified: %s idle on GPU %d of %s for %s", r.Team, r.Unit, r.GPU, r.LeaseID, low.Round(time.Minute))
			}, "")
			fire(RungAct, cfg.IdleFor+cfg.NotifyAfter+cfg.ActAfter, "idle-action", func() string {
				return fmt.Sprintf("%s still idle after %s: policy %q", r.Unit, low.Round(time.Minute), cfg.IdleAction)
			}, cfg.IdleAction)
		}
		next[k] = s
	}
	return next, alerts
}

// Cleared lists the alerts whose condition ended between the ladder's
// states prev and next: a GPU that fired an idle rung and is no longer
// low (or no longer watched: its unit ended or its lease went), and a
// zombie that ended. Each is one per kind the GPU had fired, with the
// GPU's lease, index and unit (not its team), so that whoever keeps
// alerts open can close exactly those.
func Cleared(prev, next map[string]LadderState) []Alert {
	var out []Alert
	for k, p := range prev {
		if p.Rung == RungNone && !p.Zombie {
			continue
		}
		n, ok := next[k]
		lease, gpu, unit, parsed := parseGPUKey(k)
		if !parsed {
			continue
		}
		base := Alert{LeaseID: lease, GPU: gpu, Unit: unit}
		if p.Rung != RungNone && (!ok || n.Rung == RungNone) {
			for r, kind := range []string{RungAlert: "idle-alert", RungNotify: "idle-notify", RungAct: "idle-action"} {
				if kind != "" && Rung(r) <= p.Rung {
					a := base
					a.Kind = kind
					out = append(out, a)
				}
			}
		}
		if p.Zombie && (!ok || !n.Zombie) {
			a := base
			a.Kind = "zombie"
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Alert) int {
		return cmp.Or(cmp.Compare(a.LeaseID, b.LeaseID), cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.Unit, b.Unit), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

// parseGPUKey splits a GPUKey back into its lease, GPU and unit.
func parseGPUKey(k string) (lease string, gpu int, unit string, ok bool) {
	lg, unit, ok := strings.Cut(k, "|")
	if !ok {
		return "", 0, "", false
	}
	i := strings.LastIndexByte(lg, '/')
	if i < 0 {
		return "", 0, "", false
	}
	gpu, err := strconv.Atoi(lg[i+1:])
	if err != nil {
		return "", 0, "", false
	}
	return lg[:i], gpu, unit, true
}

// maxWindowPoints bounds the readings a GPU's window keeps: past it the
// oldest go, and the window is no longer full until time refills it.
const maxWindowPoints = 4096

// pushPoint appends p to the window w (when it is newer than w's last
// point and differs from it) and drops the points wholly before from,
// keeping the last one at or before from: its value holds at the window's
// start. It never writes into w's array, which the previous state owns.
func pushPoint(w []core.UtilPoint, p core.UtilPoint, from time.Time) []core.UtilPoint {
	if n := len(w); n == 0 || p.At.After(w[n-1].At) && p.Pct != w[n-1].Pct {
		w = append(slices.Clip(w), p)
	}
	i := 0
	for i+1 < len(w) && !w[i+1].At.After(from) {
		i++
	}
	w = w[i:]
	if len(w) > maxWindowPoints {
		w = w[len(w)-maxWindowPoints:]
	}
	return w
}

// IdleLow is the idle ladder's rule, one for the live server and the
// simulator: a GPU is low at now when its readings w (oldest first, each
// holding until the next, the last until now) cover the whole window
// (now-window, now] and their time-weighted mean over it, with the
// busiest burstBP basis points of the window's time left out, is under
// thresholdPct. Leaving the busiest time out is the burst tolerance: a
// GPU at 0% with short bursts of work is idle for all its bursts, while a
// GPU at work most of the window is not.
func IdleLow(w []core.UtilPoint, now time.Time, window time.Duration, burstBP, thresholdPct int) bool {
	from := now.Add(-window)
	if len(w) == 0 || window <= 0 || w[0].At.After(from) {
		return false
	}
	type seg struct {
		pct int
		d   time.Duration
	}
	segs := make([]seg, 0, len(w))
	for i, p := range w {
		start, end := p.At, now
		if i+1 < len(w) {
			end = w[i+1].At
		}
		if start.Before(from) {
			start = from
		}
		if end.After(now) {
			end = now
		}
		if end.After(start) {
			segs = append(segs, seg{p.Pct, end.Sub(start)})
		}
	}
	slices.SortStableFunc(segs, func(a, b seg) int { return cmp.Compare(b.pct, a.pct) })
	skip := burstTime(window, burstBP)
	var sum, total int64 // percent × milliseconds, milliseconds
	for _, g := range segs {
		d := g.d
		if skip > 0 {
			cut := min(skip, d)
			skip -= cut
			d -= cut
		}
		ms := d.Milliseconds()
		sum += int64(g.pct) * ms
		total += ms
	}
	return total > 0 && sum < int64(thresholdPct)*total
}

// burstTime is the part of the window the burst tolerance leaves out.
func burstTime(window time.Duration, burstBP int) time.Duration {
	return time.Duration(int64(window) / 10000 * int64(burstBP))
}
