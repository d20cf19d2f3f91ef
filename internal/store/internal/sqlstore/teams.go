package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

const teamSelect = `SELECT t.id, t.name, t.cohort, t.weight, t.monthly_budget_micros, t.unit_limit,
	q.gpu_class, q.guaranteed_milli, q.borrow_limit_milli, q.lend_limit_milli
	FROM teams t LEFT JOIN team_quotas q ON q.team_id = t.id`

// CreateTeam implements store.Teams.
func (o *ops) CreateTeam(ctx context.Context, t core.Team) error {
	if err := store.ValidateTeam(&t); err != nil {
		return fmt.Errorf("create team: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO teams (id, name, cohort, weight, monthly_budget_micros, unit_limit) VALUES ($1, $2, $3, $4, $5, $6)`,
			t.ID, t.Name, t.Cohort, t.Weight, int64(t.MonthlyBudget), t.UnitLimit); err != nil {
			if errors.Is(o.s.b.Classify(err), store.ErrConflict) {
				return fmt.Errorf("create team: %w", store.Exists("id", "team", t.ID)) // the id is teams' one unique key
			}
			return o.fail(err, "create team %q", t.ID)
		}
		return o.insertQuotas(ctx, q, &t)
	})
}

func (o *ops) insertQuotas(ctx context.Context, q Querier, t *core.Team) error {
	for i, qu := range t.Quotas {
		if _, err := q.Exec(ctx, `INSERT INTO team_quotas (team_id, ord, gpu_class, guaranteed_milli, borrow_limit_milli, lend_limit_milli) VALUES ($1, $2, $3, $4, $5, $6)`,
			t.ID, i, qu.GPUClass, int64(qu.Guaranteed), int64(qu.BorrowLimit), int64(qu.LendLimit)); err != nil {
			return o.fail(err, "team %q: quota %q", t.ID, qu.GPUClass)
		}
	}
	return nil
}

// GetTeam implements store.Teams.
func (o *ops) GetTeam(ctx context.Context, id string) (core.Team, error) {
	if err := store.CheckID("id", id); err != nil {
		return core.Team{}, fmt.Errorf("get team: %w", err)
	}
	ts, err := o.teams(ctx, teamSelect+` WHERE t.id = $1 ORDER BY q.ord`, id)
	if err != nil {
		return core.Team{}, fmt.Errorf("get team %q: %w", id, err)
	}
	if len(ts) == 0 {
		return core.Team{}, store.NotFound("team", id)
	}
	return ts[0], nil
}

// ListTeams implements store.Teams.
func (o *ops) ListTeams(ctx context.Context) ([]core.Team, error) {
	ts, err := o.teams(ctx, teamSelect+` ORDER BY t.id, q.ord`)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return ts, nil
}

// teams runs a teamSelect query: rows of one team are adjacent.
func (o *ops) teams(ctx context.Context, sql string, a ...any) ([]core.Team, error) {
	rows, err := o.r().Query(ctx, sql, a...)
	if err != nil {
		return nil, o.s.b.Classify(err)
	}
	defer rows.Close()
	var out []core.Team
	for rows.Next() {
		var (
			t                  core.Team
			class              string
			guar, borrow, lend *int64
			budget             int64
		)
		if err := rows.Scan(&t.ID, &t.Name, &t.Cohort, &t.Weight, &budget, &t.UnitLimit, S(&class), &guar, &borrow, &lend); err != nil {
			return nil, err
		}
		t.MonthlyBudget = core.Micros(budget)
		if len(out) == 0 || out[len(out)-1].ID != t.ID {
			out = append(out, t)
		}
		if guar != nil {
			last := &out[len(out)-1]
			last.Quotas = append(last.Quotas, core.Quota{GPUClass: class, Guaranteed: core.Milli(*guar), BorrowLimit: core.Milli(*borrow), LendLimit: core.Milli(*lend)})
		}
	}
	return out, rows.Err()
}

// UpdateTeam implements store.Teams.
func (o *ops) UpdateTeam(ctx context.Context, t core.Team) error {
	if err := store.ValidateTeam(&t); err != nil {
		return fmt.Errorf("update team: %w", err)
	}
	return o.atomic(ctx, func(q Querier) error {
		// The team row first: its lock orders concurrent updates of one
		// team, so the quota rows are replaced by one at a time.
		n, err := q.Exec(ctx, `UPDATE teams SET name = $2, cohort = $3, weight = $4, monthly_budget_micros = $5, unit_limit = $6 WHERE id = $1`,
			t.ID, t.Name, t.Cohort, t.Weight, int64(t.MonthlyBudget), t.UnitLimit)
		if err != nil {
			return o.fail(err, "update team %q", t.ID)
		}
		if n == 0 {
			return fmt.Errorf("update team: %w", store.NotFound("team", t.ID))
		}
		if _, err := q.Exec(ctx, `DELETE FROM team_quotas WHERE team_id = $1`, t.ID); err != nil {
			return o.fail(err, "update team %q: quotas", t.ID)
		}
		return o.insertQuotas(ctx, q, &t)
	})
}

// one scans a single row, mapping no rows to store.NotFound(what, id).
func one(err error, what, id string) error {
	if errors.Is(err, ErrNoRows) {
		return store.NotFound(what, id)
	}
	return err
}
