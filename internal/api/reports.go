package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/store"
)

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

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

// NewUsageLineView renders l.
func NewUsageLineView(l *billing.UsageLine) UsageLineView {
	return UsageLineView{Team: l.Team, Cost: readmodel.Amount(l.Cost), AllocatedGPUHours: readmodel.GPUHours(l.AllocatedMilliSeconds),
		SampledGPUHours: readmodel.GPUHours(l.SampledMilliSeconds), BusyGPUHours: readmodel.GPUHours(l.BusyMilliSeconds)}
}

// maxReportRange bounds a report's range: the loader reads every lease,
// run and reading in it.
const maxReportRange = 366 * 24 * time.Hour

func (s *Server) usageReport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
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
				httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", tf.name, fmt.Sprintf("%s: %q, want an RFC 3339 time", tf.name, v))
				return
			}
			*tf.dst = t.UTC()
		}
	}
	if !to.After(from) {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "to", fmt.Sprintf("to: %s, want a time after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339)))
		return
	}
	if to.Sub(from) > maxReportRange {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "to", fmt.Sprintf("to: %s, want at most 366 days after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339)))
		return
	}
	team := q.Get("team")
	if err := store.CheckText("team", team); err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	if p.Role != store.RoleAdmin {
		if team != "" && team != p.Team {
			httpapi.WriteJSON(w, http.StatusOK, UsageReportView{From: from, To: to, Currency: s.catalog.Currency, Teams: []UsageLineView{}})
			return
		}
		team = p.Team
	}
	in, err := LoadUsage(r.Context(), s.store, s.catalog, from, to, now)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	if len(in.Leases) > 0 {
		if in.Samples, err = s.store.Samples().QuerySamples(r.Context(), store.SampleFilter{From: from, To: minTime(to, now)}); err != nil {
			s.internal(w, r, err)
			return
		}
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
		out.Bill, out.PaidGPUHours, out.Idle, out.Leases = readmodel.Amount(u.Bill), readmodel.GPUHours(u.PaidMilliSeconds), &idle, u.Leases
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// LoadUsage reads what billing.UsageReport needs for [from, to) as of now
// from a store (or one of its transactions) and the catalog: it is
// ledger.Load, which the dashboard's overview and the control loop's
// budgets read the month's spend with too, so all three agree.
func LoadUsage(ctx context.Context, a store.Aggregates, cat *pricing.Catalog, from, to, now time.Time) (billing.UsageInput, error) {
	return ledger.Load(ctx, a, cat, from, to, now)
}
