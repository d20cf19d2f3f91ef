package audittest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Seed writes in's data into st the way the control loop does: the teams
// of its jobs, the jobs (submitted), the leases (an intent, then ready,
// then released), one unit per job that runs its one run and succeeds (so
// the store records the run), the samples and the alerts. It is for
// tests: every job of in must have exactly one run.
func Seed(ctx context.Context, st store.Store, in audit.Input) error {
	var teams []string
	for _, j := range in.Jobs {
		if !slices.Contains(teams, j.Team) {
			teams = append(teams, j.Team)
		}
	}
	for _, t := range teams {
		if err := st.Teams().CreateTeam(ctx, core.Team{ID: t, Name: t, Weight: 1}); err != nil {
			return fmt.Errorf("seed team %s: %w", t, err)
		}
	}
	for _, j := range in.Jobs {
		j.State = core.JobPending
		if _, _, err := st.Jobs().SubmitJob(ctx, j, ""); err != nil {
			return fmt.Errorf("seed job %s: %w", j.ID, err)
		}
	}
	for _, l := range in.Leases {
		sl := store.Lease{Lease: core.Lease{ID: l.ID, OfferID: l.OfferID, Mode: l.Mode, State: core.LeaseRequested, ClientToken: "ct-" + l.ID}, Requested: l.Start}
		if err := st.Leases().CreateLease(ctx, sl); err != nil {
			return fmt.Errorf("seed lease %s: %w", l.ID, err)
		}
		sl.State, sl.Start, sl.ReadyAt, sl.ProviderID = core.LeaseReady, l.Start, l.Start, "m-"+l.ID
		if err := st.Leases().UpdateLease(ctx, sl); err != nil {
			return fmt.Errorf("seed lease %s ready: %w", l.ID, err)
		}
		if !l.End.IsZero() {
			sl.State, sl.End = core.LeaseReleased, l.End
			if err := st.Leases().UpdateLease(ctx, sl); err != nil {
				return fmt.Errorf("seed lease %s released: %w", l.ID, err)
			}
		}
	}
	for _, r := range in.Runs {
		u := store.Unit{JobID: r.JobID, State: core.JobRunning, Parts: []store.Part{{LeaseID: r.LeaseID, GPUs: r.GPUs}}, Start: r.From, LastCheckpoint: r.From, Since: r.From}
		if err := st.Units().SaveUnits(ctx, u); err != nil {
			return fmt.Errorf("seed run of %s: %w", r.JobID, err)
		}
		if r.To.IsZero() {
			continue
		}
		u.State, u.Parts, u.End, u.Done = core.JobSucceeded, nil, r.To, r.To.Sub(r.From)
		if err := st.Units().SaveUnits(ctx, u); err != nil {
			return fmt.Errorf("seed end of %s: %w", r.JobID, err)
		}
		if _, err := st.Jobs().TransitionJob(ctx, r.JobID, core.JobSucceeded, r.To); err != nil {
			return fmt.Errorf("seed end of %s: %w", r.JobID, err)
		}
	}
	for i := 0; i < len(in.Samples); i += 1000 {
		if err := st.Samples().InsertSamples(ctx, in.Samples[i:min(i+1000, len(in.Samples))]...); err != nil {
			return fmt.Errorf("seed samples: %w", err)
		}
	}
	for _, a := range in.Alerts {
		sa, _, err := st.Alerts().RaiseAlert(ctx, store.Alert{Kind: a.Kind, LeaseID: a.LeaseID, GPU: a.GPU, Unit: a.Unit, Team: a.Team, Raised: a.Raised, Reason: "seeded"})
		if err != nil {
			return fmt.Errorf("seed alert: %w", err)
		}
		if !a.Resolved.IsZero() {
			if err := st.Alerts().ResolveAlert(ctx, sa.ID, a.Resolved); err != nil {
				return fmt.Errorf("seed alert: %w", err)
			}
		}
	}
	return nil
}

// Clock is a fixed "now" for tests that need one after the workload.
var Clock = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
