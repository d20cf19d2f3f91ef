package fleet

import (
	"fmt"
	"time"
)

// Reclaim is what happens to a unit on a spot machine under a reclaim
// notice: it is told to checkpoint now, requeued when the machine goes,
// and kept off spot when it has been reclaimed too often or its deadline
// is at risk.
type Reclaim struct {
	Unit      string
	LeaseID   string
	ReclaimAt time.Time
	// NoSpot: from now on the unit runs on-demand.
	NoSpot bool
	Reason string
}

// SpotUnit is a unit running on a machine that got a reclaim notice.
type SpotUnit struct {
	Unit     string
	LeaseID  string
	Reclaims int // before this one
	// Remaining is the work left after the checkpoint, Deadline the unit's
	// deadline (zero: none).
	Remaining time.Duration
	Deadline  time.Time
}

// OnReclaimNotice decides, for each unit on a noticed machine, the
// checkpoint-and-requeue and whether it falls back to on-demand: after
// MaxReclaims reclaims, or when the time left before its deadline is less
// than twice the work left plus the provisioning delay (the slack a
// further reclaim would eat: the "Can't Be Late" rule of thumb).
func OnReclaimNotice(now, reclaimAt time.Time, units []SpotUnit, cfg Config) []Reclaim {
	cfg = cfg.Defaults()
	out := make([]Reclaim, 0, len(units))
	for _, u := range units {
		r := Reclaim{Unit: u.Unit, LeaseID: u.LeaseID, ReclaimAt: reclaimAt}
		n := u.Reclaims + 1
		switch {
		case n >= cfg.MaxReclaims:
			r.NoSpot = true
			r.Reason = fmt.Sprintf("reclaim notice for %s (reclaim at %s): checkpoint %s and requeue; reclaim #%d reaches the limit %d, so it falls back to on-demand", u.LeaseID, reclaimAt.UTC().Format(time.RFC3339), u.Unit, n, cfg.MaxReclaims)
		case !u.Deadline.IsZero() && u.Deadline.Sub(now) < 2*u.Remaining+cfg.DefaultDelay:
			r.NoSpot = true
			r.Reason = fmt.Sprintf("reclaim notice for %s: checkpoint %s and requeue; %s left before its deadline for %s of work: too tight for spot, falls back to on-demand", u.LeaseID, u.Unit, u.Deadline.Sub(now).Round(time.Minute), u.Remaining.Round(time.Minute))
		default:
			r.Reason = fmt.Sprintf("reclaim notice for %s (reclaim at %s): checkpoint %s and requeue (reclaim #%d)", u.LeaseID, reclaimAt.UTC().Format(time.RFC3339), u.Unit, n)
		}
		out = append(out, r)
	}
	return out
}
