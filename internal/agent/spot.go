package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// EventSpotNotice reports a spot interruption notice of the agent's
// machine: attrs reclaim_at (RFC 3339, when the machine goes) and
// action (terminate, stop, hibernate). The server gives the machine's
// lease that ReclaimAt, and its jobs get their checkpoint commands.
const EventSpotNotice = "spot-notice"

// DefaultSpotInterval is how often the agent asks for a spot notice
// (AWS posts it two minutes ahead and advises a look every 5 s).
const DefaultSpotInterval = 5 * time.Second

// SpotNotices tells the agent of its machine's spot interruption.
type SpotNotices interface {
	// Notice returns the interruption notice posted, ok false while
	// there is none.
	Notice(ctx context.Context) (n SpotNotice, ok bool, err error)
}

// SpotNotice is one interruption notice.
type SpotNotice struct {
	Action string    `json:"action"`
	Time   time.Time `json:"time"`
}

// IMDS reads the spot notice from EC2's instance metadata service, IMDSv2
// only (a session token first: PUT /latest/api/token, then GET
// /latest/meta-data/spot/instance-action; a 404 is no notice).
type IMDS struct {
	c *imds.Client
}

var _ SpotNotices = (*IMDS)(nil)

// NewIMDS returns the metadata service at endpoint (the instance's own
// when empty).
func NewIMDS(endpoint string) *IMDS {
	return &IMDS{c: imds.New(imds.Options{Endpoint: endpoint, ClientEnableState: imds.ClientEnabled,
		EnableFallback: aws.FalseTernary, Retryer: aws.NopRetryer{}})}
}

// Probe reports whether the service answers within timeout: on a
// machine that is no EC2 instance the address goes nowhere.
func (m *IMDS) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := m.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
	if err != nil && !notFound(err) {
		return fmt.Errorf("instance metadata: %w", err)
	}
	if out != nil {
		out.Content.Close()
	}
	return nil
}

// Notice implements SpotNotices.
func (m *IMDS) Notice(ctx context.Context) (SpotNotice, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := m.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "spot/instance-action"})
	if notFound(err) {
		return SpotNotice{}, false, nil
	}
	if err != nil {
		return SpotNotice{}, false, fmt.Errorf("spot/instance-action: %w", err)
	}
	defer out.Content.Close()
	body, err := io.ReadAll(io.LimitReader(out.Content, 4<<10))
	if err != nil {
		return SpotNotice{}, false, fmt.Errorf("spot/instance-action: %w", err)
	}
	var n SpotNotice
	if err := json.Unmarshal(body, &n); err != nil || n.Time.IsZero() {
		return SpotNotice{}, false, fmt.Errorf("spot/instance-action: not a notice: %q", strings.TrimSpace(string(body)))
	}
	return n, true, nil
}

func notFound(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// spotLoop asks Config.Spot for a notice every SpotInterval and reports
// each new one (a notice whose time changed is new) as EventSpotNotice.
func (a *agent) spotLoop(ctx context.Context) {
	every := a.cfg.SpotInterval
	if every <= 0 {
		every = DefaultSpotInterval
	}
	var last time.Time
	failing := false
	for {
		n, ok, err := a.cfg.Spot.Notice(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				a.log.Warn("spot notice: the metadata service did not answer", "err", err)
			}
			failing = true
		case err == nil:
			failing = false
			if ok && !n.Time.Equal(last) {
				last = n.Time
				a.log.Warn("spot interruption notice", "action", n.Action, "at", n.Time)
				a.event(EventSpotNotice, fmt.Sprintf("spot interruption notice: the machine is to %s at %s", n.Action, n.Time.UTC().Format(time.RFC3339)),
					map[string]string{"reclaim_at": n.Time.UTC().Format(time.RFC3339), "action": n.Action, "lease": a.cfg.LeaseID})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(every):
		}
	}
}
