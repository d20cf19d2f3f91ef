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
	for _, c := range cleared {
		f := store.AlertFilter{Kind: c.Kind, LeaseID: c.LeaseID, Team: c.Team, OpenOnly: true, Limit: store.MaxLimit}
		for {
			page, err := tx.Alerts().ListAlerts(ctx, f)
			if err != nil {
				return err
			}
			for _, a := range page.Items {
				if c.Kind != "budget" && (a.GPU != c.GPU || a.Unit != c.Unit) {
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
