package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// loopDoc is LoopState as stored, with names of its own so that a rename
// in fleet or sched cannot silently lose what was saved.
type loopDoc struct {
	NextID        int                         `json:"next_id"`
	Spent         map[string]int64            `json:"spent"`
	History       map[string]map[string]int64 `json:"history"`
	Ladder        map[string]ladderDoc        `json:"ladder"`
	BudgetAlerted map[string]bool             `json:"budget_alerted"`
}

type ladderDoc struct {
	LowSince    *time.Time `json:"low_since,omitempty"`
	NoProcSince *time.Time `json:"no_proc_since,omitempty"`
	Rung        int        `json:"rung"`
	Zombie      bool       `json:"zombie,omitempty"`
	Unit        string     `json:"unit"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = store.Micro(t)
	return &t
}

func timeVal(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

func toDoc(s *store.LoopState) loopDoc {
	d := loopDoc{NextID: s.NextID, BudgetAlerted: s.BudgetAlerted}
	if s.Spent != nil {
		d.Spent = make(map[string]int64, len(s.Spent))
		for k, v := range s.Spent {
			d.Spent[k] = int64(v)
		}
	}
	if s.History != nil {
		d.History = make(map[string]map[string]int64, len(s.History))
		for k, v := range s.History {
			d.History[k] = v
		}
	}
	if s.Ladder != nil {
		d.Ladder = make(map[string]ladderDoc, len(s.Ladder))
		for k, v := range s.Ladder {
			d.Ladder[k] = ladderDoc{timePtr(v.LowSince), timePtr(v.NoProcSince), int(v.Rung), v.Zombie, v.Unit}
		}
	}
	return d
}

func fromDoc(d *loopDoc) store.LoopState {
	s := store.LoopState{NextID: d.NextID, BudgetAlerted: d.BudgetAlerted}
	if d.Spent != nil {
		s.Spent = make(map[string]core.Micros, len(d.Spent))
		for k, v := range d.Spent {
			s.Spent[k] = core.Micros(v)
		}
	}
	if d.History != nil {
		s.History = make(map[string]core.Usage, len(d.History))
		for k, v := range d.History {
			s.History[k] = core.Usage(v)
		}
	}
	if d.Ladder != nil {
		s.Ladder = make(map[string]core.LadderState, len(d.Ladder))
		for k, v := range d.Ladder {
			s.Ladder[k] = core.LadderState{LowSince: timeVal(v.LowSince), NoProcSince: timeVal(v.NoProcSince), Rung: core.Rung(v.Rung), Zombie: v.Zombie, Unit: v.Unit}
		}
	}
	return s
}

// LoadLoop implements store.Loop.
func (o *ops) LoadLoop(ctx context.Context) (store.LoopState, error) {
	var version int64
	var doc string
	err := o.r().QueryRow(ctx, `SELECT version, doc FROM loop_state WHERE id = 1`).Scan(&version, &doc)
	if errors.Is(err, ErrNoRows) {
		return store.LoopState{}, nil
	}
	if err != nil {
		return store.LoopState{}, o.fail(err, "load loop state")
	}
	var d loopDoc
	if err := unmarshal(doc, &d); err != nil {
		return store.LoopState{}, fmt.Errorf("load loop state: %w", err)
	}
	s := fromDoc(&d)
	s.Version = version
	return s, nil
}

// SaveLoop implements store.Loop.
func (o *ops) SaveLoop(ctx context.Context, s store.LoopState) (int64, error) {
	if err := store.ValidateLoop(&s); err != nil {
		return 0, fmt.Errorf("save loop state: %w", err)
	}
	doc := marshal(toDoc(&s))
	err := o.atomic(ctx, func(q Querier) error {
		var n int64
		var err error
		if s.Version == 0 {
			n, err = q.Exec(ctx, `INSERT INTO loop_state (id, version, doc) VALUES (1, 1, $1) ON CONFLICT (id) DO NOTHING`, doc)
		} else {
			n, err = q.Exec(ctx, `UPDATE loop_state SET version = version + 1, doc = $1 WHERE id = 1 AND version = $2`, doc, s.Version)
		}
		if err != nil {
			return o.fail(err, "save loop state")
		}
		if n == 0 {
			return fmt.Errorf("save loop state: %w", store.Conflict("version %d is not the stored one: another loop saved since", s.Version))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return s.Version + 1, nil
}
