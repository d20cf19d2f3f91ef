// Package client is a typed HTTP client for gpufleet's /api/v1, used by
// the CLI (and fit for scripts in Go). Its requests are made by the
// client oapi-codegen generates from the server's OpenAPI document
// (package apiclient: paths, methods and parameters as the document
// names them); its answers are read into the API's own types (package
// api), so a field added to a view reaches the client with no second
// definition to drift. It turns the API's JSON errors back into *Error
// values that keep the stable code and the offending field.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/apiclient"
	"github.com/gpufleet/gpufleet/internal/httpapi"
)

// Client calls one server with one token.
type Client struct {
	gen *apiclient.Client
}

// DefaultTimeout bounds each request when New is given no http.Client.
const DefaultTimeout = 30 * time.Second

// New returns a client for the server at base (http or https URL) that
// authenticates with token; hc may be nil.
func New(base, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://host:port or https://host", base)
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	gen, err := apiclient.NewClient(u.String(), apiclient.WithHTTPClient(hc), apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", base, err)
	}
	return &Client{gen: gen}, nil
}

// Error is an error answer of the API.
type Error struct {
	Status  int
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%d %s, field %s)", e.Message, e.Status, e.Code, e.Field)
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
}

// StatusOf returns the HTTP status of an API error, 0 for other errors.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// read takes the answer of a generated call (op names it): it decodes a
// 2xx answer into out (when not nil), turns others into *Error, and
// returns the status.
func read(op string, resp *http.Response, err error, out any) (int, error) {
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: read the answer: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb httpapi.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return resp.StatusCode, &Error{Status: resp.StatusCode, Code: eb.Error.Code, Field: eb.Error.Field, Message: eb.Error.Message}
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: "http", Message: fmt.Sprintf("%s: %s", op, strings.TrimSpace(string(data[:min(len(data), 200)])))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: decode the answer: %w", op, err)
		}
	}
	return resp.StatusCode, nil
}

// body is v as a JSON request body.
func body(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

const jsonType = "application/json"

// opt is a query parameter: nil (left out) when empty.
func opt(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func optInt[T int | int64](v T) *string {
	if v == 0 {
		return nil
	}
	s := strconv.FormatInt(int64(v), 10)
	return &s
}

// SubmitJob submits j; a non-empty key makes retries safe (created is
// false for a replay of the same submission).
func (c *Client) SubmitJob(ctx context.Context, j api.JobRequest, key string) (job api.JobView, created bool, err error) {
	b, err := body(j)
	if err != nil {
		return job, false, fmt.Errorf("submit job: %w", err)
	}
	resp, err := c.gen.SubmitJobWithBody(ctx, &apiclient.SubmitJobParams{IdempotencyKey: opt(key)}, jsonType, b)
	code, err := read("POST /api/v1/jobs", resp, err, &job)
	return job, code == http.StatusCreated, err
}

// JobFilter selects jobs (empty fields match everything).
type JobFilter struct {
	Team   string
	States []string
	Tier   string
	Limit  int
	Cursor string
}

// ListJobs returns one page of jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, f JobFilter) (api.JobsPage, error) {
	var p api.JobsPage
	resp, err := c.gen.ListJobs(ctx, &apiclient.ListJobsParams{Team: opt(f.Team), State: opt(strings.Join(f.States, ",")), Tier: opt(f.Tier), Limit: optInt(f.Limit), Cursor: opt(f.Cursor)})
	_, err = read("GET /api/v1/jobs", resp, err, &p)
	return p, err
}

// GetJob returns one job.
func (c *Client) GetJob(ctx context.Context, id string) (api.JobView, error) {
	var j api.JobView
	resp, err := c.gen.GetJob(ctx, id)
	_, err = read("GET /api/v1/jobs/"+id, resp, err, &j)
	return j, err
}

// CancelJob cancels one job.
func (c *Client) CancelJob(ctx context.Context, id string) (api.JobView, error) {
	var j api.JobView
	resp, err := c.gen.CancelJob(ctx, id)
	_, err = read("POST /api/v1/jobs/"+id+"/cancel", resp, err, &j)
	return j, err
}

// LogQuery says which part of a job's log to read: from Offset (at most
// Limit bytes, 0 for the server's default), its last Lines lines, or its
// last Tail bytes.
type LogQuery struct {
	Offset, Limit, Tail, Lines int64
}

// JobLogs reads a stretch of a job's log.
func (c *Client) JobLogs(ctx context.Context, id string, lq LogQuery) (api.LogView, error) {
	p := &apiclient.GetJobLogsParams{Limit: optInt(max(lq.Limit, 0))}
	switch {
	case lq.Lines > 0:
		p.Lines = optInt(lq.Lines)
	case lq.Tail > 0:
		p.Tail = optInt(lq.Tail)
	case lq.Offset > 0:
		p.Offset = optInt(lq.Offset)
	}
	var v api.LogView
	resp, err := c.gen.GetJobLogs(ctx, id, p)
	_, err = read("GET /api/v1/jobs/"+id+"/logs", resp, err, &v)
	return v, err
}

// PageFilter selects by state with paging (leases, nodes).
type PageFilter struct {
	States []string
	Limit  int
	Cursor string
}

// ListLeases returns one page of leases, newest first.
func (c *Client) ListLeases(ctx context.Context, f PageFilter) (api.LeasesPage, error) {
	var p api.LeasesPage
	resp, err := c.gen.ListLeases(ctx, &apiclient.ListLeasesParams{State: opt(strings.Join(f.States, ",")), Limit: optInt(f.Limit), Cursor: opt(f.Cursor)})
	_, err = read("GET /api/v1/leases", resp, err, &p)
	return p, err
}

// ListNodes returns one page of node agents.
func (c *Client) ListNodes(ctx context.Context, f PageFilter) (api.NodesPage, error) {
	var p api.NodesPage
	resp, err := c.gen.ListNodes(ctx, &apiclient.ListNodesParams{State: opt(strings.Join(f.States, ",")), Limit: optInt(f.Limit), Cursor: opt(f.Cursor)})
	_, err = read("GET /api/v1/nodes", resp, err, &p)
	return p, err
}

// ListTeams returns every team (admin).
func (c *Client) ListTeams(ctx context.Context) ([]api.TeamView, error) {
	var p struct {
		Teams []api.TeamView `json:"teams"`
	}
	resp, err := c.gen.ListTeams(ctx)
	_, err = read("GET /api/v1/teams", resp, err, &p)
	return p.Teams, err
}

// CreateTeam creates a team (admin).
func (c *Client) CreateTeam(ctx context.Context, t api.TeamRequest) (api.TeamView, error) {
	var v api.TeamView
	b, err := body(t)
	if err != nil {
		return v, fmt.Errorf("create team: %w", err)
	}
	resp, err := c.gen.CreateTeamWithBody(ctx, jsonType, b)
	_, err = read("POST /api/v1/teams", resp, err, &v)
	return v, err
}

// TokenFilter selects tokens.
type TokenFilter struct {
	Team, User string
	ActiveOnly bool
}

// ListTokens lists tokens (never their secrets).
func (c *Client) ListTokens(ctx context.Context, f TokenFilter) ([]api.TokenInfoView, error) {
	p := &apiclient.ListTokensParams{Team: opt(f.Team), User: opt(f.User)}
	if f.ActiveOnly {
		p.Active = opt("true")
	}
	var page api.TokensPage
	resp, err := c.gen.ListTokens(ctx, p)
	_, err = read("GET /api/v1/tokens", resp, err, &page)
	return page.Tokens, err
}

// CreateToken creates a token; the answer holds its secret, once.
func (c *Client) CreateToken(ctx context.Context, t api.TokenRequest) (api.TokenView, error) {
	var v api.TokenView
	b, err := body(t)
	if err != nil {
		return v, fmt.Errorf("create token: %w", err)
	}
	resp, err := c.gen.CreateTokenWithBody(ctx, jsonType, b)
	_, err = read("POST /api/v1/tokens", resp, err, &v)
	return v, err
}

// RevokeToken revokes a token.
func (c *Client) RevokeToken(ctx context.Context, id string) (api.TokenInfoView, error) {
	var v api.TokenInfoView
	resp, err := c.gen.RevokeToken(ctx, id)
	_, err = read("POST /api/v1/tokens/"+id+"/revoke", resp, err, &v)
	return v, err
}

// UsageReport returns cost and utilization per team over [from, to);
// zero times leave the server's defaults (this month so far).
func (c *Client) UsageReport(ctx context.Context, from, to time.Time, team string) (api.UsageReportView, error) {
	p := &apiclient.UsageReportParams{Team: opt(team)}
	if !from.IsZero() {
		p.From = opt(from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		p.To = opt(to.UTC().Format(time.RFC3339))
	}
	var v api.UsageReportView
	resp, err := c.gen.UsageReport(ctx, p)
	_, err = read("GET /api/v1/reports/usage", resp, err, &v)
	return v, err
}
