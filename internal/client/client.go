// Package client is a typed HTTP client for gpufleet's /api/v1, used by
// the CLI (and fit for scripts in Go). It speaks the API's own types
// (package api), so a field added to a view reaches the client with no
// second definition to drift, and it turns the API's JSON errors back
// into *Error values that keep the stable code and the offending field.
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
)

// Client calls one server with one token.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
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
	return &Client{base: u, token: token, http: hc}, nil
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

// do sends a request and decodes a 2xx answer into out (when not nil);
// it returns the status.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, hdr http.Header, out any) (int, error) {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return resp.StatusCode, &Error{Status: resp.StatusCode, Code: eb.Error.Code, Field: eb.Error.Field, Message: eb.Error.Message}
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: "http", Message: fmt.Sprintf("%s %s: %s", method, path, strings.TrimSpace(string(data[:min(len(data), 200)])))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// SubmitJob submits j; a non-empty key makes retries safe (created is
// false for a replay of the same submission).
func (c *Client) SubmitJob(ctx context.Context, j api.JobRequest, key string) (job api.JobView, created bool, err error) {
	hdr := http.Header{}
	if key != "" {
		hdr.Set("Idempotency-Key", key)
	}
	code, err := c.do(ctx, http.MethodPost, "/api/v1/jobs", nil, j, hdr, &job)
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
	q := url.Values{}
	set(q, "team", f.Team)
	set(q, "state", strings.Join(f.States, ","))
	set(q, "tier", f.Tier)
	setInt(q, "limit", f.Limit)
	set(q, "cursor", f.Cursor)
	var p api.JobsPage
	_, err := c.do(ctx, http.MethodGet, "/api/v1/jobs", q, nil, nil, &p)
	return p, err
}

// GetJob returns one job.
func (c *Client) GetJob(ctx context.Context, id string) (api.JobView, error) {
	var j api.JobView
	_, err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), nil, nil, nil, &j)
	return j, err
}

// CancelJob cancels one job.
func (c *Client) CancelJob(ctx context.Context, id string) (api.JobView, error) {
	var j api.JobView
	_, err := c.do(ctx, http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil, nil, &j)
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
	q := url.Values{}
	if lq.Lines > 0 {
		q.Set("lines", strconv.FormatInt(lq.Lines, 10))
	} else if lq.Tail > 0 {
		q.Set("tail", strconv.FormatInt(lq.Tail, 10))
	} else if lq.Offset > 0 {
		q.Set("offset", strconv.FormatInt(lq.Offset, 10))
	}
	if lq.Limit > 0 {
		q.Set("limit", strconv.FormatInt(lq.Limit, 10))
	}
	var v api.LogView
	_, err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id)+"/logs", q, nil, nil, &v)
	return v, err
}

// PageFilter selects by state with paging (leases, nodes).
type PageFilter struct {
	States []string
	Limit  int
	Cursor string
}

func (f PageFilter) query() url.Values {
	q := url.Values{}
	set(q, "state", strings.Join(f.States, ","))
	setInt(q, "limit", f.Limit)
	set(q, "cursor", f.Cursor)
	return q
}

// ListLeases returns one page of leases, newest first.
func (c *Client) ListLeases(ctx context.Context, f PageFilter) (api.LeasesPage, error) {
	var p api.LeasesPage
	_, err := c.do(ctx, http.MethodGet, "/api/v1/leases", f.query(), nil, nil, &p)
	return p, err
}

// ListNodes returns one page of node agents.
func (c *Client) ListNodes(ctx context.Context, f PageFilter) (api.NodesPage, error) {
	var p api.NodesPage
	_, err := c.do(ctx, http.MethodGet, "/api/v1/nodes", f.query(), nil, nil, &p)
	return p, err
}

// ListTeams returns every team (admin).
func (c *Client) ListTeams(ctx context.Context) ([]api.TeamView, error) {
	var p struct {
		Teams []api.TeamView `json:"teams"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/teams", nil, nil, nil, &p)
	return p.Teams, err
}

// CreateTeam creates a team (admin).
func (c *Client) CreateTeam(ctx context.Context, t api.TeamRequest) (api.TeamView, error) {
	var v api.TeamView
	_, err := c.do(ctx, http.MethodPost, "/api/v1/teams", nil, t, nil, &v)
	return v, err
}

// TokenFilter selects tokens.
type TokenFilter struct {
	Team, User string
	ActiveOnly bool
}

// ListTokens lists tokens (never their secrets).
func (c *Client) ListTokens(ctx context.Context, f TokenFilter) ([]api.TokenInfoView, error) {
	q := url.Values{}
	set(q, "team", f.Team)
	set(q, "user", f.User)
	if f.ActiveOnly {
		q.Set("active", "true")
	}
	var p api.TokensPage
	_, err := c.do(ctx, http.MethodGet, "/api/v1/tokens", q, nil, nil, &p)
	return p.Tokens, err
}

// CreateToken creates a token; the answer holds its secret, once.
func (c *Client) CreateToken(ctx context.Context, t api.TokenRequest) (api.TokenView, error) {
	var v api.TokenView
	_, err := c.do(ctx, http.MethodPost, "/api/v1/tokens", nil, t, nil, &v)
	return v, err
}

// RevokeToken revokes a token.
func (c *Client) RevokeToken(ctx context.Context, id string) (api.TokenInfoView, error) {
	var v api.TokenInfoView
	_, err := c.do(ctx, http.MethodPost, "/api/v1/tokens/"+url.PathEscape(id)+"/revoke", nil, nil, nil, &v)
	return v, err
}

// UsageReport returns cost and utilization per team over [from, to);
// zero times leave the server's defaults (this month so far).
func (c *Client) UsageReport(ctx context.Context, from, to time.Time, team string) (api.UsageReportView, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339))
	}
	set(q, "team", team)
	var v api.UsageReportView
	_, err := c.do(ctx, http.MethodGet, "/api/v1/reports/usage", q, nil, nil, &v)
	return v, err
}

func set(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func setInt(q url.Values, k string, v int) {
	if v != 0 {
		q.Set(k, strconv.Itoa(v))
	}
}
