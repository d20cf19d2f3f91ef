package link

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
	"sync"
	"time"
)

// DefaultTimeout bounds each request of an HTTP uplink whose Client has
// no timeout of its own: a server that accepts the connection and then
// hangs must not stop the agent's loop for good.
const DefaultTimeout = 15 * time.Second

// HTTP is the Uplink to a gpufleet server's agent API (/api/v1/agent/…),
// authenticated with an agent token. It also ships job logs (SendLog)
// and acknowledges commands (Ack).
type HTTP struct {
	// URL is the server's base URL (http://host:8080).
	URL string
	// Token is the agent token's secret, sent as a bearer token.
	Token string
	// Agent names this agent in every request.
	Agent string
	// Epoch names the outbox incarnation (see the spool); the server
	// restarts its high-water mark when it changes.
	Epoch string
	// Client sends the requests; nil means a client with
	// DefaultTimeout.
	Client *http.Client
	// Timeout bounds each request (DefaultTimeout when zero).
	Timeout time.Duration
	// OnCredential, when set, is told the agent's own credential when a
	// join with a lease's join token answers with one (the agent keeps
	// it, so that a restart does not need the spent join token). The
	// uplink sends the credential instead of Token from then on either
	// way; an error from OnCredential is logged by the caller's loop as
	// a failed heartbeat and the credential is kept in memory.
	OnCredential func(secret string) error

	mu sync.Mutex
	// cred replaces Token once a join answered with a credential.
	cred string
}

// bearer is the secret the uplink sends now.
func (h *HTTP) bearer() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cred != "" {
		return h.cred
	}
	return h.Token
}

var _ Uplink = (*HTTP)(nil)

// LogSender ships a run's log: data starts at byte offset of the run's
// local log; it returns how many bytes of it the server has.
type LogSender interface {
	SendLog(ctx context.Context, run string, offset int64, data []byte) (int64, error)
}

var _ LogSender = (*HTTP)(nil)

// LogGapError is SendLog's error when the server has fewer bytes of the
// run's log than offset: resend from End.
type LogGapError struct{ End int64 }

// Error says where to resume.
func (e *LogGapError) Error() string {
	return fmt.Sprintf("the server has %d bytes of this log: resend from there", e.End)
}

// ErrUnknownRun is wrapped by SendLog's error for a run the server did
// not give this agent (a job started by hand): its log stays local.
var ErrUnknownRun = errors.New("link: the server knows no such run of this agent")

// ErrRejected is what errors.Is finds in the error of a request the
// server refused for the agent's credentials: 401 (no such token,
// revoked, expired) or 403 (a token whose role is not agent). Sending the
// same token again cannot succeed, so the loop stops on it.
var ErrRejected = errors.New("link: the server rejects this agent's token")

// Error is a request the server answered with an error status.
type Error struct {
	Method, Path string
	Status       int
	Code, Field  string
	Message      string
}

// Error names the request and what the server said.
func (e *Error) Error() string {
	s := fmt.Sprintf("%s %s: %d", e.Method, e.Path, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is makes errors.Is(e, ErrRejected) true for a 401 or a 403.
func (e *Error) Is(target error) bool {
	return target == ErrRejected && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

// Heartbeat posts hb; the first one is the agent's join.
func (h *HTTP) Heartbeat(ctx context.Context, hb Heartbeat) error {
	if hb.Agent == "" {
		hb.Agent = h.Agent
	}
	var reply HeartbeatReply
	if err := h.do(ctx, "POST", "/api/v1/agent/heartbeat", hb, &reply, nil); err != nil {
		return err
	}
	if reply.Token == "" {
		return nil
	}
	h.mu.Lock()
	h.cred = reply.Token
	h.mu.Unlock()
	if h.OnCredential != nil {
		if err := h.OnCredential(reply.Token); err != nil {
			return fmt.Errorf("POST /api/v1/agent/heartbeat: keep the agent's credential: %w", err)
		}
	}
	return nil
}

// SendSamples posts sample and summary records.
func (h *HTTP) SendSamples(ctx context.Context, recs []Record) error {
	return h.send(ctx, "/api/v1/agent/samples", recs)
}

// SendEvents posts event records.
func (h *HTTP) SendEvents(ctx context.Context, recs []Record) error {
	return h.send(ctx, "/api/v1/agent/events", recs)
}

func (h *HTTP) send(ctx context.Context, path string, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	var reply BatchReply
	if err := h.do(ctx, "POST", path, RecordBatch{Agent: h.Agent, Epoch: h.Epoch, Records: recs}, &reply, nil); err != nil {
		return err
	}
	if last := recs[len(recs)-1].Seq; reply.Applied < int64(last) {
		// The server must have the batch before the spool forgets it.
		return fmt.Errorf("POST %s: the server acknowledged records up to %d of a batch ending at %d", path, reply.Applied, last)
	}
	return nil
}

// FetchCommands returns the commands waiting for this agent.
func (h *HTTP) FetchCommands(ctx context.Context) ([]Command, error) {
	var reply CommandsReply
	if err := h.do(ctx, "GET", "/api/v1/agent/commands?agent="+url.QueryEscape(h.Agent), nil, &reply, nil); err != nil {
		return nil, err
	}
	return reply.Commands, nil
}

// Ack acknowledges command id with result (ok, or what went wrong).
func (h *HTTP) Ack(ctx context.Context, id, result string) error {
	return h.do(ctx, "POST", "/api/v1/agent/commands/"+url.PathEscape(id)+"/ack", AckRequest{Agent: h.Agent, Result: result}, nil, nil)
}

// SendLog posts a chunk of run's log at offset and returns the server's
// length of it.
func (h *HTTP) SendLog(ctx context.Context, run string, offset int64, data []byte) (int64, error) {
	var reply LogChunkReply
	var hdr http.Header
	err := h.do(ctx, "POST", "/api/v1/agent/logs", LogChunk{Agent: h.Agent, Run: run, Offset: offset, Data: data}, &reply, &hdr)
	var he *Error
	if errors.As(err, &he) {
		switch he.Status {
		case http.StatusConflict:
			if end, perr := strconv.ParseInt(hdr.Get(LogEndHeader), 10, 64); perr == nil {
				return 0, &LogGapError{End: end}
			}
		case http.StatusNotFound:
			return 0, fmt.Errorf("%w: %w", ErrUnknownRun, err)
		}
	}
	if err != nil {
		return 0, err
	}
	return reply.End, nil
}

// do sends one request with body as JSON and decodes the reply into out;
// hdr, when not nil, receives the reply's headers. Every error names the
// request.
func (h *HTTP) do(ctx context.Context, method, path string, body, out any, hdr *http.Header) error {
	what := method + " " + strings.SplitN(path, "?", 2)[0]
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s: encode: %w", what, err)
		}
		rd = bytes.NewReader(b)
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(h.URL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+h.bearer())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := h.Client
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if hdr != nil {
		*hdr = resp.Header
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s: read reply: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Method: method, Path: strings.SplitN(path, "?", 2)[0], Status: resp.StatusCode}
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &eb) == nil {
			e.Code, e.Field, e.Message = eb.Error.Code, eb.Error.Field, eb.Error.Message
		} else {
			e.Message = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: decode reply: %w", what, err)
		}
	}
	return nil
}

var defaultClient = &http.Client{Transport: &http.Transport{
	Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
	ResponseHeaderTimeout: DefaultTimeout, TLSHandshakeTimeout: 10 * time.Second,
}}
