package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	fleetpkg "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Notice is one idle-ladder rung a team must hear of: the notify rung
// (idle-notify), the action taken (idle-action) and a zombie stopped
// (zombie). It is the webhook's JSON body.
type Notice struct {
	// ID names the notice for the receiver: a retry resends the same ID,
	// so a receiver that saw it may drop it.
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	At      time.Time `json:"at"`
	Unit    string    `json:"unit"`
	Team    string    `json:"team"`
	LeaseID string    `json:"lease_id"`
	GPU     int       `json:"gpu"`
	// Action is the policy's idle action (share, downsize, stop, none) on
	// idle-action, stop on a zombie.
	Action string `json:"action,omitempty"`
	Reason string `json:"reason"`
}

// Notifier delivers notices. Notify is called by the loop after a tick's
// decisions are committed and must not block; it reports whether the
// notice was taken (false: dropped, the loop records why).
type Notifier interface {
	Notify(n Notice) bool
}

// notifiedKinds are the ladder's rungs that are notified: the alert rung
// is the dashboard's, the budget alert is not the ladder's.
var notifiedKinds = map[string]bool{"idle-notify": true, "idle-action": true, "zombie": true}

// notices are the step's alerts a team must hear of.
func notices(alerts []fleetpkg.Alert, now time.Time) []Notice {
	var out []Notice
	for _, a := range alerts {
		if !notifiedKinds[a.Kind] {
			continue
		}
		out = append(out, Notice{ID: fmt.Sprintf("%s:%s:%s/%d:%d", a.Kind, a.Unit, a.LeaseID, a.GPU, now.UnixMilli()),
			Kind: a.Kind, At: now, Unit: a.Unit, Team: a.Team, LeaseID: a.LeaseID, GPU: a.GPU, Action: string(a.Action), Reason: a.Reason})
	}
	return out
}

// SignatureHeader carries the body's signature: "sha256=" and the hex
// HMAC-SHA256 of the body under the shared secret.
const SignatureHeader = "X-Gpufleet-Signature"

// Sign returns SignatureHeader's value for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether header is body's signature under
// secret, in constant time: what a receiver checks.
func VerifySignature(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// WebhookConfig is where and how notices are POSTed.
type WebhookConfig struct {
	// URL is the endpoint (http or https); Secret signs each body.
	URL    string
	Secret []byte
	// Store records each attempt as a notify.sent or notify.failed event.
	Store store.Store
	Clock clock.Clock
	Log   *slog.Logger
	// Client sends the requests (nil: one with a 10 s timeout).
	Client *http.Client
	// Attempts bounds the tries per notice (5); Backoff is the wait
	// before the second (1 s), doubled before each next, at most
	// MaxBackoff (1 min).
	Attempts            int
	Backoff, MaxBackoff time.Duration
	// Queue bounds the notices waiting to be sent (256).
	Queue int
}

// Webhook sends notices as signed JSON POSTs, retried with backoff.
//
// The notices wait in a bounded in-memory queue drained by Run, not in
// the store: the tick only hands them over (Notify never blocks, so a
// slow or dead endpoint cannot hold the loop or its transaction), and
// only the leader's ticks hand any over, so replicas never send twice.
// What a crash loses is the delivery of notices still queued, not the
// decision: every rung is an event in the store before it is queued, and
// each attempt is an event after it (notify.sent, notify.failed), so the
// trail says which were never delivered. A durable outbox would need a
// table and a leader-only drainer for a message whose worth is minutes.
type Webhook struct {
	cfg WebhookConfig
	q   chan Notice
	// wg counts notices taken and not yet settled (tests wait on it).
	wg sync.WaitGroup
}

var _ Notifier = (*Webhook)(nil)

// NewWebhook checks cfg and returns its webhook; Run sends.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := CheckWebhookURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if len(cfg.Secret) == 0 {
		return nil, fmt.Errorf("webhook: %w", &core.FieldError{Field: "secret", Value: "", Allowed: "a non-empty secret to sign the bodies with"})
	}
	if cfg.Store == nil || cfg.Clock == nil || cfg.Log == nil {
		return nil, errors.New("webhook: store, clock and log are required")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 256
	}
	return &Webhook{cfg: cfg, q: make(chan Notice, cfg.Queue)}, nil
}

// CheckWebhookURL reports what is wrong with a webhook URL: it must be
// absolute, http or https, with a host.
func CheckWebhookURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &core.FieldError{Field: "url", Value: s, Allowed: "an absolute http or https URL with a host and no user info"}
	}
	return nil
}

// Notify queues n; false when the queue is full.
func (w *Webhook) Notify(n Notice) bool {
	w.wg.Add(1)
	select {
	case w.q <- n:
		return true
	default:
		w.wg.Done()
		return false
	}
}

// Run sends queued notices, one at a time, until ctx ends.
func (w *Webhook) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-w.q:
			w.deliver(ctx, n)
			w.wg.Done()
		}
	}
}

// wait blocks until every notice taken so far is settled (sent, or
// given up): for tests.
func (w *Webhook) wait() { w.wg.Wait() }

// deliver tries n up to Attempts times, recording each attempt.
func (w *Webhook) deliver(ctx context.Context, n Notice) {
	body, err := json.Marshal(n)
	if err != nil {
		return // a Notice always marshals
	}
	backoff := w.cfg.Backoff
	for attempt := 1; ; attempt++ {
		status, err := w.post(ctx, body)
		last := attempt >= w.cfg.Attempts
		ev := core.Event{At: w.cfg.Clock.Now(), Subject: n.Unit,
			Attrs: map[string]string{"notice": n.ID, "notice_kind": n.Kind, "attempt": strconv.Itoa(attempt), "status": strconv.Itoa(status), store.EventTeam: n.Team}}
		retry := false
		switch {
		case err == nil && status/100 == 2:
			ev.Kind = "notify.sent"
			ev.Reason = fmt.Sprintf("%s of %s sent to the webhook (HTTP %d, attempt %d)", n.Kind, n.Unit, status, attempt)
		default:
			ev.Kind = "notify.failed"
			what := fmt.Sprintf("HTTP %d", status)
			if err != nil {
				what = err.Error()
			}
			retry = !last && (err != nil || status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests)
			then := "given up"
			if retry {
				then = "retrying in " + backoff.String()
			}
			ev.Attrs["final"] = strconv.FormatBool(!retry)
			ev.Reason = fmt.Sprintf("%s of %s not delivered to the webhook (attempt %d of %d: %s): %s", n.Kind, n.Unit, attempt, w.cfg.Attempts, what, then)
		}
		if _, err := w.cfg.Store.Events().AppendEvents(ctx, ev); err != nil && ctx.Err() == nil {
			w.cfg.Log.Warn("webhook: recording an attempt failed", "notice", n.ID, "err", err)
		}
		if !retry {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, w.cfg.MaxBackoff)
	}
}

// post sends body once and returns the HTTP status (0 when none came).
func (w *Webhook) post(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpufleet-webhook")
	req.Header.Set(SignatureHeader, Sign(w.cfg.Secret, body))
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the configuration's, not news
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// notify hands the step's notified rungs to the Notifier, after the
// commit: a notice is never sent of a decision the store lost. One the
// Notifier cannot take (its queue is full) is recorded as failed.
func (l *Loop) notify(ctx context.Context, alerts []fleetpkg.Alert, now time.Time) {
	if l.cfg.Notify == nil {
		return
	}
	var dropped []core.Event
	for _, n := range notices(alerts, now) {
		if !l.cfg.Notify.Notify(n) {
			dropped = append(dropped, core.Event{At: now, Kind: "notify.failed", Subject: n.Unit,
				Attrs:  map[string]string{"notice": n.ID, "notice_kind": n.Kind, "attempt": "0", "final": "true", store.EventTeam: n.Team},
				Reason: fmt.Sprintf("%s of %s not sent: the webhook's queue is full (the endpoint is slow or down)", n.Kind, n.Unit)})
		}
	}
	if len(dropped) > 0 {
		if _, err := l.cfg.Store.Events().AppendEvents(ctx, dropped...); err != nil {
			l.cfg.Log.Warn("notify: recording dropped notices failed", "n", len(dropped), "err", err)
		}
	}
}
