package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/store"
)

// internal logs err and answers 500 without its detail.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.Internal(s.log, w, r, err)
}

// storeError answers err from the store (httpapi.StoreError).
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error, field string) {
	httpapi.StoreError(s.log, w, r, err, field)
}

// audit appends an admin action to the audit trail inside tx.
func audit(r *http.Request, tx store.Tx, at time.Time, kind, subject, reason string, attrs map[string]string) error {
	p, _ := httpapi.PrincipalFrom(r.Context())
	a := map[string]string{"actor": p.Actor(), "role": string(p.Role)}
	for k, v := range attrs {
		a[k] = v
	}
	if _, err := tx.Events().AppendEvents(r.Context(), core.Event{At: at, Kind: kind, Subject: subject, Reason: reason, Attrs: a}); err != nil {
		return fmt.Errorf("audit %s: %w", kind, err)
	}
	return nil
}

// TeamRequest is the body of POST /api/v1/teams.
type TeamRequest struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Cohort string `json:"cohort"`
	// Weight is the fair-share weight (0: 1).
	Weight int64 `json:"weight"`
	// MonthlyBudget is a decimal amount; empty for no budget.
	MonthlyBudget string      `json:"monthly_budget,omitempty"`
	Quotas        []QuotaView `json:"quotas,omitempty"`
	// UnitLimit is the most units (one per shard) the team's unfinished
	// jobs may have together; a job past it is refused (0: 10,000; at
	// most 1,000,000).
	UnitLimit int64 `json:"unit_limit,omitempty"`
}

// QuotaView is a team's guaranteed share of a GPU class, in milli-GPUs.
type QuotaView struct {
	GPUClass    string `json:"gpu_class"`
	Guaranteed  int64  `json:"guaranteed"`
	BorrowLimit int64  `json:"borrow_limit"`
	LendLimit   int64  `json:"lend_limit"`
}

// TeamView is the JSON form of a team.
type TeamView struct {
	ID            string      `json:"id"`
	Name          string      `json:"name"`
	Cohort        string      `json:"cohort,omitempty"`
	Weight        int64       `json:"weight"`
	MonthlyBudget json.Number `json:"monthly_budget"`
	Quotas        []QuotaView `json:"quotas"`
	// UnitLimit is the unit limit in force (the default when the team
	// sets none).
	UnitLimit int64 `json:"unit_limit"`
}

// NewTeamView renders t.
func NewTeamView(t *core.Team) TeamView {
	v := TeamView{ID: t.ID, Name: t.Name, Cohort: t.Cohort, Weight: t.Weight, MonthlyBudget: readmodel.Amount(t.MonthlyBudget), Quotas: []QuotaView{}, UnitLimit: t.Units()}
	for _, q := range t.Quotas {
		v.Quotas = append(v.Quotas, QuotaView{GPUClass: q.GPUClass, Guaranteed: int64(q.Guaranteed), BorrowLimit: int64(q.BorrowLimit), LendLimit: int64(q.LendLimit)})
	}
	return v
}

func (s *Server) createTeam(w http.ResponseWriter, r *http.Request) {
	var req TeamRequest
	if !httpapi.Decode(w, r, &req) {
		return
	}
	t := core.Team{ID: req.ID, Name: req.Name, Cohort: req.Cohort, Weight: req.Weight, UnitLimit: req.UnitLimit}
	if t.Weight == 0 {
		t.Weight = 1
	}
	if req.MonthlyBudget != "" {
		m, err := core.ParseMicros(req.MonthlyBudget)
		if err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "monthly_budget", err.Error())
			return
		}
		t.MonthlyBudget = m
	}
	for _, q := range req.Quotas {
		t.Quotas = append(t.Quotas, core.Quota{GPUClass: q.GPUClass, Guaranteed: core.Milli(q.Guaranteed), BorrowLimit: core.Milli(q.BorrowLimit), LendLimit: core.Milli(q.LendLimit)})
	}
	if err := store.ValidateTeam(&t); err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	now := s.clock.Now()
	err := s.store.Tx(r.Context(), func(tx store.Tx) error {
		if err := tx.Teams().CreateTeam(r.Context(), t); err != nil {
			return err
		}
		return audit(r, tx, now, "audit.team_created", t.ID, "team created through the API", map[string]string{store.EventTeam: t.ID})
	})
	if err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, NewTeamView(&t))
}

func (s *Server) listTeams(w http.ResponseWriter, r *http.Request) {
	teams, err := s.store.Teams().ListTeams(r.Context())
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	out := []TeamView{}
	for i := range teams {
		out = append(out, NewTeamView(&teams[i]))
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"teams": out})
}

// TokenRequest is the body of POST /api/v1/tokens. User is created (with
// Team and Role) when it does not exist; agent tokens have no user.
type TokenRequest struct {
	User string `json:"user"`
	Team string `json:"team"`
	Role string `json:"role"`
	Name string `json:"name"`
	// Expires is when the token stops working; zero for never.
	Expires time.Time `json:"expires"`
}

// TokenView is the JSON form of a token; Secret is set only in the
// response that created it.
type TokenView struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret,omitempty"`
	Prefix  string    `json:"prefix,omitempty"`
	User    string    `json:"user,omitempty"`
	Team    string    `json:"team,omitempty"`
	Role    string    `json:"role"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	if !httpapi.Decode(w, r, &req) {
		return
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	role, err := store.ParseRole(req.Role)
	if err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	if p.Role == store.RoleTeamAdmin {
		if req.Team == "" {
			req.Team = p.Team
		}
		if req.Team != p.Team {
			httpapi.WriteError(w, http.StatusForbidden, "forbidden", "team", "a team-admin makes tokens for its own team only")
			return
		}
		if !role.TeamScoped() {
			httpapi.WriteError(w, http.StatusForbidden, "forbidden", "role", "a team-admin makes team-admin, member and viewer tokens only")
			return
		}
	}
	if !role.TeamScoped() {
		req.Team = ""
	}
	secret, hash, err := store.NewToken()
	if err != nil {
		s.internal(w, r, err)
		return
	}
	id, err := httpapi.NewID("tok")
	if err != nil {
		s.internal(w, r, err)
		return
	}
	now := s.clock.Now()
	t := store.Token{ID: id, Hash: hash, User: req.User, Team: req.Team, Role: role, Name: req.Name, Prefix: store.SecretPrefix(secret), Created: now, Expires: req.Expires}
	if err := store.ValidateToken(&t); err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	otherTeam := false // the user exists in another team
	err = s.store.Tx(r.Context(), func(tx store.Tx) error {
		if t.User != "" {
			u, err := tx.Users().GetUser(r.Context(), t.User)
			switch {
			case errors.Is(err, store.ErrNotFound):
				if err := core.CheckName("user", t.User); err != nil {
					return err
				}
				u = store.User{ID: t.User, Team: t.Team, Name: t.User, Role: role, Created: now}
				if err := store.ValidateNewUser(&u); err != nil {
					return err
				}
				if err := tx.Users().CreateUser(r.Context(), u); err != nil {
					return err
				}
			case err != nil:
				return err
			case u.Team != t.Team:
				otherTeam = true
				return &core.FieldError{Field: "user", Value: t.User, Allowed: fmt.Sprintf("a user of team %q (this one is of %q)", t.Team, u.Team)}
			}
		}
		if err := tx.Tokens().CreateToken(r.Context(), t); err != nil {
			return err
		}
		return audit(r, tx, now, "audit.token_created", t.ID, "token created through the API",
			map[string]string{store.EventTeam: t.Team, "token_role": string(role), "token_team": t.Team, "token_user": t.User})
	})
	if err != nil {
		if p.Role == store.RoleTeamAdmin && otherTeam {
			// Do not reveal another team's users to a team-admin.
			httpapi.WriteError(w, http.StatusForbidden, "forbidden", "user", "the user is not of your team")
			return
		}
		s.storeError(w, r, err, "team")
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, TokenView{ID: t.ID, Secret: secret, Prefix: t.Prefix, User: t.User, Team: t.Team, Role: string(t.Role), Name: t.Name, Created: now.UTC(), Expires: t.Expires})
}

// JobRequest is the body of POST /api/v1/jobs. Team defaults to the
// token's team, User to the token's user. ID is the server's (job- and 16
// random hex digits) for a team token, which may not set it: job ids are
// global (units, events, agent commands and logs key on them), so an id a
// team chose could tell it that another team's job exists, or take an id
// before its owner. An admin may set ID (an import, a test); a retry is
// made safe by the Idempotency-Key header, which is per team.
type JobRequest struct {
	ID                 string           `json:"id"`
	Team               string           `json:"team"`
	User               string           `json:"user"`
	Tier               string           `json:"tier"`
	GPUs               int              `json:"gpus"`
	GPUMilli           int64            `json:"gpu_milli"`
	GPUMemMiB          int64            `json:"gpu_mem_mib"`
	Models             []string         `json:"models,omitempty"`
	Throughput         map[string]int64 `json:"throughput,omitempty"`
	CPUMilli           int64            `json:"cpu_milli"`
	MemMiB             int64            `json:"mem_mib"`
	Shards             int              `json:"shards"`
	EstDurationSeconds int64            `json:"est_duration_seconds"`
	Deadline           time.Time        `json:"deadline"`
	Interruptible      bool             `json:"interruptible"`
	Deferrable         bool             `json:"deferrable"`
	CheckpointSeconds  int64            `json:"checkpoint_interval_seconds"`
	Command            []string         `json:"command,omitempty"`
	Image              string           `json:"image"`
	// Workload is training (the default) or inference; only inference
	// runs on inference-only machines.
	Workload core.Workload `json:"workload,omitempty"`
	// Accelerators lists the families the job is built for (default
	// nvidia); other families take only jobs that list them.
	Accelerators []core.Accelerator `json:"accelerators,omitempty"`
}

// JobView is the JSON form of a stored job.
type JobView struct {
	ID                 string           `json:"id"`
	Team               string           `json:"team"`
	User               string           `json:"user,omitempty"`
	Tier               string           `json:"tier"`
	State              string           `json:"state"`
	StateAt            time.Time        `json:"state_at"`
	Submit             time.Time        `json:"submit"`
	GPUs               int              `json:"gpus"`
	GPUMilli           int64            `json:"gpu_milli"`
	GPUMemMiB          int64            `json:"gpu_mem_mib"`
	Models             []string         `json:"models,omitempty"`
	Throughput         map[string]int64 `json:"throughput,omitempty"`
	CPUMilli           int64            `json:"cpu_milli"`
	MemMiB             int64            `json:"mem_mib"`
	Shards             int              `json:"shards"`
	EstDurationSeconds int64            `json:"est_duration_seconds"`
	Deadline           time.Time        `json:"deadline"`
	Interruptible      bool             `json:"interruptible"`
	Deferrable         bool             `json:"deferrable"`
	CheckpointSeconds  int64            `json:"checkpoint_interval_seconds"`
	Command            []string         `json:"command,omitempty"`
	Image              string           `json:"image,omitempty"`
	IdempotencyKey     string           `json:"idempotency_key,omitempty"`
	// Workload and Accelerators are what the job runs as, defaults
	// filled in (training; nvidia).
	Workload     core.Workload      `json:"workload"`
	Accelerators []core.Accelerator `json:"accelerators"`
}

// NewJobView renders j.
func NewJobView(j *store.Job) JobView {
	r := j.Request
	v := JobView{ID: j.ID, Team: j.Team, User: j.User, Tier: string(j.Tier), State: string(j.State), StateAt: j.StateAt.UTC(), Submit: j.Submit.UTC(),
		GPUs: r.GPUs, GPUMilli: int64(r.MilliPerGPU), GPUMemMiB: r.MemPerGPUMiB, Models: r.Models, Throughput: r.Throughput, CPUMilli: r.CPUMilli, MemMiB: r.MemMiB,
		Shards: max(j.Shards, 1), EstDurationSeconds: int64(j.EstDuration / time.Second), Deadline: j.Deadline.UTC(), Interruptible: j.Interruptible,
		Deferrable: j.Deferrable, CheckpointSeconds: int64(j.CheckpointInterval / time.Second), Command: j.Command, Image: j.Image, IdempotencyKey: j.IdempotencyKey,
		Workload: r.Workload.Or(), Accelerators: r.Accelerators}
	if len(r.Accelerators) == 0 {
		v.Accelerators = []core.Accelerator{core.NVIDIA}
	}
	return v
}

// MaxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const MaxIdempotencyKey = 256

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) {
	var req JobRequest
	if !httpapi.Decode(w, r, &req) {
		return
	}
	p, _ := httpapi.PrincipalFrom(r.Context())
	if req.Team == "" {
		req.Team = p.Team
	}
	if req.Team == "" {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "team", "team: required for an admin token")
		return
	}
	if !p.SeesTeam(req.Team) {
		httpapi.WriteError(w, http.StatusForbidden, "forbidden", "team", "a team token submits to its own team only")
		return
	}
	if req.User == "" {
		req.User = p.User
	}
	if p.Role != store.RoleAdmin {
		if req.User != p.User {
			httpapi.WriteError(w, http.StatusForbidden, "forbidden", "user", fmt.Sprintf("user: a team token submits as its own user %q; only an admin sets another", p.User))
			return
		}
		if req.ID != "" {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "id",
				fmt.Sprintf("id: invalid value %q: want none; the server names a team's jobs (job- and 16 hex digits), and the Idempotency-Key header makes a retry safe", req.ID))
			return
		}
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > MaxIdempotencyKey {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "Idempotency-Key", fmt.Sprintf("Idempotency-Key: at most %d bytes", MaxIdempotencyKey))
		return
	}
	if key != "" {
		if err := store.CheckID("Idempotency-Key", key); err != nil {
			httpapi.WriteValidation(w, err)
			return
		}
	}
	if req.ID == "" {
		id, err := httpapi.NewID("job")
		if err != nil {
			s.internal(w, r, err)
			return
		}
		req.ID = id
	}
	if req.GPUMilli == 0 {
		req.GPUMilli = int64(core.WholeGPU)
	}
	if req.Tier == "" {
		req.Tier = string(core.TierRegular)
	}
	// Seconds become durations only in range: 2^62 s in nanoseconds
	// would wrap (to 0 for 2^62).
	est, err := core.Seconds("est_duration_seconds", req.EstDurationSeconds)
	if err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	ckpt, err := core.Seconds("checkpoint_interval_seconds", req.CheckpointSeconds)
	if err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	j := core.Job{ID: req.ID, Team: req.Team, User: req.User, Tier: core.Tier(req.Tier),
		Request: core.Request{GPUs: req.GPUs, MilliPerGPU: core.Milli(req.GPUMilli), MemPerGPUMiB: req.GPUMemMiB, Models: req.Models,
			Throughput: req.Throughput, CPUMilli: req.CPUMilli, MemMiB: req.MemMiB, Workload: req.Workload, Accelerators: req.Accelerators},
		Shards: req.Shards, EstDuration: est, Deadline: req.Deadline,
		Interruptible: req.Interruptible, Deferrable: req.Deferrable, CheckpointInterval: ckpt,
		Command: req.Command, Image: req.Image, Submit: s.clock.Now(), State: core.JobPending}
	if err := store.ValidateJob(&j); err != nil {
		httpapi.WriteValidation(w, err)
		return
	}
	// A job no offer can ever run is refused here: it would wait forever,
	// as no acquisition is ever made for it. The offers are those the
	// loop may rent under the policy (its billing modes), as the loop
	// judges them.
	offers, capacity := s.policy.Offers(s.catalog.Offers), s.capacity
	if s.machines != nil {
		// A pool of machines (the static provider): only the offers it
		// has machines of, as many as it has.
		n, err := s.machines(r.Context())
		if err != nil {
			s.internal(w, r, fmt.Errorf("submit: the pool's machines: %w", err))
			return
		}
		offers, capacity = fleet.PoolOffers(offers, n)
	}
	if err := fleet.Feasible(&j, offers, capacity); err != nil {
		var fe *core.FieldError
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		msg := "no offer can ever run this job: " + err.Error()
		if s.machines != nil {
			msg = "no machine of the pool can ever run this job (" + fleet.PoolSummary(offers) + "): " + err.Error()
			if len(offers) == 0 {
				msg = "no machine of the pool can ever run this job: no agent with a catalog offer has joined (start gpufleet agent --offer OFFER on a machine, or pin agents to offers in the provider's file)"
			}
		}
		httpapi.WriteError(w, http.StatusUnprocessableEntity, "unrunnable", field, msg)
		return
	}
	job, created, err := s.store.Jobs().SubmitJob(r.Context(), j, key)
	var re *store.RowError
	if errors.As(err, &re) && re.Field == "idempotency_key" {
		httpapi.WriteError(w, http.StatusConflict, "conflict", "Idempotency-Key", strings.Replace(re.Msg, "idempotency key", "Idempotency-Key", 1))
		return
	}
	if err != nil {
		s.storeError(w, r, err, "team")
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		s.submitted.Inc()
	}
	httpapi.WriteJSON(w, code, NewJobView(&job))
}

// JobsPage is the response of GET /api/v1/jobs.
type JobsPage struct {
	Jobs []JobView `json:"jobs"`
	Next string    `json:"next,omitempty"`
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
	f := store.JobFilter{Team: q.Get("team"), Cursor: q.Get("cursor")}
	if err := store.CheckText("team", f.Team); err != nil {
		// A NUL byte is a 400 here, not a database error.
		httpapi.WriteValidation(w, err)
		return
	}
	if p.Role != store.RoleAdmin {
		if f.Team != "" && f.Team != p.Team {
			httpapi.WriteJSON(w, http.StatusOK, JobsPage{Jobs: []JobView{}}) // another team's jobs do not exist for p
			return
		}
		f.Team = p.Team
	}
	if !parseStates(w, q.Get("state"), store.ParseJobState, &f.States) {
		return
	}
	if v := q.Get("tier"); v != "" {
		t, err := core.ParseTier(v)
		if err != nil {
			httpapi.WriteValidation(w, err)
			return
		}
		f.Tier = t
	}
	if !parseLimit(w, q.Get("limit"), &f.Limit) {
		return
	}
	page, err := s.store.Jobs().ListJobs(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	out := JobsPage{Jobs: []JobView{}, Next: page.Next}
	for i := range page.Items {
		out.Jobs = append(out.Jobs, NewJobView(&page.Items[i]))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// parseStates reads a comma-separated state filter (the query parameter
// "state") with parse; on a bad name it writes the 400 and returns false.
func parseStates[T any](w http.ResponseWriter, v string, parse func(field, name string) (T, error), states *[]T) bool {
	if v == "" {
		return true
	}
	for _, name := range strings.Split(v, ",") {
		st, err := parse("state", name)
		if err != nil {
			httpapi.WriteValidation(w, err)
			return false
		}
		*states = append(*states, st)
	}
	return true
}

func parseLimit(w http.ResponseWriter, v string, limit *int) bool {
	if v == "" {
		return true
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "limit", "limit: want an integer")
		return false
	}
	*limit = n
	return true
}

// visibleJob returns the job with id if p may see it; another team's job
// answers 404 exactly as a missing one does.
func (s *Server) visibleJob(w http.ResponseWriter, r *http.Request) (store.Job, bool) {
	id := r.PathValue("id")
	p, _ := httpapi.PrincipalFrom(r.Context())
	j, err := s.store.Jobs().GetJob(r.Context(), id)
	if err == nil && !p.SeesTeam(j.Team) {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		// One message for both, so that the answer tells nothing of
		// other teams.
		httpapi.WriteError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("job %q not found", id))
		return store.Job{}, false
	}
	if err != nil {
		s.storeError(w, r, err, "id")
		return store.Job{}, false
	}
	return j, true
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	if j, ok := s.visibleJob(w, r); ok {
		httpapi.WriteJSON(w, http.StatusOK, NewJobView(&j))
	}
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, ok := s.visibleJob(w, r)
	if !ok {
		return
	}
	now := s.clock.Now()
	var out store.Job
	err := s.store.Tx(r.Context(), func(tx store.Tx) error {
		var err error
		if out, err = tx.Jobs().CancelJob(r.Context(), j.ID, now); err != nil {
			return err
		}
		return audit(r, tx, now, "job.cancel_requested", j.ID, "cancelled through the API", map[string]string{store.EventTeam: j.Team})
	})
	if err != nil {
		s.storeError(w, r, err, "id")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, NewJobView(&out))
}

// LeaseView is the JSON form of a stored lease.
type LeaseView struct {
	ID           string    `json:"id"`
	OfferID      string    `json:"offer"`
	Mode         string    `json:"mode"`
	State        string    `json:"state"`
	ProviderID   string    `json:"provider_id,omitempty"`
	ClientToken  string    `json:"client_token"`
	Requested    time.Time `json:"requested"`
	Start        time.Time `json:"start"`
	CommittedEnd time.Time `json:"committed_end"`
	End          time.Time `json:"end"`
	ReadyAt      time.Time `json:"ready_at"`
	ReclaimAt    time.Time `json:"reclaim_at"`
	IdleSince    time.Time `json:"idle_since"`
	// EarlierTerms are the terms it was billed on before mode from start,
	// oldest first (a committed machine renewed on another term).
	EarlierTerms []TermView `json:"earlier_terms,omitempty"`
}

// TermView is one earlier term of a lease: its billing mode from start
// to the next term's start.
type TermView struct {
	Mode  string    `json:"mode"`
	Start time.Time `json:"start"`
}

// NewLeaseView renders l.
func NewLeaseView(l *store.Lease) LeaseView {
	return LeaseView{ID: l.ID, OfferID: l.OfferID, Mode: string(l.Mode), State: string(l.State), ProviderID: l.ProviderID, ClientToken: l.ClientToken,
		Requested: l.Requested.UTC(), Start: l.Start.UTC(), CommittedEnd: l.CommittedEnd.UTC(), End: l.End.UTC(), ReadyAt: l.ReadyAt.UTC(),
		ReclaimAt: l.ReclaimAt.UTC(), IdleSince: l.IdleSince.UTC(), EarlierTerms: termViews(l.Earlier)}
}

func termViews(ts []core.Term) []TermView {
	if len(ts) == 0 {
		return nil
	}
	out := make([]TermView, len(ts))
	for i, t := range ts {
		out[i] = TermView{Mode: string(t.Mode), Start: t.Start.UTC()}
	}
	return out
}

// LeasesPage is the response of GET /api/v1/leases.
type LeasesPage struct {
	Leases []LeaseView `json:"leases"`
	Next   string      `json:"next,omitempty"`
}

func (s *Server) listLeases(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.LeaseFilter{Cursor: q.Get("cursor")}
	if !parseStates(w, q.Get("state"), store.ParseLeaseState, &f.States) {
		return
	}
	if !parseLimit(w, q.Get("limit"), &f.Limit) {
		return
	}
	page, err := s.store.Leases().ListLeases(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	out := LeasesPage{Leases: []LeaseView{}, Next: page.Next}
	for i := range page.Items {
		out.Leases = append(out.Leases, NewLeaseView(&page.Items[i]))
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// EventView is the JSON form of an event.
type EventView struct {
	Seq     int64             `json:"seq"`
	At      time.Time         `json:"at"`
	Kind    string            `json:"kind"`
	Subject string            `json:"subject"`
	Reason  string            `json:"reason"`
	Attrs   map[string]string `json:"attrs,omitempty"`
}

// EventsPage is the response of GET /api/v1/events.
type EventsPage struct {
	Events []EventView `json:"events"`
	Next   string      `json:"next,omitempty"`
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
	f := store.EventFilter{Subject: q.Get("subject"), Kind: q.Get("kind"), Team: q.Get("team"), Cursor: q.Get("cursor")}
	if p.Role != store.RoleAdmin {
		// A team role reads its own team's trail; fleet-wide events
		// (leases, other teams) are an admin's.
		if f.Team != "" && f.Team != p.Team {
			httpapi.WriteJSON(w, http.StatusOK, EventsPage{Events: []EventView{}})
			return
		}
		f.Team = p.Team
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(tf.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", tf.name, tf.name+": want an RFC 3339 time")
				return
			}
			*tf.dst = t
		}
	}
	if !parseLimit(w, q.Get("limit"), &f.Limit) {
		return
	}
	page, err := s.store.Events().ListEvents(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	out := EventsPage{Events: []EventView{}, Next: page.Next}
	for _, e := range page.Items {
		out.Events = append(out.Events, EventView{Seq: e.Seq, At: e.At.UTC(), Kind: e.Kind, Subject: e.Subject, Reason: e.Reason, Attrs: e.Attrs})
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}
