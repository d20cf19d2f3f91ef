package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// server runs the real API on a SQLite store and returns its URL and the
// bootstrap admin token.
func server(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/c.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	admin, err := api.EnsureAdminToken(ctx, st, clk)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.New(pricing.Demo(), clk, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(st)))
	t.Cleanup(ts.Close)
	return ts.URL, admin
}

func TestClient(t *testing.T) {
	ctx := context.Background()
	base, admin := server(t)
	if _, err := New("localhost:8080", admin, nil); err == nil {
		t.Error("a URL without scheme was accepted")
	}
	c, err := New(base+"/", admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ml", "web"} {
		if _, err := c.CreateTeam(ctx, api.TeamRequest{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	if teams, err := c.ListTeams(ctx); err != nil || len(teams) != 2 || teams[0].ID != "ml" {
		t.Fatalf("teams: %+v %v", teams, err)
	}
	tok, err := c.CreateToken(ctx, api.TokenRequest{User: "alice", Team: "ml", Role: "member", Name: "laptop"})
	if err != nil || tok.Secret == "" || tok.Prefix == "" {
		t.Fatalf("token: %+v %v", tok, err)
	}
	alice, _ := New(base, tok.Secret, nil)
	j, created, err := alice.SubmitJob(ctx, api.JobRequest{GPUs: 1, EstDurationSeconds: 600}, "k1")
	if err != nil || !created || j.Team != "ml" || j.State != "pending" {
		t.Fatalf("submit: %+v %v %v", j, created, err)
	}
	train := j.ID // the server names a team's jobs
	if again, created, err := alice.SubmitJob(ctx, api.JobRequest{GPUs: 1, EstDurationSeconds: 600}, "k1"); err != nil || created || again.ID != train {
		t.Fatalf("replay: %+v %v %v", again, created, err)
	}
	_, _, err = alice.SubmitJob(ctx, api.JobRequest{GPUs: 2}, "k1")
	if StatusOf(err) != 409 {
		t.Errorf("same key, other body: %v", err)
	}
	if _, _, err := c.SubmitJob(ctx, api.JobRequest{ID: "site", Team: "web", GPUs: 1}, ""); err != nil {
		t.Fatal(err)
	}
	_, err = alice.GetJob(ctx, "site")
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 || e.Code != "not_found" || e.Field != "id" {
		t.Errorf("another team's job: %v", err)
	}
	_, _, err = alice.SubmitJob(ctx, api.JobRequest{GPUs: 1, Tier: "gold"}, "")
	if !errors.As(err, &e) || e.Status != 400 || e.Field != "tier" {
		t.Errorf("bad tier: %v", err)
	}
	p, err := c.ListJobs(ctx, JobFilter{Limit: 1})
	if err != nil || len(p.Jobs) != 1 || p.Next == "" {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	p2, err := c.ListJobs(ctx, JobFilter{Limit: 1, Cursor: p.Next})
	if err != nil || len(p2.Jobs) != 1 || p2.Jobs[0].ID == p.Jobs[0].ID {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	if p, err := alice.ListJobs(ctx, JobFilter{States: []string{"pending"}}); err != nil || len(p.Jobs) != 1 || p.Jobs[0].ID != train {
		t.Errorf("alice's pending jobs: %+v %v", p, err)
	}
	if j, err := alice.CancelJob(ctx, train); err != nil || j.ID != train {
		t.Errorf("cancel: %+v %v", j, err)
	}
	if lv, err := alice.JobLogs(ctx, train, LogQuery{Tail: 100}); err != nil || lv.Job != train || lv.Text != "" {
		t.Errorf("logs of a job that never ran: %+v %v", lv, err)
	}
	if n, err := c.ListNodes(ctx, PageFilter{}); err != nil || len(n.Nodes) != 0 {
		t.Errorf("nodes: %+v %v", n, err)
	}
	if l, err := c.ListLeases(ctx, PageFilter{States: []string{"ready"}}); err != nil || len(l.Leases) != 0 {
		t.Errorf("leases: %+v %v", l, err)
	}
	if r, err := alice.UsageReport(ctx, time.Time{}, time.Time{}, ""); err != nil || len(r.Teams) != 1 || r.Teams[0].Team != "ml" || r.Bill != "" {
		t.Errorf("alice's report: %+v %v", r, err)
	}
	toks, err := c.ListTokens(ctx, TokenFilter{Team: "ml"})
	if err != nil || len(toks) != 1 || toks[0].ID != tok.ID {
		t.Fatalf("tokens: %+v %v", toks, err)
	}
	if v, err := c.RevokeToken(ctx, tok.ID); err != nil || v.Active {
		t.Fatalf("revoke: %+v %v", v, err)
	}
	if _, err := alice.ListJobs(ctx, JobFilter{}); StatusOf(err) != 401 {
		t.Errorf("revoked token: %v", err)
	}
	if toks, err := c.ListTokens(ctx, TokenFilter{ActiveOnly: true}); err != nil || len(toks) != 1 {
		t.Errorf("active tokens: %+v %v", toks, err)
	}
}
