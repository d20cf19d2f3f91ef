package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
)

// agentsOnly is the role every route of the protocol takes.
var agentsOnly = []store.Role{store.RoleAgent}

// Event kinds the agent reports that the control loop acts on: the
// runner's, and the checkpoint the agent saw a job write.
const (
	agentJobStarted    = "job-started"
	agentJobSignal     = "job-signal"
	agentJobExited     = "job-exited"
	agentJobCheckpoint = "job-checkpoint"
	agentCommandResult = "agent-command"
	// agentRunRefused is the report of a run command the agent refused.
	agentRunRefused = "run-refused"
	// agentSpotNotice is a spot interruption notice the agent read from
	// its machine (attrs reclaim_at, action): the loop gives the lease
	// that ReclaimAt and checkpoints its runs (server/spotnotice.go).
	agentSpotNotice = "spot-notice"
)

// Protocol serves the agent protocol's routes over a store: the server
// mounts them (Routes) beside the REST API's, behind the same
// authentication, on the same address.
type Protocol struct {
	store   store.Store
	catalog *pricing.Catalog
	clock   clock.Clock
	log     *slog.Logger
}

// New returns the agent protocol over st; a heartbeat's offer must be
// one of catalog's. Time comes from clk; logs go to log. A nil st is
// allowed: the server answers every agent route 503 before it gets here
// (httpapi.Middleware.Authenticate).
func New(st store.Store, catalog *pricing.Catalog, clk clock.Clock, log *slog.Logger) *Protocol {
	return &Protocol{store: st, catalog: catalog, clock: clk, log: log}
}

// Routes are the routes node agents call: join and heartbeat, samples,
// events, commands and their acknowledgement, and run logs. Each takes
// an agent token only.
func (s *Protocol) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Pattern: "POST /api/v1/agent/heartbeat", Summary: "An agent's join and heartbeat: its offer, GPUs, running jobs and backlog (agent).", Handler: s.agentHeartbeat, Roles: agentsOnly},
		{Pattern: "POST /api/v1/agent/samples", Summary: "A batch of an agent's sample and summary records, applied once by sequence number (agent).", Handler: s.agentSamples, Roles: agentsOnly},
		{Pattern: "POST /api/v1/agent/events", Summary: "A batch of an agent's event records (job started, signalled, exited with status and resource use; checkpoint written; command results), applied once by sequence number (agent).", Handler: s.agentEvents, Roles: agentsOnly},
		{Pattern: "GET /api/v1/agent/commands", Summary: "The commands waiting for an agent: run a unit on GPUs, checkpoint, stop or kill a run (agent).", Handler: s.agentCommands, Roles: agentsOnly},
		{Pattern: "POST /api/v1/agent/commands/{id}/ack", Summary: "Acknowledge a command with its result (agent).", Handler: s.agentAck, Roles: agentsOnly},
		{Pattern: "POST /api/v1/agent/logs", Summary: "A chunk of a run's output at its byte offset; resent bytes are skipped, a gap is a 409 naming where to resume (agent).", Handler: s.agentLogs, Roles: agentsOnly},
	}
}

// Bodies describe the routes' bodies and query parameters for the
// OpenAPI document, by pattern: the wire types are the agent's own.
func Bodies() map[string]httpapi.Body {
	return map[string]httpapi.Body{
		"POST /api/v1/agent/heartbeat":         {Request: link.Heartbeat{}, Response: link.HeartbeatReply{}},
		"POST /api/v1/agent/samples":           {Request: link.RecordBatch{}, Response: link.BatchReply{}},
		"POST /api/v1/agent/events":            {Request: link.RecordBatch{}, Response: link.BatchReply{}},
		"GET /api/v1/agent/commands":           {Response: link.CommandsReply{}, Params: []string{"agent"}},
		"POST /api/v1/agent/commands/{id}/ack": {Request: link.AckRequest{}, Response: link.AckRequest{}},
		"POST /api/v1/agent/logs":              {Request: link.LogChunk{}, Response: link.LogChunkReply{}},
	}
}

// internal logs err and answers 500 without its detail.
func (s *Protocol) internal(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.Internal(s.log, w, r, err)
}

// storeError answers err from the store (httpapi.StoreError).
func (s *Protocol) storeError(w http.ResponseWriter, r *http.Request, err error, field string) {
	httpapi.StoreError(s.log, w, r, err, field)
}

// agentID checks the agent named in a request.
func agentID(w http.ResponseWriter, id string) bool {
	if err := store.CheckID("agent", id); err != nil {
		httpapi.WriteValidation(w, err)
		return false
	}
	return true
}

func (s *Protocol) agentHeartbeat(w http.ResponseWriter, r *http.Request) {
	var hb link.Heartbeat
	if !httpapi.Decode(w, r, &hb) {
		return
	}
	if !agentID(w, hb.Agent) {
		return
	}
	a := store.Agent{ID: hb.Agent, LeaseID: hb.LeaseID, OfferID: hb.Offer, Version: hb.Version, Source: hb.Source,
		Running: hb.Jobs, Backlog: int64(hb.Backlog), LastSeen: s.clock.Now()}
	for _, g := range hb.GPUs {
		a.GPUs = append(a.GPUs, store.AgentGPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MIG: g.MIG, MemTotalMiB: g.MemTotalMiB})
	}
	if hb.Offer != "" {
		if _, err := s.catalog.Offer(hb.Offer); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "offer", fmt.Sprintf("offer %q: want an offer id of the server's catalog", hb.Offer))
			return
		}
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	if msg := mayName(p, a.ID, true); msg != "" {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "agent", msg)
		return
	}
	if p.Kind != store.TokenShared && hb.LeaseID != "" && hb.LeaseID != p.Lease {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "lease_id", fmt.Sprintf("lease %q: this token is lease %s's", hb.LeaseID, p.Lease))
		return
	}
	if p.Kind == store.TokenJoin {
		s.agentJoin(w, r, a, p)
		return
	}
	if p.Kind == store.TokenAgent {
		a.LeaseID = p.Lease
	}
	a.TokenID = p.TokenID
	// The common case, an agent that is ok heartbeating again with its
	// own token, is one statement; a join, a recovery or another token
	// is checked and written with its event, together.
	if lease, ok, err := s.store.Agents().TouchAgent(r.Context(), a); err != nil {
		s.storeError(w, r, err, "agent")
		return
	} else if ok {
		httpapi.WriteJSON(w, http.StatusOK, link.HeartbeatReply{Agent: a.ID, Lease: lease, State: string(store.AgentOK)})
		return
	}
	var prev store.Agent
	var created bool
	err := s.store.Tx(r.Context(), func(tx store.Tx) error {
		if old, err := tx.Agents().GetAgent(r.Context(), a.ID); err == nil {
			if err := s.ownAgent(r.Context(), tx, p, &old, true); err != nil {
				return err
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var err error
		prev, created, err = tx.Agents().SaveHeartbeat(r.Context(), a)
		if err != nil {
			return err
		}
		switch {
		case created:
			_, err = tx.Events().AppendEvents(r.Context(), core.Event{At: a.LastSeen, Kind: "agent.joined", Subject: a.ID,
				Reason: fmt.Sprintf("agent %s joined: offer %q, %d GPUs, source %s, version %q", a.ID, a.OfferID, len(a.GPUs), a.Source, a.Version)})
		case prev.State != store.AgentOK:
			_, err = tx.Events().AppendEvents(r.Context(), core.Event{At: a.LastSeen, Kind: "agent.ok", Subject: a.ID,
				Reason: fmt.Sprintf("agent %s heartbeats again after %s silent (was %s)", a.ID, a.LastSeen.Sub(prev.LastSeen).Round(time.Millisecond), prev.State)})
		}
		return err
	})
	if denied(w, err) {
		return
	}
	if err != nil {
		s.storeError(w, r, err, "agent")
		return
	}
	lease := prev.LeaseID
	if a.LeaseID != "" {
		lease = a.LeaseID
	}
	httpapi.WriteJSON(w, http.StatusOK, link.HeartbeatReply{Agent: a.ID, Lease: lease, State: string(store.AgentOK), Joined: created})
}

// Who may speak for an agent. An agent token is one of three kinds
// (store.TokenKind):
//   - a lease's join token only joins: one heartbeat as that lease's
//     machine, which claims it for the agent id it names and answers with
//     the agent's own credential (agentJoin);
//   - an agent credential speaks for its one agent id, on its lease;
//   - a shared token (an admin's, for agents started by hand) joins
//     agents of any id, and each is bound to it.
// Whatever the kind, an agent is bound to the token it joined with, and
// another token naming it is refused (403) while that one is active: a
// token stolen from one machine cannot fetch another's commands, send
// its records or acknowledge for it. An agent whose token was revoked or
// expired may rejoin with another (token rotation).

// mayName is why p may not name agent id ("" if it may): join says the
// request is a heartbeat.
func mayName(p httpapi.Principal, id string, join bool) string {
	switch p.Kind {
	case store.TokenJoin:
		if !join {
			return "a join token only joins (POST /api/v1/agent/heartbeat): send the credential the join's reply gave"
		}
		if p.Agent != "" && p.Agent != id {
			return fmt.Sprintf("this join token was used by agent %s: it joins one agent, once", p.Agent)
		}
	case store.TokenAgent:
		if p.Agent != id {
			return fmt.Sprintf("this credential speaks for agent %s only, not %s", p.Agent, id)
		}
	}
	return ""
}

// agentDenied is a request for an agent its token may not speak for.
type agentDenied struct{ msg string }

func (e *agentDenied) Error() string { return e.msg }

// denied writes a 403 for an agentDenied err and reports whether it did.
func denied(w http.ResponseWriter, err error) bool {
	var d *agentDenied
	if errors.As(err, &d) {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "agent", d.msg)
		return true
	}
	return false
}

// ownAgent checks that p may speak for the stored agent a: a is bound to
// p's token or to none (an agent that joined before tokens were bound);
// with rejoin, also when the token a is bound to is no longer active.
func (s *Protocol) ownAgent(ctx context.Context, tx store.Tx, p httpapi.Principal, a *store.Agent, rejoin bool) error {
	if a.TokenID == "" || a.TokenID == p.TokenID {
		return nil
	}
	if rejoin {
		bound, err := tx.Tokens().GetToken(ctx, a.TokenID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !bound.Active(s.clock.Now())) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return &agentDenied{fmt.Sprintf("agent %s joined with another token: this one may not speak for it", a.ID)}
}

// speaksFor checks that the request's token may speak for agent id,
// writing a 403 (or a store error) when it may not. An agent that has
// not joined has nothing to take: the route answers as for any unknown
// agent.
func (s *Protocol) speaksFor(w http.ResponseWriter, r *http.Request, id string) bool {
	p, _ := httpapi.PrincipalFrom(r.Context())
	if msg := mayName(p, id, false); msg != "" {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "agent", msg)
		return false
	}
	a, err := s.store.Agents().GetAgent(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return true
	}
	if err != nil {
		s.storeError(w, r, err, "agent")
		return false
	}
	if a.TokenID != "" && a.TokenID != p.TokenID {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "agent", fmt.Sprintf("agent %s joined with another token: this one may not speak for it", id))
		return false
	}
	return true
}

// agentJoin is a heartbeat with lease p.Lease's join token: in one
// transaction it claims the token for agent a (a join token joins one
// agent id; the same agent may repeat its join until the token expires,
// when the reply was lost), revokes the lease's other join tokens and
// any credential an earlier join of it got, mints the agent's own
// credential, and saves the heartbeat bound to the lease. The reply
// carries the credential's secret, shown this once.
func (s *Protocol) agentJoin(w http.ResponseWriter, r *http.Request, a store.Agent, p httpapi.Principal) {
	ctx := r.Context()
	now := a.LastSeen
	a.LeaseID = p.Lease
	secret, hash, err := store.NewToken()
	if err != nil {
		s.internal(w, r, err)
		return
	}
	credID, err := httpapi.NewID("tok")
	if err != nil {
		s.internal(w, r, err)
		return
	}
	var prev store.Agent
	var created bool
	err = s.store.Tx(ctx, func(tx store.Tx) error {
		le, err := tx.Leases().GetLease(ctx, p.Lease)
		if errors.Is(err, store.ErrNotFound) {
			return &agentDenied{fmt.Sprintf("lease %s of this join token is unknown", p.Lease)}
		}
		if err != nil {
			return err
		}
		if le.State.Final() {
			return &agentDenied{fmt.Sprintf("lease %s of this join token has ended (%s)", p.Lease, le.State)}
		}
		bound, err := tx.Tokens().ClaimToken(ctx, p.TokenID, a.ID)
		if err != nil {
			return err
		}
		if bound != a.ID {
			return &agentDenied{fmt.Sprintf("this join token was used by agent %s: it joins one agent, once", bound)}
		}
		if old, err := tx.Agents().GetAgent(ctx, a.ID); err == nil && old.TokenID != "" {
			t, err := tx.Tokens().GetToken(ctx, old.TokenID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err // a serialization failure must abort and retry the transaction
			}
			if err == nil && t.Active(now) && t.Lease != p.Lease {
				return &agentDenied{fmt.Sprintf("agent %s joined with another token: a join token of lease %s may not take it over", a.ID, p.Lease)}
			}
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if _, err := tx.Tokens().RevokeLeaseTokens(ctx, p.Lease, []string{p.TokenID}, now); err != nil {
			return err
		}
		if err := tx.Tokens().CreateToken(ctx, store.Token{ID: credID, Hash: hash, Role: store.RoleAgent, Name: "agent " + a.ID + " of lease " + p.Lease,
			Prefix: store.SecretPrefix(secret), Created: now, Kind: store.TokenAgent, Lease: p.Lease, Agent: a.ID}); err != nil {
			return err
		}
		a.TokenID = credID
		prev, created, err = tx.Agents().SaveHeartbeat(ctx, a)
		if err != nil {
			return err
		}
		_, err = tx.Events().AppendEvents(ctx,
			core.Event{At: now, Kind: "agent.joined", Subject: a.ID,
				Reason: fmt.Sprintf("agent %s joined lease %s with its join token (%s): offer %q, %d GPUs, source %s, version %q; its own credential is %s",
					a.ID, p.Lease, p.TokenID, a.OfferID, len(a.GPUs), a.Source, a.Version, credID),
				Attrs: map[string]string{"lease": p.Lease, "token": credID, "rejoin": strconv.FormatBool(!created)}},
			core.Event{At: now, Kind: "audit.token_created", Subject: credID,
				Reason: fmt.Sprintf("agent %s joined lease %s: its own credential, for that agent only", a.ID, p.Lease),
				Attrs:  map[string]string{"actor": p.Actor(), "role": string(store.RoleAgent)}})
		return err
	})
	if denied(w, err) {
		return
	}
	if err != nil {
		s.storeError(w, r, err, "agent")
		return
	}
	_ = prev
	httpapi.WriteJSON(w, http.StatusOK, link.HeartbeatReply{Agent: a.ID, Lease: p.Lease, State: string(store.AgentOK), Joined: created, Token: secret})
}

// applyBatch checks a batch, then in one transaction applies the records
// above the agent's high-water mark with apply and raises the mark.
func (s *Protocol) applyBatch(w http.ResponseWriter, r *http.Request, events bool, apply func(tx store.Tx, a store.Agent, recs []link.Record) error) {
	var b link.RecordBatch
	if !httpapi.Decode(w, r, &b) {
		return
	}
	if !agentID(w, b.Agent) {
		return
	}
	if len(b.Records) > 4096 {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "records", fmt.Sprintf("records: %d in one batch, at most 4096", len(b.Records)))
		return
	}
	var prev uint64
	for i, rec := range b.Records {
		if err := rec.Validate(); err != nil {
			httpapi.WriteValidation(w, fmt.Errorf("records[%d]: %w", i, err))
			return
		}
		if (rec.Kind == link.KindEvent) != events {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("records[%d].kind", i),
				fmt.Sprintf("records[%d]: a %s record sent to the %s route", i, rec.Kind, map[bool]string{true: "events", false: "samples"}[events]))
			return
		}
		if rec.Seq == 0 || rec.Seq > 1<<62 || (i > 0 && rec.Seq <= prev) {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("records[%d].seq", i),
				fmt.Sprintf("records[%d].seq %d: want sequence numbers above 0, strictly increasing within the batch (previous %d)", i, rec.Seq, prev))
			return
		}
		prev = rec.Seq
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	if msg := mayName(p, b.Agent, false); msg != "" {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "agent", msg)
		return
	}
	var reply link.BatchReply
	err := s.store.Tx(r.Context(), func(tx store.Tx) error {
		a, err := tx.Agents().GetAgent(r.Context(), b.Agent)
		if err != nil {
			return err
		}
		if err := s.ownAgent(r.Context(), tx, p, &a, false); err != nil {
			return err
		}
		applied := a.AppliedSeq
		if b.Epoch != a.Epoch {
			applied = 0 // a new outbox numbers from 1 again
		}
		var fresh []link.Record
		for _, rec := range b.Records {
			if int64(rec.Seq) <= applied {
				reply.Duplicates++
				continue
			}
			fresh = append(fresh, rec)
		}
		reply.New = len(fresh)
		if len(fresh) > 0 {
			if err := apply(tx, a, fresh); err != nil {
				return err
			}
			applied = int64(fresh[len(fresh)-1].Seq)
		}
		reply.Applied = applied
		if applied != a.AppliedSeq || b.Epoch != a.Epoch {
			return tx.Agents().AdvanceAgent(r.Context(), a.ID, b.Epoch, applied)
		}
		return nil
	})
	if denied(w, err) {
		return
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			httpapi.WriteError(w, http.StatusNotFound, "not_found", "agent", fmt.Sprintf("agent %q has not joined: heartbeat first", b.Agent))
			return
		}
		s.storeError(w, r, err, "records")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, reply)
}

func (s *Protocol) agentSamples(w http.ResponseWriter, r *http.Request) {
	s.applyBatch(w, r, false, func(tx store.Tx, a store.Agent, recs []link.Record) error {
		var samples []core.Sample
		var events []core.Event
		for _, rec := range recs {
			if rec.Kind == link.KindSummary {
				sm := rec.Summary
				events = append(events, core.Event{At: s.clock.Now(), Kind: "agent.samples-summarised", Subject: a.ID,
					Reason: fmt.Sprintf("agent %s kept a summary of %d samples (records %d..%d) to stay within its outbox bound", a.ID, sm.Samples(), sm.FromSeq, sm.ToSeq),
					Attrs:  map[string]string{"from_seq": strconv.FormatUint(sm.FromSeq, 10), "to_seq": strconv.FormatUint(sm.ToSeq, 10), "samples": strconv.FormatInt(sm.Samples(), 10)}})
				continue
			}
			c, known := rec.Sample.Core()
			if !known {
				continue // says nothing of idleness; the ladder would take it for idle
			}
			if a.LeaseID != "" {
				c.LeaseID = a.LeaseID // the server's name for the machine wins
			}
			if c.LeaseID == "" {
				continue // a machine nobody leases: nothing to attribute
			}
			samples = append(samples, c)
		}
		if len(samples) > 0 {
			if err := tx.Samples().InsertSamples(r.Context(), samples...); err != nil {
				return err
			}
		}
		if len(events) > 0 {
			if _, err := tx.Events().AppendEvents(r.Context(), events...); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Protocol) agentEvents(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	s.applyBatch(w, r, true, func(tx store.Tx, a store.Agent, recs []link.Record) error {
		var events []core.Event
		var reports []store.AgentReport
		for _, rec := range recs {
			e := *rec.Event
			if e.At.IsZero() {
				e.At = now
			}
			attrs := map[string]string{}
			for k, v := range e.Attrs {
				attrs[k] = v
			}
			attrs["agent"] = a.ID
			subject := e.Subject
			switch e.Kind {
			case agentJobStarted, agentJobSignal, agentJobExited, agentJobCheckpoint:
				attrs["run"] = e.Subject
				reports = append(reports, store.AgentReport{Agent: a.ID, Kind: e.Kind, Run: e.Subject, At: e.At, Reason: e.Reason, Attrs: e.Attrs})
				// The trail names the unit, so that its team sees it.
				cmd, ok, err := commandOf(r.Context(), tx, "run:"+e.Subject)
				if err != nil {
					return err
				}
				if ok {
					subject = cmd.Unit
					attrs[store.EventTeam] = cmd.Team
				}
			case agentSpotNotice:
				reports = append(reports, store.AgentReport{Agent: a.ID, Kind: e.Kind, At: e.At, Reason: e.Reason, Attrs: e.Attrs})
			case agentCommandResult:
				if id := e.Attrs["command"]; id != "" {
					result := e.Attrs["result"]
					if result != "ok" {
						result = "error: " + e.Reason
					}
					if err := tx.Agents().AckCommand(r.Context(), a.ID, id, e.At, result); err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					// A run the agent could not start is the loop's to
					// decide (the unit fails with the reason).
					cmd, ok, err := commandOf(r.Context(), tx, id)
					if err != nil {
						return err
					}
					if ok && cmd.Kind == store.CommandRun && result != "ok" {
						reports = append(reports, store.AgentReport{Agent: a.ID, Kind: agentRunRefused, Run: cmd.Run, At: e.At, Reason: e.Reason, Attrs: e.Attrs})
						subject, attrs[store.EventTeam] = cmd.Unit, cmd.Team
					}
				}
			}
			events = append(events, core.Event{At: e.At, Kind: "agent." + e.Kind, Subject: subject, Reason: e.Reason, Attrs: attrs})
		}
		if len(reports) > 0 {
			if err := tx.Agents().AppendReports(r.Context(), reports...); err != nil {
				return err
			}
		}
		_, err := tx.Events().AppendEvents(r.Context(), events...)
		return err
	})
}

// commandOf reads command id in tx; ok is false when there is none (or
// id cannot name one). Every other error is the caller's to return: on
// PostgreSQL a swallowed serialization failure leaves the transaction
// aborted, and its retry would never come.
func commandOf(ctx context.Context, tx store.Tx, id string) (store.AgentCommand, bool, error) {
	if store.CheckID("command", id) != nil {
		return store.AgentCommand{}, false, nil
	}
	c, err := tx.Agents().GetCommand(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.AgentCommand{}, false, nil
	}
	return c, err == nil, err
}

func (s *Protocol) agentCommands(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("agent")
	if !agentID(w, id) || !s.speaksFor(w, r, id) {
		return
	}
	cmds, err := s.store.Agents().PendingCommands(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err, "agent")
		return
	}
	out := link.CommandsReply{Commands: []link.Command{}}
	for _, c := range cmds {
		var lc link.Command
		if err := json.Unmarshal([]byte(c.Spec), &lc); err != nil {
			s.internal(w, r, fmt.Errorf("command %s: stored spec: %w", c.ID, err))
			return
		}
		lc.ID, lc.Kind = c.ID, link.CommandKind(c.Kind)
		out.Commands = append(out.Commands, lc)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Protocol) agentAck(w http.ResponseWriter, r *http.Request) {
	var req link.AckRequest
	if !httpapi.Decode(w, r, &req) {
		return
	}
	if !agentID(w, req.Agent) || !s.speaksFor(w, r, req.Agent) {
		return
	}
	if req.Result == "" {
		req.Result = "ok"
	}
	if err := s.store.Agents().AckCommand(r.Context(), req.Agent, r.PathValue("id"), s.clock.Now(), req.Result); err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, req)
}

func (s *Protocol) agentLogs(w http.ResponseWriter, r *http.Request) {
	var c link.LogChunk
	if !httpapi.Decode(w, r, &c) {
		return
	}
	if !agentID(w, c.Agent) || !s.speaksFor(w, r, c.Agent) {
		return
	}
	if err := store.CheckID("run", c.Run); err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	if c.At.IsZero() {
		c.At = s.clock.Now()
	}
	cmd, err := s.store.Agents().GetCommand(r.Context(), "run:"+c.Run)
	if err == nil && cmd.Agent != c.Agent {
		err = store.NotFound("run of agent "+c.Agent, c.Run)
	}
	if err != nil {
		s.storeError(w, r, err, "run")
		return
	}
	stream := c.Agent + "/" + c.Run
	end, err := s.store.JobLogs().AppendLog(r.Context(), cmd.Job, stream, c.Offset, c.Data, c.At)
	if errors.Is(err, store.ErrConflict) {
		if have, err2 := s.store.JobLogs().LogStreamEnd(r.Context(), cmd.Job, stream); err2 == nil {
			w.Header().Set(link.LogEndHeader, strconv.FormatInt(have, 10))
		}
	}
	if err != nil {
		s.storeError(w, r, err, "offset")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, link.LogChunkReply{End: end})
}
