package store

import (
	"context"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Alert is a condition someone should look at: an idle or zombie GPU, a
// budget nearly spent. While it is open, raising the same alert again
// (same kind, lease, GPU, unit and team) returns the open one.
type Alert struct {
	// ID is given by the store.
	ID      int64
	Kind    string
	LeaseID string
	GPU     int
	Unit    string
	Team    string
	// Action is what was or will be done (fleet.IdleAction's names).
	Action string
	Reason string
	Raised time.Time
	// Resolved is zero while the alert is open.
	Resolved time.Time
	// Acked is when someone acknowledged it (zero: not yet) and AckedBy
	// who: an acknowledged alert stays open until its condition ends, but
	// the dashboard stops asking for attention.
	Acked   time.Time
	AckedBy string
}

// AlertFilter selects alerts; empty fields match everything.
type AlertFilter struct {
	// ID selects one alert (0: any).
	ID       int64
	Team     string
	Kind     string
	LeaseID  string
	OpenOnly bool
	// Limit is the page size (0: DefaultLimit); Cursor the Next of the
	// previous page.
	Limit  int
	Cursor string
}

// Alerts keeps alerts.
type Alerts interface {
	// RaiseAlert stores a new open alert and returns it with its ID; if
	// the same alert is already open it returns that one and created
	// false.
	RaiseAlert(ctx context.Context, a Alert) (alert Alert, created bool, err error)
	// ResolveAlert closes the alert with id at at; resolving twice keeps
	// the first time.
	ResolveAlert(ctx context.Context, id int64, at time.Time) error
	// AckAlert records that by acknowledged the alert with id at at;
	// acknowledging twice keeps the first.
	AckAlert(ctx context.Context, id int64, by string, at time.Time) error
	// ListAlerts returns a page of the alerts f selects, newest first.
	ListAlerts(ctx context.Context, f AlertFilter) (Page[Alert], error)
}

// ValidateAlert reports the first problem with a.
func ValidateAlert(a *Alert) error {
	if err := CheckID("kind", a.Kind); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"lease", a.LeaseID}, {"unit", a.Unit}, {"team", a.Team}, {"action", a.Action}, {"reason", a.Reason}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	if err := checkNonNeg("gpu", int64(a.GPU)); err != nil {
		return err
	}
	if a.Raised.IsZero() {
		return &core.FieldError{Field: "raised", Value: "", Allowed: "the time the alert was raised"}
	}
	return nil
}
