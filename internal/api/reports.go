package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// UsageLineView is one team's line of a usage report (or the idle line).
type UsageLineView struct {
	Team string `json:"team"`
	// Cost is the team's share of the charges incurred in the range.
	Cost              json.Number `json:"cost"`
	AllocatedGPUHours json.Number `json:"allocated_gpu_hours"`
	// SampledGPUHours is the allocated time GPU readings cover and
	// BusyGPUHours that time weighted by measured utilization; both are 0
	// without readings.
	SampledGPUHours json.Number `json:"sampled_gpu_hours"`
	BusyGPUHours    json.Number `json:"busy_gpu_hours"`
}

// UsageReportView is the response of GET /api/v1/reports/usage. Bill,
// PaidGPUHours, Idle and Leases describe the whole fleet and are given to
// admins only; a team role gets its own line and nothing of others.
type UsageReportView struct {
	From         time.Time       `json:"from"`
	To           time.Time       `json:"to"`
	Currency     core.Currency   `json:"currency"`
	Teams        []UsageLineView `json:"teams"`
	Bill         json.Number     `json:"bill,omitempty"`
	PaidGPUHours json.Number     `json:"paid_gpu_hours,omitempty"`
	Idle         *UsageLineView  `json:"idle,omitempty"`
	Leases       int             `json:"leases,omitempty"`
}

// gpuHours renders milli-GPU-seconds as GPU-hours, exactly to the
// millionth.
func gpuHours(ms int64) json.Number { return scaled(ms, 3600*1000) }

// NewUsageLineView renders l.
func NewUsageLineView(l *billing.UsageLine) UsageLineView {
	return UsageLineView{Team: l.Team, Cost: Amount(l.Cost), AllocatedGPUHours: gpuHours(l.AllocatedMilliSeconds),
		SampledGPUHours: gpuHours(l.SampledMilliSeconds), BusyGPUHours: gpuHours(l.BusyMilliSeconds)}
}

// maxReportRange bounds a report's range: the loader reads every lease,
// run and reading in it.
const maxReportRange = 366 * 24 * time.Hour

func (s *Server) usageReport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := PrincipalFrom(r.Context())
	now := s.clock.Now().UTC()
	to, from := now, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if !to.After(from) {
		from = from.AddDate(0, -1, 0) // at a month's first instant: the month before
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := q.Get(tf.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "invalid_argument", tf.name, fmt.Sprintf("%s: %q, want an RFC 3339 time", tf.name, v))
				return
			}
			*tf.dst = t.UTC()
		}
	}
	if !to.After(from) {
		writeError(w, http.StatusBadRequest, "invalid_argument", "to", fmt.Sprintf("to: %s, want a time after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339)))
		return
	}
	if to.Sub(from) > maxReportRange {
		writeError(w, http.StatusBadRequest, "invalid_argument", "to", fmt.Sprintf("to: %s, want at most 366 days after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339)))
		return
	}
	team := q.Get("team")
	if err := store.CheckText("team", team); err != nil {
		writeValidation(w, err)
		return
	}
	if p.Role != store.RoleAdmin {
		if team != "" && team != p.Team {
			writeJSON(w, http.StatusOK, UsageReportView{From: from, To: to, Currency: s.catalog.Currency, Teams: []UsageLineView{}})
			return
		}
		team = p.Team
	}
	in, err := s.loadUsage(r.Context(), from, to, now)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	u, err := billing.UsageReport(in)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := UsageReportView{From: from, To: to, Currency: s.catalog.Currency, Teams: []UsageLineView{}}
	for i := range u.Lines {
		if team == "" || u.Lines[i].Team == team {
			out.Teams = append(out.Teams, NewUsageLineView(&u.Lines[i]))
		}
	}
	if team != "" && len(out.Teams) == 0 {
		out.Teams = append(out.Teams, NewUsageLineView(&billing.UsageLine{Team: team}))
	}
	if p.Role == store.RoleAdmin {
		idle := NewUsageLineView(&u.Idle)
		out.Bill, out.PaidGPUHours, out.Idle, out.Leases = Amount(u.Bill), gpuHours(u.PaidMilliSeconds), &idle, u.Leases
	}
	writeJSON(w, http.StatusOK, out)
}

// loadUsage reads what billing.UsageReport needs for [from, to) from the
// store and the catalog: the leases held in it, the finished runs and the
// runs in progress on them, and the GPU readings.
func (s *Server) loadUsage(ctx context.Context, from, to, now time.Time) (billing.UsageInput, error) {
	in := billing.UsageInput{From: from, To: to, Now: now}
	end := to
	if now.Before(end) {
		end = now
	}
	for cursor := ""; ; {
		page, err := s.store.Leases().ListLeases(ctx, store.LeaseFilter{Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return in, fmt.Errorf("usage: %w", err)
		}
		for _, l := range page.Items {
			if l.Start.IsZero() || !l.Start.Before(end) || (!l.End.IsZero() && !l.End.After(from)) {
				continue
			}
			o, err := s.catalog.Offer(l.OfferID)
			if err != nil {
				return in, fmt.Errorf("usage: lease %s: %w", l.ID, err)
			}
			plan, ok := o.Plan(l.Mode)
			if !ok {
				return in, fmt.Errorf("usage: lease %s: offer %s has no %s plan", l.ID, l.OfferID, l.Mode)
			}
			in.Leases = append(in.Leases, billing.UsageLease{ID: l.ID, Plan: plan, GPUs: o.GPUs, SliceMilli: o.SliceMilli, Start: l.Start, End: l.End, Reclaimed: l.State == core.LeaseReclaimed})
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	runs, err := s.store.Events().ListRuns(ctx, store.RunFilter{From: from, To: end})
	if err != nil {
		return in, fmt.Errorf("usage: %w", err)
	}
	for _, r := range runs {
		for _, part := range r.Parts {
			in.Runs = append(in.Runs, billing.UsageRun{Team: r.Team, LeaseID: part.LeaseID, GPUs: part.GPUs, MilliPerGPU: r.MilliPerGPU, From: r.Start, To: r.End})
		}
	}
	live, err := s.store.Units().ListLiveUnits(ctx)
	if err != nil {
		return in, fmt.Errorf("usage: %w", err)
	}
	jobs := map[string]store.Job{}
	for _, u := range live {
		if (u.State != core.JobRunning && u.State != core.JobCheckpointing) || u.Start.IsZero() || !u.Start.Before(end) {
			continue
		}
		j, ok := jobs[u.JobID]
		if !ok {
			if j, err = s.store.Jobs().GetJob(ctx, u.JobID); err != nil {
				return in, fmt.Errorf("usage: unit %s#%d: %w", u.JobID, u.Shard, err)
			}
			jobs[u.JobID] = j
		}
		for _, part := range u.Parts {
			in.Runs = append(in.Runs, billing.UsageRun{Team: j.Team, LeaseID: part.LeaseID, GPUs: part.GPUs, MilliPerGPU: j.Request.MilliPerGPU, From: u.Start})
		}
	}
	if in.Samples, err = s.store.Samples().QuerySamples(ctx, store.SampleFilter{From: from, To: end}); err != nil {
		return in, fmt.Errorf("usage: %w", err)
	}
	return in, nil
}
