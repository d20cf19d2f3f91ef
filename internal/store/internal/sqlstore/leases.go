package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

const finalLeaseStates = `('released', 'reclaimed', 'failed')`

const leaseCols = `seq, id, offer_id, mode, state, client_token, provider_id, requested_at, start_at, committed_end, end_at,
	ready_at, reclaim_at, idle_since, rented_for, earlier_terms`

func scanLease(r interface{ Scan(...any) error }) (store.Lease, int64, error) {
	var (
		l           store.Lease
		seq         int64
		mode, state string
		rentedFor   string
		earlier     string
	)
	err := r.Scan(&seq, &l.ID, &l.OfferID, &mode, &state, &l.ClientToken, &l.ProviderID, T(&l.Requested), T(&l.Start),
		T(&l.CommittedEnd), T(&l.End), T(&l.ReadyAt), T(&l.ReclaimAt), T(&l.IdleSince), &rentedFor, &earlier)
	if err != nil {
		return l, seq, err
	}
	l.Mode, l.State = core.BillingMode(mode), core.LeaseState(state)
	if err := unmarshal(rentedFor, &l.For); err != nil {
		return l, seq, fmt.Errorf("lease %s: rented_for: %w", l.ID, err)
	}
	if len(l.For) == 0 {
		l.For = nil
	}
	if err := unmarshal(earlier, &l.Earlier); err != nil {
		return l, seq, fmt.Errorf("lease %s: earlier_terms: %w", l.ID, err)
	}
	if len(l.Earlier) == 0 {
		l.Earlier = nil
	}
	return l, seq, nil
}

// CreateLease implements store.Leases.
func (o *ops) CreateLease(ctx context.Context, l store.Lease) error {
	if err := store.ValidateIntent(&l); err != nil {
		return fmt.Errorf("create lease: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO leases (id, offer_id, mode, state, client_token, provider_id, requested_at, start_at,
			committed_end, end_at, ready_at, reclaim_at, idle_since, rented_for, earlier_terms, first_start_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
			l.ID, l.OfferID, string(l.Mode), string(l.State), l.ClientToken, l.ProviderID, o.t(l.Requested), o.t(l.Start),
			o.t(l.CommittedEnd), o.t(l.End), o.t(l.ReadyAt), o.t(l.ReclaimAt), o.t(l.IdleSince), marshal(nonNilSlice(l.For)),
			terms(l.Earlier), o.t(l.FirstStart()))
		if err != nil {
			return o.fail(err, "create lease %q (client token %q, provider id %q)", l.ID, l.ClientToken, l.ProviderID)
		}
		return nil
	})
}

// GetLease implements store.Leases.
func (o *ops) GetLease(ctx context.Context, id string) (store.Lease, error) {
	if err := store.CheckID("id", id); err != nil {
		return store.Lease{}, fmt.Errorf("get lease: %w", err)
	}
	return o.leaseBy(ctx, o.r(), "id", id)
}

// LeaseByClientToken implements store.Leases.
func (o *ops) LeaseByClientToken(ctx context.Context, token string) (store.Lease, error) {
	if err := store.CheckID("client_token", token); err != nil {
		return store.Lease{}, fmt.Errorf("lease by client token: %w", err)
	}
	return o.leaseBy(ctx, o.r(), "client_token", token)
}

// LeaseByProviderID implements store.Leases.
func (o *ops) LeaseByProviderID(ctx context.Context, providerID string) (store.Lease, error) {
	if err := store.CheckID("provider_id", providerID); err != nil {
		return store.Lease{}, fmt.Errorf("lease by provider id: %w", err)
	}
	// A provider id is unique among live leases only (migration 0005):
	// the live lease wins, else the newest that ended.
	l, _, err := scanLease(o.r().QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE provider_id = $1
		ORDER BY CASE WHEN state IN `+finalLeaseStates+` THEN 1 ELSE 0 END, seq DESC LIMIT 1`, providerID))
	if err != nil {
		return store.Lease{}, fmt.Errorf("lease by provider id: %w", one(err, "lease with provider_id", providerID))
	}
	return l, nil
}

// leaseBy finds a lease by a unique column (a constant, never input).
func (o *ops) leaseBy(ctx context.Context, q Querier, col, v string) (store.Lease, error) {
	l, _, err := scanLease(q.QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE `+col+` = $1`, v))
	if err != nil {
		return store.Lease{}, fmt.Errorf("get lease: %w", one(err, "lease with "+col, v))
	}
	return l, nil
}

// UpdateLease implements store.Leases.
func (o *ops) UpdateLease(ctx context.Context, l store.Lease) error {
	if err := store.ValidateLease(&l); err != nil {
		return fmt.Errorf("update lease: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		if l.ProviderID != "" && !l.State.Final() {
			// The unique index over live leases' provider ids is the
			// guard; asking first names the lease that holds the machine
			// (a failed statement would abort a PostgreSQL transaction).
			var holder string
			err := q.QueryRow(ctx, `SELECT id FROM leases WHERE provider_id = $1 AND id <> $2 AND state NOT IN `+finalLeaseStates,
				l.ProviderID, l.ID).Scan(&holder)
			switch {
			case err == nil:
				return fmt.Errorf("update lease: %w", store.Conflict("lease %q: provider id %q is the machine of live lease %q", l.ID, l.ProviderID, holder))
			case !errors.Is(err, ErrNoRows):
				return o.fail(err, "update lease %q (provider id %q)", l.ID, l.ProviderID)
			}
		}
		var a args
		// The mode changes only with a renewal on another term: the row
		// then holds the terms before the last one, on its mode (the
		// term it renews from); otherwise it holds the same terms and mode.
		was := `mode = ` + a.p(string(l.Mode)) + ` AND earlier_terms = ` + a.p(terms(l.Earlier))
		if k := len(l.Earlier); k > 0 {
			was = `(` + was + ` OR mode = ` + a.p(string(l.Earlier[k-1].Mode)) + ` AND earlier_terms = ` + a.p(terms(l.Earlier[:k-1])) + `)`
		}
		sql := `UPDATE leases SET state = ` + a.p(string(l.State)) + `, provider_id = ` + a.p(l.ProviderID) +
			`, start_at = ` + a.p(o.t(l.Start)) + `, committed_end = ` + a.p(o.t(l.CommittedEnd)) + `, end_at = ` + a.p(o.t(l.End)) +
			`, ready_at = ` + a.p(o.t(l.ReadyAt)) + `, reclaim_at = ` + a.p(o.t(l.ReclaimAt)) + `, idle_since = ` + a.p(o.t(l.IdleSince)) +
			`, mode = ` + a.p(string(l.Mode)) + `, earlier_terms = ` + a.p(terms(l.Earlier)) + `, first_start_at = ` + a.p(o.t(l.FirstStart())) +
			` WHERE id = ` + a.p(l.ID) + ` AND offer_id = ` + a.p(l.OfferID) + ` AND ` + was +
			` AND client_token = ` + a.p(l.ClientToken)
		preds := store.LeasePredecessors(l.State)
		vs := make([]any, len(preds))
		for i, p := range preds {
			vs[i] = string(p)
		}
		sql += ` AND state IN ` + a.list(vs...)
		n, err := q.Exec(ctx, sql, a.vals...)
		if err != nil {
			return o.fail(err, "update lease %q (provider id %q)", l.ID, l.ProviderID)
		}
		if n > 0 {
			return nil
		}
		cur, err := o.leaseBy(ctx, q, "id", l.ID)
		if err != nil {
			return fmt.Errorf("update lease: %w", err)
		}
		for _, f := range []struct{ name, was, now string }{
			{"offer", cur.OfferID, l.OfferID}, {"client token", cur.ClientToken, l.ClientToken},
		} {
			if f.was != f.now {
				return fmt.Errorf("update lease: %w", store.Conflict("lease %q: %s is %q, cannot become %q", l.ID, f.name, f.was, f.now))
			}
		}
		k := len(l.Earlier)
		same := cur.Mode == l.Mode && terms(cur.Earlier) == terms(l.Earlier)
		renewed := k > 0 && cur.Mode == l.Earlier[k-1].Mode && terms(cur.Earlier) == terms(l.Earlier[:k-1])
		if !same && !renewed {
			return fmt.Errorf("update lease: %w", store.Conflict("lease %q: mode %s after earlier terms %s cannot become %s after %s: the mode changes only by a renewal, which appends the term it held to the earlier terms",
				l.ID, cur.Mode, terms(cur.Earlier), l.Mode, terms(l.Earlier)))
		}
		return fmt.Errorf("update lease: %w", store.CheckLeaseTransition(l.ID, cur.State, l.State))
	})
}

// ListLiveLeases implements store.Leases.
func (o *ops) ListLiveLeases(ctx context.Context) ([]store.Lease, error) {
	rows, err := o.r().Query(ctx, `SELECT `+leaseCols+` FROM leases WHERE state NOT IN `+finalLeaseStates+` ORDER BY seq`)
	if err != nil {
		return nil, o.fail(err, "list live leases")
	}
	defer rows.Close()
	var out []store.Lease
	for rows.Next() {
		l, _, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("list live leases: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "list live leases")
	}
	return out, nil
}

// ListLeases implements store.Leases.
func (o *ops) ListLeases(ctx context.Context, f store.LeaseFilter) (store.Page[store.Lease], error) {
	limit, err := store.PageLimit(f.Limit)
	if err != nil {
		return store.Page[store.Lease]{}, fmt.Errorf("list leases: %w", err)
	}
	after, ok, err := store.DecodeCursor("leases", f.Cursor)
	if err != nil {
		return store.Page[store.Lease]{}, fmt.Errorf("list leases: %w", err)
	}
	var w where
	if len(f.States) > 0 {
		vs := make([]any, len(f.States))
		for i, s := range f.States {
			if _, err := store.ParseLeaseState("state", string(s)); err != nil {
				return store.Page[store.Lease]{}, fmt.Errorf("list leases: %w", err)
			}
			vs[i] = string(s)
		}
		w.add("state IN " + w.list(vs...))
	}
	if !f.HeldTo.IsZero() {
		if f.HeldTo.Before(f.HeldFrom) {
			return store.Page[store.Lease]{}, fmt.Errorf("list leases: %w", &core.FieldError{Field: "held_to", Value: f.HeldTo.UTC().Format(time.RFC3339Nano),
				Allowed: "a time at or after held_from " + f.HeldFrom.UTC().Format(time.RFC3339Nano)})
		}
		w.add("start_at IS NOT NULL AND COALESCE(first_start_at, start_at) < " + w.p(o.t(f.HeldTo)))
		if !f.HeldFrom.IsZero() {
			w.add("(end_at IS NULL OR end_at > " + w.p(o.t(f.HeldFrom)) + ")")
		}
	}
	if ok {
		w.add("seq < " + w.p(after))
	}
	rows, err := o.r().Query(ctx, `SELECT `+leaseCols+` FROM leases`+w.String()+` ORDER BY seq DESC LIMIT `+w.p(limit+1), w.vals...)
	if err != nil {
		return store.Page[store.Lease]{}, o.fail(err, "list leases")
	}
	defer rows.Close()
	var page store.Page[store.Lease]
	var seqs []int64
	for rows.Next() {
		l, seq, err := scanLease(rows)
		if err != nil {
			return store.Page[store.Lease]{}, fmt.Errorf("list leases: %w", err)
		}
		page.Items, seqs = append(page.Items, l), append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Lease]{}, o.fail(err, "list leases")
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = store.EncodeCursor("leases", seqs[limit-1])
	}
	return page, nil
}

// terms is the stored form of a lease's earlier terms: JSON, times in
// UTC, so that equal terms are equal text (UpdateLease compares them).
func terms(ts []core.Term) string {
	out := make([]core.Term, len(ts))
	for i, t := range ts {
		out[i] = core.Term{Mode: t.Mode, Start: t.Start.UTC()}
	}
	return marshal(out)
}
