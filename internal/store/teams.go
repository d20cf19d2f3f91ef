package store

import (
	"context"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Teams keeps teams with their quotas, fair-share weights and budgets.
type Teams interface {
	// CreateTeam stores a new team; an existing id is ErrConflict.
	CreateTeam(ctx context.Context, t core.Team) error
	// GetTeam returns the team with id, quotas in the order they were set.
	GetTeam(ctx context.Context, id string) (core.Team, error)
	// ListTeams returns every team ordered by id.
	ListTeams(ctx context.Context) ([]core.Team, error)
	// UpdateTeam replaces the team's name, cohort, weight, budget, quotas
	// and unit limit with t's. A lower unit limit refuses new jobs only:
	// the queue already there stays.
	UpdateTeam(ctx context.Context, t core.Team) error
}

// ValidateTeam reports the first problem with t.
func ValidateTeam(t *core.Team) error {
	if err := core.CheckName("id", t.ID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"name", t.Name}, {"cohort", t.Cohort}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	if err := checkNonNeg("weight", t.Weight); err != nil {
		return err
	}
	if t.MonthlyBudget < 0 {
		return &core.FieldError{Field: "monthly_budget", Value: t.MonthlyBudget.String(), Allowed: "an amount >= 0 (0: no budget)"}
	}
	if t.UnitLimit < 0 || t.UnitLimit > core.MaxUnitLimit {
		return &core.FieldError{Field: "unit_limit", Value: fmt.Sprint(t.UnitLimit), Allowed: fmt.Sprintf("0..%d (0: %d)", core.MaxUnitLimit, core.DefaultUnitLimit)}
	}
	seen := map[string]bool{}
	for i, q := range t.Quotas {
		f := fmt.Sprintf("quotas[%d]", i)
		if err := CheckID(f+".gpu_class", q.GPUClass); err != nil {
			return err
		}
		if seen[q.GPUClass] {
			return &core.FieldError{Field: f + ".gpu_class", Value: q.GPUClass, Allowed: "one quota per GPU class"}
		}
		seen[q.GPUClass] = true
		if err := checkNonNeg(f+".guaranteed", int64(q.Guaranteed)); err != nil {
			return err
		}
	}
	return nil
}
