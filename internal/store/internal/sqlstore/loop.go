package sqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	HistoryAt     *time.Time                  `json:"history_at,omitempty"`
	Demand        *demandDoc                  `json:"demand,omitempty"`
	Refused       []refusalDoc                `json:"refused,omitempty"`
	Runs          []runsDoc                   `json:"runs,omitempty"`
	Ratios        map[string][]int64          `json:"ratios,omitempty"`
	Ladder        map[string]ladderDoc        `json:"ladder"`
	BudgetAlerted map[string]bool             `json:"budget_alerted"`
}

// demandDoc is the demand history, compact: a week of it can be many
// thousands of points, saved every tick. Point i is at From plus the
// sum of DtUS[0..i] microseconds, with Milli[i].
type demandDoc struct {
	From  time.Time `json:"from"`
	DtUS  []int64   `json:"dt_us"`
	Milli []int64   `json:"milli"`
}

func demandToDoc(pts []core.DemandPoint) *demandDoc {
	if len(pts) == 0 {
		return nil
	}
	d := &demandDoc{From: store.Micro(pts[0].At), DtUS: make([]int64, len(pts)), Milli: make([]int64, len(pts))}
	last := d.From
	for i, p := range pts {
		at := store.Micro(p.At)
		d.DtUS[i], d.Milli[i] = at.Sub(last).Microseconds(), p.Milli
		last = at
	}
	return d
}

func demandFromDoc(d *demandDoc) ([]core.DemandPoint, error) {
	if d == nil {
		return nil, nil
	}
	if len(d.DtUS) != len(d.Milli) {
		return nil, fmt.Errorf("demand: %d times for %d values", len(d.DtUS), len(d.Milli))
	}
	out := make([]core.DemandPoint, len(d.DtUS))
	at := d.From.UTC()
	for i := range d.DtUS {
		at = at.Add(time.Duration(d.DtUS[i]) * time.Microsecond)
		out[i] = core.DemandPoint{At: at, Milli: d.Milli[i]}
	}
	return out, nil
}

// runsDoc is a core.DurationRuns.
type runsDoc struct {
	Team    string  `json:"team"`
	Command string  `json:"command"`
	Seconds []int64 `json:"seconds"`
}

// refusalDoc is a core.Refusal.
type refusalDoc struct {
	Offer  string    `json:"offer"`
	Mode   string    `json:"mode"`
	Until  time.Time `json:"until"`
	WaitNS int64     `json:"wait_ns"`
}

type ladderDoc struct {
	LowSince    *time.Time `json:"low_since,omitempty"`
	NoProcSince *time.Time `json:"no_proc_since,omitempty"`
	Rung        int        `json:"rung"`
	Zombie      bool       `json:"zombie,omitempty"`
	Unit        string     `json:"unit"`
	// Window is the ladder's window of readings as [unix µs, pct] pairs.
	Window [][2]int64 `json:"window,omitempty"`
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
	d := loopDoc{NextID: s.NextID, HistoryAt: timePtr(s.HistoryAt), Demand: demandToDoc(s.Demand), BudgetAlerted: s.BudgetAlerted}
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
	for _, r := range s.Runs {
		d.Runs = append(d.Runs, runsDoc{Team: r.Team, Command: r.Command, Seconds: r.Seconds})
	}
	if len(s.Ratios) > 0 {
		d.Ratios = s.Ratios
	}
	for _, r := range s.Refused {
		d.Refused = append(d.Refused, refusalDoc{Offer: r.Offer, Mode: string(r.Mode), Until: store.Micro(r.Until), WaitNS: int64(r.Wait)})
	}
	if s.Ladder != nil {
		d.Ladder = make(map[string]ladderDoc, len(s.Ladder))
		for k, v := range s.Ladder {
			ld := ladderDoc{timePtr(v.LowSince), timePtr(v.NoProcSince), int(v.Rung), v.Zombie, v.Unit, nil}
			for _, p := range v.Window {
				ld.Window = append(ld.Window, [2]int64{p.At.UnixMicro(), int64(p.Pct)})
			}
			d.Ladder[k] = ld
		}
	}
	return d
}

func fromDoc(d *loopDoc) store.LoopState {
	s := store.LoopState{NextID: d.NextID, HistoryAt: timeVal(d.HistoryAt), BudgetAlerted: d.BudgetAlerted}
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
	for _, r := range d.Runs {
		s.Runs = append(s.Runs, core.DurationRuns{Team: r.Team, Command: r.Command, Seconds: r.Seconds})
	}
	s.Ratios = d.Ratios
	for _, r := range d.Refused {
		s.Refused = append(s.Refused, core.Refusal{Offer: r.Offer, Mode: core.BillingMode(r.Mode), Until: r.Until.UTC(), Wait: time.Duration(r.WaitNS)})
	}
	if d.Ladder != nil {
		s.Ladder = make(map[string]core.LadderState, len(d.Ladder))
		for k, v := range d.Ladder {
			ls := core.LadderState{LowSince: timeVal(v.LowSince), NoProcSince: timeVal(v.NoProcSince), Rung: core.Rung(v.Rung), Zombie: v.Zombie, Unit: v.Unit}
			for _, p := range v.Window {
				ls.Window = append(ls.Window, core.UtilPoint{At: time.UnixMicro(p[0]).UTC(), Pct: int(p[1])})
			}
			s.Ladder[k] = ls
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
	if s.Demand, err = demandFromDoc(d.Demand); err != nil {
		return store.LoopState{}, fmt.Errorf("load loop state: %w", err)
	}
	s.Version = version
	return s, nil
}

// TakeInbox implements store.Loop.
func (o *ops) TakeInbox(ctx context.Context) ([]string, error) {
	var ids []string
	err := o.atomic(ctx, func(q Querier) error {
		ids = ids[:0]
		rows, err := q.Query(ctx, `DELETE FROM loop_inbox RETURNING seq, job_id`)
		if err != nil {
			return o.fail(err, "take the loop's inbox")
		}
		type entry struct {
			seq int64
			job string
		}
		var es []entry
		for rows.Next() {
			var e entry
			if err := rows.Scan(&e.seq, &e.job); err != nil {
				rows.Close()
				return o.fail(err, "take the loop's inbox")
			}
			es = append(es, e)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return o.fail(err, "take the loop's inbox")
		}
		// RETURNING promises no order.
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
		seen := make(map[string]bool, len(es))
		for _, e := range es {
			if !seen[e.job] {
				seen[e.job] = true
				ids = append(ids, e.job)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
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

// RecordLeader implements store.Leaders.
func (o *ops) RecordLeader(ctx context.Context, replica string, at time.Time) (store.Leadership, error) {
	if err := store.CheckID("replica", replica); err != nil {
		return store.Leadership{}, fmt.Errorf("record leader: %w", err)
	}
	if at.IsZero() {
		return store.Leadership{}, fmt.Errorf("record leader: %w", &core.FieldError{Field: "since", Value: "", Allowed: "a non-zero time"})
	}
	l := store.Leadership{Replica: replica, Since: store.Micro(at)}
	err := o.atomic(ctx, func(q Querier) error {
		err := q.QueryRow(ctx, `INSERT INTO loop_leader (id, replica, since, term) VALUES (1, $1, $2, 1)
			ON CONFLICT (id) DO UPDATE SET replica = excluded.replica, since = excluded.since, term = loop_leader.term + 1
			RETURNING term`, replica, o.t(at)).Scan(&l.Term)
		if err != nil {
			return o.fail(err, "record leader %q", replica)
		}
		return nil
	})
	if err != nil {
		return store.Leadership{}, err
	}
	return l, nil
}

// LoadLeader implements store.Leaders.
func (o *ops) LoadLeader(ctx context.Context) (store.Leadership, error) {
	var l store.Leadership
	err := o.r().QueryRow(ctx, `SELECT replica, since, term FROM loop_leader WHERE id = 1`).Scan(&l.Replica, T(&l.Since), &l.Term)
	if errors.Is(err, ErrNoRows) {
		return store.Leadership{}, nil
	}
	if err != nil {
		return store.Leadership{}, o.fail(err, "load leader")
	}
	return l, nil
}
