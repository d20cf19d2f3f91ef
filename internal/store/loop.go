package store

import (
	"context"

	"github.com/gpufleet/gpufleet/internal/core"
)

// LoopState is what engine.State keeps beyond leases, units and teams:
// the loop's counters and memories, saved every tick so that a restart
// (or a new leader) carries on where the last one stopped.
type LoopState struct {
	// NextID numbers new leases; restoring it keeps lease ids unique.
	NextID int
	// Spent is each team's spend this month.
	Spent map[string]core.Micros
	// History is each team's decayed past usage, for fair share.
	History map[string]core.Usage
	// Ladder is the idle ladder's state per GPU and unit (fleet.GPUKey's form).
	Ladder map[string]core.LadderState
	// BudgetAlerted remembers teams already warned this month.
	BudgetAlerted map[string]bool
	// Version counts saves: SaveLoop with a stale Version is ErrConflict,
	// so two loops that both believe they lead cannot both write.
	Version int64
}

// Loop keeps the control loop's LoopState.
type Loop interface {
	// LoadLoop returns the saved state, or the zero state (Version 0)
	// before the first save.
	LoadLoop(ctx context.Context) (LoopState, error)
	// SaveLoop stores s if the stored version is still s.Version and
	// returns the new version; otherwise ErrConflict.
	SaveLoop(ctx context.Context, s LoopState) (version int64, err error)
}

// ValidateLoop reports the first problem with s.
func ValidateLoop(s *LoopState) error {
	if err := checkNonNeg("next_id", int64(s.NextID)); err != nil {
		return err
	}
	if err := checkNonNeg("version", s.Version); err != nil {
		return err
	}
	for team, m := range s.Spent {
		if err := CheckID("spent", team); err != nil {
			return err
		}
		if m < 0 {
			return &core.FieldError{Field: "spent[" + team + "]", Value: m.String(), Allowed: "an amount >= 0"}
		}
	}
	for team, u := range s.History {
		if err := CheckID("history", team); err != nil {
			return err
		}
		for class := range u {
			if err := CheckText("history["+team+"]", class); err != nil {
				return err
			}
		}
	}
	for k, l := range s.Ladder {
		if err := CheckID("ladder", k); err != nil {
			return err
		}
		if err := CheckText("ladder["+k+"].unit", l.Unit); err != nil {
			return err
		}
	}
	for team := range s.BudgetAlerted {
		if err := CheckID("budget_alerted", team); err != nil {
			return err
		}
	}
	return nil
}
