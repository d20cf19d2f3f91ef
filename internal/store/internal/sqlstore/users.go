package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

const userCols = `id, team_id, name, email, role, created_at, disabled_at`

func scanUser(r interface{ Scan(...any) error }) (store.User, error) {
	var u store.User
	var role string
	err := r.Scan(&u.ID, S(&u.Team), &u.Name, &u.Email, &role, T(&u.Created), T(&u.Disabled))
	u.Role = store.Role(role)
	return u, err
}

// CreateUser implements store.Users.
func (o *ops) CreateUser(ctx context.Context, u store.User) error {
	if err := store.ValidateNewUser(&u); err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO users (`+userCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			u.ID, nullStr(u.Team), u.Name, u.Email, string(u.Role), o.t(u.Created), o.t(u.Disabled))
		switch e := o.s.b.Classify(err); {
		case errors.Is(e, store.ErrConflict): // the id is users' one unique key
			return fmt.Errorf("create user: %w", store.Exists("id", "user", u.ID))
		case errors.Is(e, store.ErrNotFound): // the team is users' one reference
			return fmt.Errorf("create user %q: %w", u.ID, store.Missing("team", "team", u.Team))
		case err != nil:
			return o.fail(err, "create user %q (team %q)", u.ID, u.Team)
		}
		return nil
	})
}

// GetUser implements store.Users.
func (o *ops) GetUser(ctx context.Context, id string) (store.User, error) {
	if err := store.CheckID("id", id); err != nil {
		return store.User{}, fmt.Errorf("get user: %w", err)
	}
	u, err := scanUser(o.r().QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	if err != nil {
		return store.User{}, fmt.Errorf("get user: %w", one(err, "user", id))
	}
	return u, nil
}

// ListUsers implements store.Users.
func (o *ops) ListUsers(ctx context.Context, team string) ([]store.User, error) {
	if err := store.CheckText("team", team); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	var w where
	if team != "" {
		w.add("team_id = " + w.p(team))
	}
	rows, err := o.r().Query(ctx, `SELECT `+userCols+` FROM users`+w.String()+` ORDER BY id`, w.vals...)
	if err != nil {
		return nil, o.fail(err, "list users")
	}
	defer rows.Close()
	var out []store.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "list users")
	}
	return out, nil
}

// UpdateUser implements store.Users.
func (o *ops) UpdateUser(ctx context.Context, u store.User) error {
	if err := store.ValidateUser(&u); err != nil {
		return fmt.Errorf("update user: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE users SET team_id = $2, name = $3, email = $4, role = $5, disabled_at = $6 WHERE id = $1`,
			u.ID, nullStr(u.Team), u.Name, u.Email, string(u.Role), o.t(u.Disabled))
		if err != nil {
			return o.fail(err, "update user %q (team %q)", u.ID, u.Team)
		}
		if n == 0 {
			return fmt.Errorf("update user: %w", store.NotFound("user", u.ID))
		}
		return nil
	})
}

const tokenCols = `id, hash, user_id, team_id, role, name, prefix, created_at, expires_at, revoked_at, last_used_at, kind, lease_id, agent_id`

func scanToken(r interface{ Scan(...any) error }) (store.Token, error) {
	var t store.Token
	var role, kind string
	var hash []byte
	err := r.Scan(&t.ID, &hash, S(&t.User), S(&t.Team), &role, &t.Name, &t.Prefix, T(&t.Created), T(&t.Expires), T(&t.Revoked), T(&t.LastUsed), &kind, &t.Lease, &t.Agent)
	t.Kind = store.TokenKind(kind)
	if err == nil && len(hash) != len(t.Hash) {
		return t, fmt.Errorf("token %q: stored hash has %d bytes", t.ID, len(hash))
	}
	copy(t.Hash[:], hash)
	t.Role = store.Role(role)
	return t, err
}

// CreateToken implements store.Tokens.
func (o *ops) CreateToken(ctx context.Context, t store.Token) error {
	if err := store.ValidateToken(&t); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		// Name a missing user or team before the insert: after a failed
		// statement PostgreSQL answers nothing more in the transaction,
		// and the driver's message is not for users.
		for _, ref := range []struct{ field, table, id string }{{"user", "users", t.User}, {"team", "teams", t.Team}} {
			if ref.id == "" {
				continue
			}
			var one int
			switch err := q.QueryRow(ctx, `SELECT 1 FROM `+ref.table+` WHERE id = $1`, ref.id).Scan(&one); {
			case errors.Is(err, ErrNoRows):
				return fmt.Errorf("create token %q: %w", t.ID, store.Missing(ref.field, ref.field, ref.id))
			case err != nil:
				return o.fail(err, "create token %q: %s", t.ID, ref.field)
			}
		}
		_, err := q.Exec(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			t.ID, t.Hash[:], nullStr(t.User), nullStr(t.Team), string(t.Role), t.Name, t.Prefix, o.t(t.Created), o.t(t.Expires), o.t(t.Revoked), o.t(t.LastUsed),
			string(t.Kind), t.Lease, t.Agent)
		if err != nil {
			return o.fail(err, "create token %q (user %q, team %q)", t.ID, t.User, t.Team)
		}
		return nil
	})
}

// TokenByHash implements store.Tokens.
func (o *ops) TokenByHash(ctx context.Context, hash store.TokenHash, now time.Time) (store.Token, error) {
	if o.tx == nil {
		t, ok, gen := o.s.tokens.get(hash, now)
		if ok {
			return t, nil
		}
		read := time.Now()
		t, err := o.tokenByHash(ctx, hash, now)
		if err == nil {
			o.s.tokens.put(t, gen, read)
		}
		return t, err
	}
	return o.tokenByHash(ctx, hash, now)
}

func (o *ops) tokenByHash(ctx context.Context, hash store.TokenHash, now time.Time) (store.Token, error) {
	t, err := scanToken(o.r().QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens
		WHERE hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`, hash[:], o.t(now)))
	if err != nil {
		return store.Token{}, fmt.Errorf("token by hash: %w", one(err, "token", "(by hash)"))
	}
	return t, nil
}

// ListTokens implements store.Tokens.
func (o *ops) ListTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error) {
	for _, x := range []struct{ name, v string }{{"user", f.User}, {"team", f.Team}} {
		if err := store.CheckText(x.name, x.v); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
	}
	var w where
	if f.User != "" {
		w.add("user_id = " + w.p(f.User))
	}
	if f.Team != "" {
		w.add("team_id = " + w.p(f.Team))
	}
	rows, err := o.r().Query(ctx, `SELECT `+tokenCols+` FROM tokens`+w.String()+` ORDER BY id`, w.vals...)
	if err != nil {
		return nil, o.fail(err, "list tokens")
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "list tokens")
	}
	return out, nil
}

// GetToken implements store.Tokens.
func (o *ops) GetToken(ctx context.Context, id string) (store.Token, error) {
	if err := store.CheckID("id", id); err != nil {
		return store.Token{}, fmt.Errorf("get token: %w", err)
	}
	t, err := scanToken(o.r().QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = $1`, id))
	if err != nil {
		return store.Token{}, fmt.Errorf("get token: %w", one(err, "token", id))
	}
	return t, nil
}

// ClaimToken implements store.Tokens.
func (o *ops) ClaimToken(ctx context.Context, id, agent string) (string, error) {
	if err := store.CheckID("id", id); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	if err := store.CheckID("agent", agent); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	var bound string
	err := o.atomic(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE tokens SET agent_id = $2 WHERE id = $1 AND agent_id = ''`, id, agent)
		if err != nil {
			return o.fail(err, "claim token %q", id)
		}
		if n > 0 {
			if err := o.notifyTokens(ctx, q); err != nil {
				return err
			}
		}
		if err := q.QueryRow(ctx, `SELECT agent_id FROM tokens WHERE id = $1`, id).Scan(&bound); err != nil {
			return fmt.Errorf("claim token: %w", one(err, "token", id))
		}
		return nil
	})
	o.wroteTokens()
	return bound, err
}

// RevokeLeaseTokens implements store.Tokens.
func (o *ops) RevokeLeaseTokens(ctx context.Context, lease string, keep []string, at time.Time) (int, error) {
	if err := store.CheckID("lease", lease); err != nil {
		return 0, fmt.Errorf("revoke lease tokens: %w", err)
	}
	if at.IsZero() {
		return 0, fmt.Errorf("revoke lease tokens of %q: %w", lease, &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	var w where
	w.add("lease_id = " + w.p(lease))
	w.add("revoked_at IS NULL")
	if len(keep) > 0 {
		vs := make([]any, len(keep))
		for i, k := range keep {
			vs[i] = k
		}
		w.add("id NOT IN " + w.list(vs...))
	}
	var n int64
	err := o.atomic(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, `UPDATE tokens SET revoked_at = `+w.p(o.t(at))+w.String(), w.vals...)
		if err != nil {
			return o.fail(err, "revoke lease tokens of %q", lease)
		}
		if n > 0 {
			return o.notifyTokens(ctx, q)
		}
		return nil
	})
	o.wroteTokens()
	return int(n), err
}

// RevokeToken implements store.Tokens.
func (o *ops) RevokeToken(ctx context.Context, id string, at time.Time) error {
	err := o.setTokenTime(ctx, "revoke token", `UPDATE tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, at, true)
	o.wroteTokens()
	return err
}

// TouchToken implements store.Tokens.
func (o *ops) TouchToken(ctx context.Context, id string, at time.Time) error {
	return o.setTokenTime(ctx, "touch token", `UPDATE tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, id, at, false)
}

// setTokenTime runs sql, an UPDATE of one token's time; notify: the
// change is one a token cache must learn of.
func (o *ops) setTokenTime(ctx context.Context, what, sql, id string, at time.Time, notify bool) error {
	if err := store.CheckID("id", id); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if at.IsZero() {
		return fmt.Errorf("%s %q: %w", what, id, &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	// One short UPDATE: it shares its COMMIT with the writes of the same
	// moment.
	return o.atomicGrouped(ctx, func(ctx context.Context, q Querier) error {
		n, err := q.Exec(ctx, sql, id, o.t(at))
		if err != nil {
			return o.fail(err, "%s %q", what, id)
		}
		if n > 0 && notify {
			return o.notifyTokens(ctx, q)
		}
		if n > 0 {
			return nil
		}
		var x int
		if err := q.QueryRow(ctx, `SELECT 1 FROM tokens WHERE id = $1`, id).Scan(&x); err != nil {
			return fmt.Errorf("%s: %w", what, one(err, "token", id))
		}
		return nil
	})
}
