package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/store"
)

// AlertView is the JSON form of an alert.
type AlertView struct {
	ID       int64     `json:"id"`
	Kind     string    `json:"kind"`
	Lease    string    `json:"lease,omitempty"`
	GPU      int       `json:"gpu"`
	Unit     string    `json:"unit,omitempty"`
	Team     string    `json:"team,omitempty"`
	Action   string    `json:"action,omitempty"`
	Reason   string    `json:"reason"`
	Raised   time.Time `json:"raised"`
	Resolved time.Time `json:"resolved"`
	Acked    time.Time `json:"acked"`
	AckedBy  string    `json:"acked_by,omitempty"`
	Open     bool      `json:"open"`
}

// NewAlertView renders a.
func NewAlertView(a *store.Alert) AlertView {
	return AlertView{ID: a.ID, Kind: a.Kind, Lease: a.LeaseID, GPU: a.GPU, Unit: a.Unit, Team: a.Team, Action: a.Action, Reason: a.Reason,
		Raised: a.Raised.UTC(), Resolved: a.Resolved.UTC(), Acked: a.Acked.UTC(), AckedBy: a.AckedBy, Open: a.Resolved.IsZero()}
}

// AlertsPage is the response of GET /api/v1/alerts.
type AlertsPage struct {
	Alerts []AlertView `json:"alerts"`
	Next   string      `json:"next,omitempty"`
}

func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
	f := store.AlertFilter{Team: q.Get("team"), Kind: q.Get("kind"), LeaseID: q.Get("lease"), Cursor: q.Get("cursor")}
	if p.Role != store.RoleAdmin {
		// Fleet-wide alerts (no team) and other teams' are an admin's.
		if f.Team != "" && f.Team != p.Team {
			httpapi.WriteJSON(w, http.StatusOK, AlertsPage{Alerts: []AlertView{}})
			return
		}
		f.Team = p.Team
	}
	switch v := q.Get("open"); v {
	case "", "false":
	case "true":
		f.OpenOnly = true
	default:
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "open", fmt.Sprintf("open: %q, want true or false", v))
		return
	}
	if !parseLimit(w, q.Get("limit"), &f.Limit) {
		return
	}
	page, err := s.store.Alerts().ListAlerts(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	out := AlertsPage{Alerts: []AlertView{}, Next: page.Next}
	for i := range page.Items {
		out.Alerts = append(out.Alerts, NewAlertView(&page.Items[i]))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) ackAlert(w http.ResponseWriter, r *http.Request) {
	p, _ := httpapi.PrincipalFrom(r.Context())
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	notFound := func() {
		httpapi.WriteError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("alert %q not found", raw))
	}
	if err != nil || id < 1 {
		notFound()
		return
	}
	page, err := s.store.Alerts().ListAlerts(r.Context(), store.AlertFilter{ID: id})
	if err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	if len(page.Items) == 0 || (p.Role != store.RoleAdmin && page.Items[0].Team != p.Team) {
		notFound() // another team's alert answers as a missing one
		return
	}
	a := page.Items[0]
	now := s.clock.Now()
	err = s.store.Tx(r.Context(), func(tx store.Tx) error {
		if err := tx.Alerts().AckAlert(r.Context(), id, p.Actor(), now); err != nil {
			return err
		}
		if !a.Acked.IsZero() {
			return nil
		}
		return audit(r, tx, now, "audit.alert_acked", strconv.FormatInt(id, 10), "alert acknowledged through the API",
			map[string]string{"team": a.Team, "alert_kind": a.Kind})
	})
	if err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	if a.Acked.IsZero() {
		a.Acked, a.AckedBy = now, p.Actor()
	}
	httpapi.WriteJSON(w, http.StatusOK, NewAlertView(&a))
}
