package server

import (
	"context"
	"time"

	fleetpkg "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/store"
)

// keepAlerts stores the step's alerts as open alerts (raising one that is
// open already returns it) and resolves the open alerts whose condition
// the step found ended, in the tick's transaction: the alerts API, the
// dashboard and the audit read what the loop decided, and an alert stays
// open exactly while the ladder or the budget says its condition holds.
func keepAlerts(ctx context.Context, tx store.Tx, raised, cleared []fleetpkg.Alert, now time.Time) error {
	for _, a := range raised {
		if _, _, err := tx.Alerts().RaiseAlert(ctx, store.Alert{Kind: a.Kind, LeaseID: a.LeaseID, GPU: a.GPU, Unit: a.Unit,
			Team: a.Team, Action: string(a.Action), Reason: a.Reason, Raised: now}); err != nil {
			return err
		}
	}
	// The open alerts to close are read once per lease (a lease that ends
	// clears every rung of every GPU at once) and once per budget team.
	type scope struct{ lease, team string }
	ended := map[scope]map[fleetpkg.Alert]bool{}
	for _, c := range cleared {
		sc := scope{lease: c.LeaseID}
		if c.Kind == "budget" {
			sc = scope{team: c.Team}
		}
		if ended[sc] == nil {
			ended[sc] = map[fleetpkg.Alert]bool{}
		}
		ended[sc][fleetpkg.Alert{Kind: c.Kind, LeaseID: c.LeaseID, GPU: c.GPU, Unit: c.Unit, Team: c.Team}] = true
	}
	for sc, want := range ended {
		f := store.AlertFilter{LeaseID: sc.lease, Team: sc.team, OpenOnly: true, Limit: store.MaxLimit}
		if sc.team != "" {
			f.Kind = "budget"
		}
		for {
			page, err := tx.Alerts().ListAlerts(ctx, f)
			if err != nil {
				return err
			}
			for _, a := range page.Items {
				k := fleetpkg.Alert{Kind: a.Kind, LeaseID: a.LeaseID, GPU: a.GPU, Unit: a.Unit}
				if a.Kind == "budget" {
					k = fleetpkg.Alert{Kind: "budget", Team: a.Team}
				}
				if !want[k] {
					continue
				}
				if err := tx.Alerts().ResolveAlert(ctx, a.ID, now); err != nil {
					return err
				}
			}
			if page.Next == "" {
				break
			}
			f.Cursor = page.Next
		}
	}
	return nil
}
