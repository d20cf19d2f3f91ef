package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

const alertCols = `id, kind, lease_id, gpu, unit, team_id, action, reason, raised_at, resolved_at, acked_at, acked_by`

func scanAlert(r interface{ Scan(...any) error }) (store.Alert, error) {
	var a store.Alert
	err := r.Scan(&a.ID, &a.Kind, &a.LeaseID, &a.GPU, &a.Unit, &a.Team, &a.Action, &a.Reason, T(&a.Raised), T(&a.Resolved), T(&a.Acked), &a.AckedBy)
	return a, err
}

// RaiseAlert implements store.Alerts.
func (o *ops) RaiseAlert(ctx context.Context, a store.Alert) (store.Alert, bool, error) {
	if err := store.ValidateAlert(&a); err != nil {
		return store.Alert{}, false, fmt.Errorf("raise alert: %w", err)
	}
	if !a.Resolved.IsZero() {
		return store.Alert{}, false, fmt.Errorf("raise alert: %w", &core.FieldError{Field: "resolved", Value: a.Resolved.UTC().Format(time.RFC3339), Allowed: "zero: a new alert is open"})
	}
	a.Raised = store.Micro(a.Raised)
	created := false
	err := o.atomic(ctx, func(q Querier) error {
		err := q.QueryRow(ctx, `INSERT INTO alerts (kind, lease_id, gpu, unit, team_id, action, reason, raised_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (kind, lease_id, gpu, unit, team_id) WHERE resolved_at IS NULL DO NOTHING RETURNING id`,
			a.Kind, a.LeaseID, a.GPU, a.Unit, a.Team, a.Action, a.Reason, o.t(a.Raised)).Scan(&a.ID)
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, ErrNoRows) {
			return o.fail(err, "raise alert %s", a.Kind)
		}
		open, err := scanAlert(q.QueryRow(ctx, `SELECT `+alertCols+` FROM alerts
			WHERE kind = $1 AND lease_id = $2 AND gpu = $3 AND unit = $4 AND team_id = $5 AND resolved_at IS NULL`,
			a.Kind, a.LeaseID, a.GPU, a.Unit, a.Team))
		if err != nil {
			return fmt.Errorf("raise alert %s: open alert: %w", a.Kind, one(err, "alert", a.Kind))
		}
		a = open
		return nil
	})
	if err != nil {
		return store.Alert{}, false, err
	}
	return a, created, nil
}

// ResolveAlert implements store.Alerts.
func (o *ops) ResolveAlert(ctx context.Context, id int64, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("resolve alert %d: %w", id, &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	return o.atomic(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE alerts SET resolved_at = $2 WHERE id = $1 AND resolved_at IS NULL`, id, o.t(at))
		if err != nil {
			return o.fail(err, "resolve alert %d", id)
		}
		if n > 0 {
			return nil
		}
		var x int
		if err := q.QueryRow(ctx, `SELECT 1 FROM alerts WHERE id = $1`, id).Scan(&x); err != nil {
			return fmt.Errorf("resolve alert: %w", one(err, "alert", fmt.Sprint(id)))
		}
		return nil
	})
}

// AckAlert implements store.Alerts.
func (o *ops) AckAlert(ctx context.Context, id int64, by string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("ack alert %d: %w", id, &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	if err := store.CheckID("by", by); err != nil {
		return fmt.Errorf("ack alert %d: %w", id, err)
	}
	return o.atomic(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE alerts SET acked_at = $2, acked_by = $3 WHERE id = $1 AND acked_at IS NULL`, id, o.t(at), by)
		if err != nil {
			return o.fail(err, "ack alert %d", id)
		}
		if n > 0 {
			return nil
		}
		var x int
		if err := q.QueryRow(ctx, `SELECT 1 FROM alerts WHERE id = $1`, id).Scan(&x); err != nil {
			return fmt.Errorf("ack alert: %w", one(err, "alert", fmt.Sprint(id)))
		}
		return nil
	})
}

// ListAlerts implements store.Alerts.
func (o *ops) ListAlerts(ctx context.Context, f store.AlertFilter) (store.Page[store.Alert], error) {
	limit, err := store.PageLimit(f.Limit)
	if err != nil {
		return store.Page[store.Alert]{}, fmt.Errorf("list alerts: %w", err)
	}
	after, ok, err := store.DecodeCursor("alerts", f.Cursor)
	if err != nil {
		return store.Page[store.Alert]{}, fmt.Errorf("list alerts: %w", err)
	}
	for _, x := range []struct{ name, v string }{{"team", f.Team}, {"kind", f.Kind}, {"lease", f.LeaseID}} {
		if err := store.CheckText(x.name, x.v); err != nil {
			return store.Page[store.Alert]{}, fmt.Errorf("list alerts: %w", err)
		}
	}
	var w where
	if f.ID != 0 {
		w.add("id = " + w.p(f.ID))
	}
	if f.Team != "" {
		w.add("team_id = " + w.p(f.Team))
	}
	if f.Kind != "" {
		w.add("kind = " + w.p(f.Kind))
	}
	if f.LeaseID != "" {
		w.add("lease_id = " + w.p(f.LeaseID))
	}
	if f.OpenOnly {
		w.add("resolved_at IS NULL")
	}
	if ok {
		w.add("id < " + w.p(after))
	}
	rows, err := o.r().Query(ctx, `SELECT `+alertCols+` FROM alerts`+w.String()+` ORDER BY id DESC LIMIT `+w.p(limit+1), w.vals...)
	if err != nil {
		return store.Page[store.Alert]{}, o.fail(err, "list alerts")
	}
	defer rows.Close()
	var page store.Page[store.Alert]
	for rows.Next() {
		a, err := scanAlert(rows)
		if err != nil {
			return store.Page[store.Alert]{}, fmt.Errorf("list alerts: %w", err)
		}
		page.Items = append(page.Items, a)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Alert]{}, o.fail(err, "list alerts")
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = store.EncodeCursor("alerts", page.Items[limit-1].ID)
	}
	return page, nil
}
