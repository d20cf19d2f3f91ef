package store

import (
	"context"
	"fmt"
	"time"

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
	// History is each team's decayed past usage, for fair share, counted
	// up to HistoryAt (engine.State's, which records both).
	History   map[string]core.Usage
	HistoryAt time.Time
	// Demand is the fleet's recent demand, oldest first (engine.State's
	// Demand): what committed terms are priced on.
	Demand []core.DemandPoint
	// Runs and Ratios are what finished jobs taught the engine of how
	// long work runs (engine.State's Durations, a plan.DurationModel):
	// Runs per team and command, in team then command order, each once;
	// Ratios per team, the last ratios of a run's time to its user's
	// estimate in basis points, oldest first.
	Runs   []core.DurationRuns
	Ratios map[string][]int64
	// Refused are the offers' modes the provider lately refused for
	// capacity, in offer and mode order (engine.State's Refused): not
	// rented again before their Until.
	Refused []core.Refusal
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
	// TakeInbox returns the ids of the jobs submitted or cancelled since
	// the last take, each once, in the order they arrived, and removes
	// them. Call it in the Tx that reads what they name: a rollback keeps
	// them for the next take, and one committed after the Tx began is
	// left for the next.
	TakeInbox(ctx context.Context) ([]string, error)
	// Leaders: who took the leadership lock last.
	Leaders
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
	for i, p := range s.Demand {
		if p.Milli < 0 || p.At.IsZero() || i > 0 && p.At.Before(s.Demand[i-1].At) {
			return &core.FieldError{Field: fmt.Sprintf("demand[%d]", i), Value: fmt.Sprintf("%d at %s", p.Milli, p.At.Format(time.RFC3339Nano)), Allowed: "a share >= 0 at a time not before the last point's"}
		}
	}
	for i, r := range s.Runs {
		f := fmt.Sprintf("runs[%d]", i)
		if err := CheckID(f+".team", r.Team); err != nil {
			return err
		}
		if err := CheckText(f+".command", r.Command); err != nil {
			return err
		}
		if i > 0 && !runsBefore(s.Runs[i-1], r) {
			return &core.FieldError{Field: f, Value: r.Team + " " + r.Command, Allowed: "teams and commands in order, each once"}
		}
		for _, v := range r.Seconds {
			if v < 0 {
				return &core.FieldError{Field: f + ".seconds", Value: fmt.Sprint(v), Allowed: "run times >= 0"}
			}
		}
	}
	for team, rs := range s.Ratios {
		if err := CheckID("ratios", team); err != nil {
			return err
		}
		for _, v := range rs {
			if v < 0 {
				return &core.FieldError{Field: "ratios[" + team + "]", Value: fmt.Sprint(v), Allowed: "ratios >= 0 basis points"}
			}
		}
	}
	for i, r := range s.Refused {
		if err := CheckText(fmt.Sprintf("refused[%d].offer", i), r.Offer); err != nil {
			return err
		}
		if r.Offer == "" || r.Mode == "" || r.Until.IsZero() || r.Wait <= 0 || i > 0 && !refusalBefore(s.Refused[i-1], r) {
			return &core.FieldError{Field: fmt.Sprintf("refused[%d]", i), Value: fmt.Sprintf("%s %s until %s (wait %s)", r.Offer, r.Mode, r.Until.Format(time.RFC3339Nano), r.Wait),
				Allowed: "an offer and mode, in order and once each, with a time and a wait > 0"}
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

// runsBefore orders duration runs by team, then command.
func runsBefore(a, b core.DurationRuns) bool {
	return a.Team < b.Team || a.Team == b.Team && a.Command < b.Command
}

// refusalBefore orders refusals by offer, then mode.
func refusalBefore(a, b core.Refusal) bool {
	return a.Offer < b.Offer || a.Offer == b.Offer && a.Mode < b.Mode
}

// Leadership is the control loop's leader as it recorded itself on
// taking the leadership lock (store.Leader): who leads, since when, and
// how many leaders there have been. A replica that follows reads it to
// say who leads; the lock, not this record, decides who does.
type Leadership struct {
	// Replica names the server process that took the lock.
	Replica string
	// Since is when it took the lock.
	Since time.Time
	// Term counts the takeovers: each leader's is the last one's + 1,
	// the first's 1.
	Term int64
}

// Leaders keeps the Leadership record.
type Leaders interface {
	// RecordLeader records replica as the leader since at, one term after
	// the last, and returns the record. Call it holding the leadership
	// lock, before acting as the leader.
	RecordLeader(ctx context.Context, replica string, at time.Time) (Leadership, error)
	// LoadLeader returns the last leader recorded: the zero Leadership
	// (Term 0) before the first.
	LoadLeader(ctx context.Context) (Leadership, error)
}
