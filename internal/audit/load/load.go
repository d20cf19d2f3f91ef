// Package load reads an audit's input from a store: the leases held in
// the range, the finished runs and the runs in progress on them, their
// jobs, the GPU readings and the alerts. The CLI's report audit and the
// API's /api/v1/reports/audit both call [Input], so they audit the same
// data the same way.
package load

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Query says which audit to load for.
type Query struct {
	From, To time.Time
	// Now is when the data is read; open leases and runs count up to it.
	Now      time.Time
	Location *time.Location
	Period   audit.PeriodKind
	// Team restricts the report (not the reading: idle capacity and
	// allocation need every team's use) to one team.
	Team   string
	Config audit.Config
}

// Input reads what an audit of q needs from st, pricing leases with
// offers (the catalog's, in currency).
func Input(ctx context.Context, st store.Store, offers []core.Offer, currency core.Currency, q Query) (audit.Input, error) {
	in := audit.Input{From: q.From, To: q.To, Now: q.Now, Location: q.Location, Period: q.Period, Team: q.Team, Currency: currency,
		Offers: offers, Config: q.Config}
	end := q.To
	if !q.Now.IsZero() && q.Now.Before(end) {
		end = q.Now
	}
	if !end.After(q.From) {
		return in, nil // nothing happened yet in the range
	}
	leases := map[string]bool{}
	for cursor := ""; ; {
		page, err := st.Leases().ListLeases(ctx, store.LeaseFilter{Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return in, fmt.Errorf("audit: leases: %w", err)
		}
		for _, l := range page.Items {
			if l.Start.IsZero() || !l.Start.Before(end) || (!l.End.IsZero() && !l.End.After(q.From)) {
				continue
			}
			leases[l.ID] = true
			in.Leases = append(in.Leases, audit.Lease{ID: l.ID, OfferID: l.OfferID, Mode: l.Mode, Start: l.Start, End: l.End, Reclaimed: l.State == core.LeaseReclaimed, Earlier: l.Earlier})
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	runs, err := st.Events().ListRuns(ctx, store.RunFilter{From: q.From, To: end})
	if err != nil {
		return in, fmt.Errorf("audit: runs: %w", err)
	}
	if len(runs) >= store.MaxRuns {
		return in, &core.FieldError{Field: "from/to", Value: q.From.Format(time.RFC3339) + "/" + q.To.Format(time.RFC3339), Allowed: fmt.Sprintf("a range with fewer than %d finished runs", store.MaxRuns)}
	}
	jobs := map[string]bool{}
	needJob := func(id string) { jobs[id] = true }
	for _, r := range runs {
		for _, p := range r.Parts {
			if !leases[p.LeaseID] {
				continue // a run on a lease that was never billed
			}
			in.Runs = append(in.Runs, audit.Run{JobID: r.JobID, Unit: unitKey(r.JobID, r.Shard), LeaseID: p.LeaseID, GPUs: p.GPUs, Milli: r.MilliPerGPU, From: r.Start, To: r.End})
			needJob(r.JobID)
		}
	}
	live, err := st.Units().ListLiveUnits(ctx)
	if err != nil {
		return in, fmt.Errorf("audit: units: %w", err)
	}
	var open []store.Unit
	for _, u := range live {
		if (u.State != core.JobRunning && u.State != core.JobCheckpointing) || u.Start.IsZero() || !u.Start.Before(end) {
			continue
		}
		open = append(open, u)
		needJob(u.JobID)
	}
	byID := map[string]*core.Job{}
	for id := range jobs {
		j, err := st.Jobs().GetJob(ctx, id)
		if err != nil {
			return in, fmt.Errorf("audit: job %s: %w", id, err)
		}
		in.Jobs = append(in.Jobs, j.Job)
		byID[id] = &in.Jobs[len(in.Jobs)-1]
	}
	for _, u := range open {
		j := byID[u.JobID]
		for _, p := range u.Parts {
			if !leases[p.LeaseID] {
				continue
			}
			in.Runs = append(in.Runs, audit.Run{JobID: u.JobID, Unit: u.Key(max(j.Shards, 1)), LeaseID: p.LeaseID, GPUs: p.GPUs, Milli: j.Request.MilliPerGPU, From: u.Start})
		}
	}
	for _, l := range in.Leases {
		ss, err := samples(ctx, st, l.ID, q.From, end)
		if err != nil {
			return in, err
		}
		in.Samples = append(in.Samples, ss...)
	}
	for cursor := ""; ; {
		page, err := st.Alerts().ListAlerts(ctx, store.AlertFilter{Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return in, fmt.Errorf("audit: alerts: %w", err)
		}
		for _, a := range page.Items {
			if a.Raised.Before(q.From) || !a.Raised.Before(q.To) {
				continue
			}
			in.Alerts = append(in.Alerts, audit.Alert{Kind: a.Kind, LeaseID: a.LeaseID, GPU: a.GPU, Unit: a.Unit, Team: a.Team, Raised: a.Raised, Resolved: a.Resolved})
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	return in, nil
}

func unitKey(job string, shard int) string {
	if shard == 0 {
		return job
	}
	return fmt.Sprintf("%s#%d", job, shard)
}

// samples reads one lease's readings in [from, to), in batches of at most
// store.MaxSamples: a batch that is full is cut before its last instant,
// and the next starts there.
func samples(ctx context.Context, st store.Store, lease string, from, to time.Time) ([]core.Sample, error) {
	var out []core.Sample
	for cur := from; cur.Before(to); {
		batch, err := st.Samples().QuerySamples(ctx, store.SampleFilter{LeaseID: lease, From: cur, To: to})
		if err != nil {
			return nil, fmt.Errorf("audit: samples of %s: %w", lease, err)
		}
		if len(batch) < store.MaxSamples {
			return append(out, batch...), nil
		}
		last := batch[len(batch)-1].At
		if !last.After(cur) {
			return nil, fmt.Errorf("audit: samples of %s: more than %d readings at %s", lease, store.MaxSamples, last.Format(time.RFC3339Nano))
		}
		for _, s := range batch {
			if s.At.Before(last) {
				out = append(out, s)
			}
		}
		cur = last
	}
	return out, nil
}
