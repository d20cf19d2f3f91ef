package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	auditing "github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/audit/load"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/report"
	"github.com/gpufleet/gpufleet/internal/store"
)

// auditRoutes serve the audit reports of package audit.
func (s *Server) auditRoutes() []httpapi.Route {
	return []httpapi.Route{
		{Pattern: "GET /api/v1/reports/audit", Summary: "The audit of [from, to) by calendar month or week (period, tz): paid, allocated and busy GPU-hours, cost and idle cost per team, GPU model and job, zombies, alerts, and right-sizing recommendations with their savings and evidence; format json, csv or html. A team role gets its own team's audit only.", Handler: s.auditReport, Roles: readers},
	}
}

func init() {
	e := apiDoc["GET /api/v1/reports/audit"]
	e.response, e.params = report.AuditView{}, []string{"from", "to", "team", "period", "tz", "format"}
	apiDoc["GET /api/v1/reports/audit"] = e
}

// auditFormats are the formats of GET /api/v1/reports/audit.
var auditFormats = []string{"json", "csv", "html"}

// auditReport serves GET /api/v1/reports/audit. from and to default to
// this month so far; they take a month (2026-11), a date or an RFC 3339
// time, read in tz (default UTC).
func (s *Server) auditReport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
	bad := func(err error) { httpapi.WriteValidation(w, err) }
	format := strings.ToLower(q.Get("format"))
	if format == "" {
		format = "json"
	}
	if !slices.Contains(auditFormats, format) {
		bad(&core.FieldError{Field: "format", Value: q.Get("format"), Allowed: "one of json, csv, html"})
		return
	}
	loc, err := auditing.ParseLocation(q.Get("tz"))
	if err != nil {
		bad(err)
		return
	}
	kind, err := auditing.ParsePeriodKind(q.Get("period"))
	if err != nil {
		bad(err)
		return
	}
	now := s.clock.Now()
	ln := now.In(loc)
	from, to := time.Date(ln.Year(), ln.Month(), 1, 0, 0, 0, 0, loc), now
	if !to.After(from) {
		from = from.AddDate(0, -1, 0)
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := q.Get(tf.name); v != "" {
			if *tf.dst, err = auditing.ParseTime(tf.name, v, loc); err != nil {
				bad(err)
				return
			}
		}
	}
	if !to.After(from) {
		bad(&core.FieldError{Field: "to", Value: to.Format(time.RFC3339), Allowed: "a time after from " + from.Format(time.RFC3339)})
		return
	}
	if to.Sub(from) > auditing.MaxRange {
		bad(&core.FieldError{Field: "to", Value: to.Format(time.RFC3339), Allowed: "at most 366 days after from " + from.Format(time.RFC3339)})
		return
	}
	team := q.Get("team")
	if p.Role != store.RoleAdmin {
		if team != "" && team != p.Team {
			httpapi.WriteError(w, http.StatusForbidden, "forbidden", "team", fmt.Sprintf("team: a %s of team %s may audit its own team only", p.Role, p.Team))
			return
		}
		team = p.Team
	}
	in, err := load.Input(r.Context(), s.store, s.catalog.Offers, s.catalog.Currency, load.Query{From: from, To: to, Now: now, Location: loc, Period: kind, Team: team})
	if err != nil {
		var fe *core.FieldError
		if errors.As(err, &fe) {
			bad(err)
			return
		}
		s.internal(w, r, err)
		return
	}
	rep, err := auditing.Audit(in)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	var b bytes.Buffer
	name := fmt.Sprintf("audit-%s-%s", from.Format("2006-01-02"), to.Format("2006-01-02"))
	if team != "" {
		name += "-" + team
	}
	switch format {
	case "json":
		httpapi.WriteJSON(w, http.StatusOK, report.NewAuditView(rep))
		return
	case "csv":
		err = report.WriteAuditCSV(&b, rep)
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.csv"`)
	case "html":
		err = report.WriteAuditHTML(&b, rep)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}
