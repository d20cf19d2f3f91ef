package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

const agentCols = `seq, id, lease_id, offer_id, version, source, gpus, running, state, state_at, joined_at, last_seen_at, epoch, applied_seq, backlog, token_id`

func scanAgent(r interface{ Scan(...any) error }) (store.Agent, int64, error) {
	var (
		a             store.Agent
		seq           int64
		gpus, running string
		state         string
	)
	if err := r.Scan(&seq, &a.ID, &a.LeaseID, &a.OfferID, &a.Version, &a.Source, &gpus, &running, &state,
		T(&a.StateAt), T(&a.Joined), T(&a.LastSeen), &a.Epoch, &a.AppliedSeq, &a.Backlog, &a.TokenID); err != nil {
		return a, 0, err
	}
	a.State = store.AgentState(state)
	if err := unmarshal(gpus, &a.GPUs); err != nil {
		return a, 0, fmt.Errorf("agent %s: gpus: %w", a.ID, err)
	}
	if err := unmarshal(running, &a.Running); err != nil {
		return a, 0, fmt.Errorf("agent %s: running: %w", a.ID, err)
	}
	return a, seq, nil
}

// SaveHeartbeat implements store.Agents.
func (o *ops) SaveHeartbeat(ctx context.Context, a store.Agent) (store.Agent, bool, error) {
	if err := store.ValidateAgent(&a); err != nil {
		return store.Agent{}, false, fmt.Errorf("save heartbeat: %w", err)
	}
	if a.LastSeen.IsZero() {
		return store.Agent{}, false, fmt.Errorf("save heartbeat: %w", &core.FieldError{Field: "at", Value: "", Allowed: "the time of the heartbeat"})
	}
	var prev store.Agent
	created := false
	err := o.atomic(ctx, func(q Querier) error {
		var err error
		prev, _, err = scanAgent(q.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE id = $1`, a.ID))
		switch {
		case errors.Is(err, ErrNoRows):
			created, prev = true, store.Agent{}
			_, err = q.Exec(ctx, `INSERT INTO agents (id, lease_id, offer_id, version, source, gpus, running, state, state_at, joined_at, last_seen_at, epoch, applied_seq, backlog, token_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 'ok', $8, $8, $8, '', 0, $9, $10)`,
				a.ID, a.LeaseID, a.OfferID, a.Version, a.Source, marshal(nonNilSlice(a.GPUs)), marshal(nonNilSlice(a.Running)), o.t(a.LastSeen), a.Backlog, a.TokenID)
			if err != nil {
				return o.fail(err, "join agent %s", a.ID)
			}
			return nil
		case err != nil:
			return o.fail(err, "heartbeat of agent %s", a.ID)
		}
		lease := prev.LeaseID
		if a.LeaseID != "" {
			lease = a.LeaseID
		}
		stateAt := prev.StateAt
		if prev.State != store.AgentOK {
			stateAt = a.LastSeen
		}
		tokenID := prev.TokenID
		if a.TokenID != "" {
			tokenID = a.TokenID
		}
		_, err = q.Exec(ctx, `UPDATE agents SET lease_id = $2, offer_id = $3, version = $4, source = $5, gpus = $6, running = $7,
			state = 'ok', state_at = $8, last_seen_at = $9, backlog = $10, token_id = $11 WHERE id = $1`,
			a.ID, lease, a.OfferID, a.Version, a.Source, marshal(nonNilSlice(a.GPUs)), marshal(nonNilSlice(a.Running)), o.t(stateAt), o.t(a.LastSeen), a.Backlog, tokenID)
		if err != nil {
			return o.fail(err, "heartbeat of agent %s", a.ID)
		}
		return nil
	})
	if err != nil {
		return store.Agent{}, false, err
	}
	return prev, created, nil
}

// TouchAgent implements store.Agents.
func (o *ops) TouchAgent(ctx context.Context, a store.Agent) (string, bool, error) {
	if err := store.ValidateAgent(&a); err != nil {
		return "", false, fmt.Errorf("touch agent: %w", err)
	}
	if a.LastSeen.IsZero() {
		return "", false, fmt.Errorf("touch agent: %w", &core.FieldError{Field: "at", Value: "", Allowed: "the time of the heartbeat"})
	}
	var lease string
	found := false
	// A heartbeat is one statement: it shares its COMMIT with the
	// submissions and heartbeats of the same moment.
	err := o.atomicGrouped(ctx, func(ctx context.Context, q Querier) error {
		lease, found = "", false
		err := q.QueryRow(ctx, `UPDATE agents SET lease_id = CASE WHEN $2 = '' THEN lease_id ELSE $2 END, offer_id = $3, version = $4, source = $5,
			gpus = $6, running = $7, last_seen_at = $8, backlog = $9 WHERE id = $1 AND state = 'ok' AND token_id = $10 RETURNING lease_id`,
			a.ID, a.LeaseID, a.OfferID, a.Version, a.Source, marshal(nonNilSlice(a.GPUs)), marshal(nonNilSlice(a.Running)), o.t(a.LastSeen), a.Backlog, a.TokenID).Scan(&lease)
		switch {
		case errors.Is(err, ErrNoRows):
			return nil
		case err != nil:
			return o.fail(err, "heartbeat of agent %s", a.ID)
		}
		found = true
		return nil
	})
	return lease, found, err
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// GetAgent implements store.Agents.
func (o *ops) GetAgent(ctx context.Context, id string) (store.Agent, error) {
	if err := store.CheckID("agent", id); err != nil {
		return store.Agent{}, fmt.Errorf("get agent: %w", err)
	}
	a, _, err := scanAgent(o.r().QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE id = $1`, id))
	if err != nil {
		return store.Agent{}, fmt.Errorf("get agent: %w", one(o.s.b.Classify(err), "agent", id))
	}
	return a, nil
}

// ListAgents implements store.Agents.
func (o *ops) ListAgents(ctx context.Context, f store.AgentFilter) (store.Page[store.Agent], error) {
	limit, err := store.PageLimit(f.Limit)
	if err != nil {
		return store.Page[store.Agent]{}, fmt.Errorf("list agents: %w", err)
	}
	after, ok, err := store.DecodeCursor("agents", f.Cursor)
	if err != nil {
		return store.Page[store.Agent]{}, fmt.Errorf("list agents: %w", err)
	}
	var w where
	if len(f.States) > 0 {
		vs := make([]any, len(f.States))
		for i, s := range f.States {
			if _, err := store.ParseAgentState("state", string(s)); err != nil {
				return store.Page[store.Agent]{}, fmt.Errorf("list agents: %w", err)
			}
			vs[i] = string(s)
		}
		w.add("state IN " + w.list(vs...))
	}
	if f.LeaseID != "" {
		w.add("lease_id = " + w.p(f.LeaseID))
	}
	if ok {
		w.add("seq > " + w.p(after))
	}
	rows, err := o.r().Query(ctx, `SELECT `+agentCols+` FROM agents`+w.String()+` ORDER BY seq LIMIT `+w.p(limit+1), w.vals...)
	if err != nil {
		return store.Page[store.Agent]{}, o.fail(err, "list agents")
	}
	defer rows.Close()
	var page store.Page[store.Agent]
	var seqs []int64
	for rows.Next() {
		a, seq, err := scanAgent(rows)
		if err != nil {
			return store.Page[store.Agent]{}, fmt.Errorf("list agents: %w", err)
		}
		page.Items = append(page.Items, a)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Agent]{}, o.fail(err, "list agents")
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		page.Next = store.EncodeCursor("agents", seqs[limit-1])
	}
	return page, nil
}

// SetAgentState implements store.Agents.
func (o *ops) SetAgentState(ctx context.Context, id string, state store.AgentState, at time.Time) error {
	if _, err := store.ParseAgentState("state", string(state)); err != nil {
		return fmt.Errorf("set agent state: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("set agent state: %w", &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	return o.updateAgent(ctx, id, "set state of", `UPDATE agents SET state = $2, state_at = $3 WHERE id = $1`, id, string(state), o.t(at))
}

// BindAgent implements store.Agents.
func (o *ops) BindAgent(ctx context.Context, id, leaseID string) error {
	if err := store.CheckOptionalID("lease", leaseID); err != nil {
		return fmt.Errorf("bind agent: %w", err)
	}
	return o.updateAgent(ctx, id, "bind", `UPDATE agents SET lease_id = $2 WHERE id = $1`, id, leaseID)
}

// AdvanceAgent implements store.Agents.
func (o *ops) AdvanceAgent(ctx context.Context, id, epoch string, seq int64) error {
	if seq < 0 {
		return fmt.Errorf("advance agent: %w", &core.FieldError{Field: "seq", Value: fmt.Sprint(seq), Allowed: ">= 0"})
	}
	if err := store.CheckText("epoch", epoch); err != nil {
		return fmt.Errorf("advance agent: %w", err)
	}
	return o.updateAgent(ctx, id, "advance", `UPDATE agents SET epoch = $2, applied_seq = $3 WHERE id = $1`, id, epoch, seq)
}

// update runs a one-row update of agent id; no row is ErrNotFound.
func (o *ops) updateAgent(ctx context.Context, id, what, sql string, a ...any) error {
	if err := store.CheckID("agent", id); err != nil {
		return fmt.Errorf("%s agent: %w", what, err)
	}
	return o.atomic(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, sql, a...)
		if err != nil {
			return o.fail(err, "%s agent %s", what, id)
		}
		if n == 0 {
			return fmt.Errorf("%s agent: %w", what, store.NotFound("agent", id))
		}
		return nil
	})
}

const commandCols = `id, agent_id, kind, unit, job_id, team_id, run_id, spec, reason, created_at, acked_at, result`

func scanCommand(r interface{ Scan(...any) error }) (store.AgentCommand, error) {
	var c store.AgentCommand
	err := r.Scan(&c.ID, &c.Agent, &c.Kind, &c.Unit, &c.Job, &c.Team, &c.Run, &c.Spec, &c.Reason, T(&c.Created), T(&c.Acked), &c.Result)
	return c, err
}

// EnqueueCommands implements store.Agents.
func (o *ops) EnqueueCommands(ctx context.Context, cmds ...store.AgentCommand) error {
	for i := range cmds {
		if err := store.ValidateCommand(&cmds[i]); err != nil {
			return fmt.Errorf("enqueue commands: command %d: %w", i, err)
		}
	}
	return o.atomic(ctx, func(q Querier) error {
		for _, c := range cmds {
			if _, err := q.Exec(ctx, `INSERT INTO agent_commands (id, agent_id, kind, unit, job_id, team_id, run_id, spec, reason, created_at, result)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '') ON CONFLICT (id) DO NOTHING`,
				c.ID, c.Agent, c.Kind, c.Unit, c.Job, c.Team, c.Run, c.Spec, c.Reason, o.t(c.Created)); err != nil {
				return o.fail(err, "enqueue command %s for agent %s", c.ID, c.Agent)
			}
		}
		return nil
	})
}

// PendingCommands implements store.Agents.
func (o *ops) PendingCommands(ctx context.Context, agent string) ([]store.AgentCommand, error) {
	if err := store.CheckID("agent", agent); err != nil {
		return nil, fmt.Errorf("pending commands: %w", err)
	}
	rows, err := o.r().Query(ctx, `SELECT `+commandCols+` FROM agent_commands WHERE agent_id = $1 AND acked_at IS NULL ORDER BY seq LIMIT 1000`, agent)
	if err != nil {
		return nil, o.fail(err, "pending commands of agent %s", agent)
	}
	defer rows.Close()
	var out []store.AgentCommand
	for rows.Next() {
		c, err := scanCommand(rows)
		if err != nil {
			return nil, fmt.Errorf("pending commands: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "pending commands of agent %s", agent)
	}
	return out, nil
}

// GetCommand implements store.Agents.
func (o *ops) GetCommand(ctx context.Context, id string) (store.AgentCommand, error) {
	if err := store.CheckID("command", id); err != nil {
		return store.AgentCommand{}, fmt.Errorf("get command: %w", err)
	}
	c, err := scanCommand(o.r().QueryRow(ctx, `SELECT `+commandCols+` FROM agent_commands WHERE id = $1`, id))
	if err != nil {
		return store.AgentCommand{}, fmt.Errorf("get command: %w", one(o.s.b.Classify(err), "command", id))
	}
	return c, nil
}

// AckCommand implements store.Agents.
func (o *ops) AckCommand(ctx context.Context, agent, id string, at time.Time, result string) error {
	if err := store.CheckID("command", id); err != nil {
		return fmt.Errorf("ack command: %w", err)
	}
	if err := store.CheckText("result", result); err != nil {
		return fmt.Errorf("ack command: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("ack command: %w", &core.FieldError{Field: "at", Value: "", Allowed: "a non-zero time"})
	}
	return o.atomic(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE agent_commands SET acked_at = $3, result = $4 WHERE id = $1 AND agent_id = $2 AND acked_at IS NULL`, id, agent, o.t(at), result)
		if err != nil {
			return o.fail(err, "ack command %s", id)
		}
		if n > 0 {
			return nil
		}
		var x int
		if err := q.QueryRow(ctx, `SELECT 1 FROM agent_commands WHERE id = $1 AND agent_id = $2`, id, agent).Scan(&x); err != nil {
			return fmt.Errorf("ack command: %w", one(err, "command of agent "+agent, id))
		}
		return nil
	})
}

// AppendReports implements store.Agents.
func (o *ops) AppendReports(ctx context.Context, rs ...store.AgentReport) error {
	for i := range rs {
		if err := store.ValidateReport(&rs[i]); err != nil {
			return fmt.Errorf("append reports: report %d: %w", i, err)
		}
	}
	return o.atomic(ctx, func(q Querier) error {
		for _, r := range rs {
			attrs := r.Attrs
			if attrs == nil {
				attrs = map[string]string{}
			}
			if _, err := q.Exec(ctx, `INSERT INTO agent_reports (agent_id, kind, run_id, at, reason, attrs) VALUES ($1, $2, $3, $4, $5, $6)`,
				r.Agent, r.Kind, r.Run, o.t(r.At), r.Reason, marshal(attrs)); err != nil {
				return o.fail(err, "append report %s of agent %s", r.Kind, r.Agent)
			}
		}
		return nil
	})
}

// PendingReports implements store.Agents.
func (o *ops) PendingReports(ctx context.Context, limit int) ([]store.AgentReport, error) {
	if limit < 0 || limit > store.MaxReports {
		return nil, fmt.Errorf("pending reports: %w", &core.FieldError{Field: "limit", Value: fmt.Sprint(limit), Allowed: fmt.Sprintf("0..%d", store.MaxReports)})
	}
	if limit == 0 {
		limit = store.MaxReports
	}
	rows, err := o.r().Query(ctx, `SELECT seq, agent_id, kind, run_id, at, reason, attrs FROM agent_reports ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, o.fail(err, "pending reports")
	}
	defer rows.Close()
	var out []store.AgentReport
	for rows.Next() {
		var r store.AgentReport
		var attrs string
		if err := rows.Scan(&r.Seq, &r.Agent, &r.Kind, &r.Run, T(&r.At), &r.Reason, &attrs); err != nil {
			return nil, fmt.Errorf("pending reports: %w", err)
		}
		if err := unmarshal(attrs, &r.Attrs); err != nil {
			return nil, fmt.Errorf("pending reports: report %d: attrs: %w", r.Seq, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, o.fail(err, "pending reports")
	}
	return out, nil
}

// DeleteReports implements store.Agents. The numbers read are mostly
// contiguous, so they go as ranges, a few hundred to a statement.
func (o *ops) DeleteReports(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	s := slices.Clone(seqs)
	slices.Sort(s)
	type span struct{ lo, hi int64 }
	var spans []span
	for _, n := range s {
		if k := len(spans) - 1; k >= 0 && n <= spans[k].hi+1 {
			spans[k].hi = max(spans[k].hi, n)
			continue
		}
		spans = append(spans, span{n, n})
	}
	const perStatement = 200
	return o.atomic(ctx, func(q Querier) error {
		for len(spans) > 0 {
			batch := spans[:min(perStatement, len(spans))]
			spans = spans[len(batch):]
			var where strings.Builder
			args := make([]any, 0, 2*len(batch))
			for i, sp := range batch {
				if i > 0 {
					where.WriteString(" OR ")
				}
				fmt.Fprintf(&where, "seq BETWEEN $%d AND $%d", len(args)+1, len(args)+2)
				args = append(args, sp.lo, sp.hi)
			}
			if _, err := q.Exec(ctx, `DELETE FROM agent_reports WHERE `+where.String(), args...); err != nil {
				return o.fail(err, "delete %d reports", len(seqs))
			}
		}
		return nil
	})
}
