package exec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// The operations a script implements; the name is its first argument.
const (
	OpAcquire  = "acquire"
	OpRelease  = "release"
	OpList     = "list"
	OpDescribe = "describe"
)

// AcquireInput is what an acquire call reads on stdin. The offer's
// details are included so that a script need not know the catalog.
type AcquireInput struct {
	ClientToken  string `json:"client_token"`
	Offer        string `json:"offer"`
	Mode         string `json:"mode"`
	Provider     string `json:"provider,omitempty"`
	Region       string `json:"region,omitempty"`
	InstanceType string `json:"instance_type,omitempty"`
	GPUModel     string `json:"gpu_model,omitempty"`
	GPUs         int    `json:"gpus,omitempty"`
	// The machine's bootstrap (provider.Bootstrap): its agent joins
	// ServerURL once with JoinToken, good for lease LeaseID only until
	// JoinExpires (RFC 3339), e.g. `gpufleet agent --server $server_url
	// --join-token $join_token --lease $lease_id`; BinaryURL, when set,
	// is where the machine may download gpufleet. Absent when the server
	// gives none. The join token is a secret: do not log it.
	ServerURL   string `json:"server_url,omitempty"`
	LeaseID     string `json:"lease_id,omitempty"`
	JoinToken   string `json:"join_token,omitempty"`
	JoinExpires string `json:"join_expires,omitempty"`
	BinaryURL   string `json:"binary_url,omitempty"`
}

// MachineInput is what release and describe calls read on stdin.
type MachineInput struct {
	ProviderID string `json:"provider_id"`
}

// MachineDoc is a machine as a script writes it. Times are RFC 3339;
// empty or absent means not yet (or never).
type MachineDoc struct {
	ProviderID  string `json:"provider_id"`
	ClientToken string `json:"client_token"`
	Offer       string `json:"offer"`
	Mode        string `json:"mode"`
	State       string `json:"state"`
	LaunchedAt  string `json:"launched_at,omitempty"`
	ReadyAt     string `json:"ready_at,omitempty"`
	ReclaimAt   string `json:"reclaim_at,omitempty"`
	EndedAt     string `json:"ended_at,omitempty"`
}

// ErrorDoc is how a script reports a failure it understands: code
// "no_capacity" (provider.ErrCapacity), "unknown_machine"
// (provider.ErrUnknownMachine) or any other code with a message.
type ErrorDoc struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Response is the one JSON object a script writes on stdout: Machine for
// acquire and describe, Machines for list, nothing for release, or Error.
type Response struct {
	Machine  *MachineDoc  `json:"machine,omitempty"`
	Machines []MachineDoc `json:"machines,omitempty"`
	Error    *ErrorDoc    `json:"error,omitempty"`
}

// ErrProtocol is wrapped by every error about a script's output that
// does not follow the protocol.
var ErrProtocol = errors.New("exec provider: protocol violation")

var states = map[string]provider.State{
	"provisioning": provider.Provisioning, "ready": provider.Ready, "reclaiming": provider.Reclaiming,
	"reclaimed": provider.Reclaimed, "released": provider.Released, "failed": provider.Failed,
}

// Decode parses a script's stdout strictly: exactly one JSON object,
// no unknown fields, nothing after it. A reported error comes back as
// the error it maps to.
func Decode(out []byte) (Response, error) {
	var r Response
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 {
		return r, fmt.Errorf("%w: no output, want one JSON object", ErrProtocol)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Response{}, fmt.Errorf("%w: invalid JSON (%v) in output starting %q", ErrProtocol, err, snippet(trimmed))
	}
	if dec.More() {
		return Response{}, fmt.Errorf("%w: more output after the JSON object (%q)", ErrProtocol, snippet(trimmed[dec.InputOffset():]))
	}
	if e := r.Error; e != nil {
		switch e.Code {
		case "no_capacity":
			return r, fmt.Errorf("%w: %s", provider.ErrCapacity, e.Message)
		case "unknown_machine":
			return r, fmt.Errorf("%w: %s", provider.ErrUnknownMachine, e.Message)
		case "":
			return Response{}, fmt.Errorf("%w: error without a code (message %q)", ErrProtocol, e.Message)
		}
		return r, fmt.Errorf("script reported %s: %s", e.Code, e.Message)
	}
	return r, nil
}

// Machine converts d to a provider.Machine, checking every field.
func (d *MachineDoc) Machine() (provider.Machine, error) {
	m := provider.Machine{ProviderID: d.ProviderID, ClientToken: d.ClientToken, OfferID: d.Offer, Mode: core.BillingMode(d.Mode)}
	if d.ProviderID == "" {
		return m, fmt.Errorf("%w: machine without provider_id", ErrProtocol)
	}
	st, ok := states[d.State]
	if !ok {
		return m, fmt.Errorf("%w: machine %s: state %q, want one of provisioning, ready, reclaiming, reclaimed, released, failed", ErrProtocol, d.ProviderID, d.State)
	}
	m.State = st
	if d.Mode != "" {
		mode, err := core.ParseBillingMode(d.Mode)
		if err != nil {
			return m, fmt.Errorf("%w: machine %s: %v", ErrProtocol, d.ProviderID, err)
		}
		m.Mode = mode
	}
	for _, f := range []struct {
		name string
		v    string
		dst  *time.Time
	}{{"launched_at", d.LaunchedAt, &m.LaunchedAt}, {"ready_at", d.ReadyAt, &m.ReadyAt}, {"reclaim_at", d.ReclaimAt, &m.ReclaimAt}, {"ended_at", d.EndedAt, &m.EndedAt}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			return m, fmt.Errorf("%w: machine %s: %s %q, want an RFC 3339 time", ErrProtocol, d.ProviderID, f.name, f.v)
		}
		*f.dst = t.UTC()
	}
	if m.State != provider.Failed && m.LaunchedAt.IsZero() {
		return m, fmt.Errorf("%w: machine %s is %s without launched_at (billing starts then)", ErrProtocol, d.ProviderID, d.State)
	}
	return m, nil
}

// snippet is the start of b, for error messages.
func snippet(b []byte) string {
	const n = 80
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
