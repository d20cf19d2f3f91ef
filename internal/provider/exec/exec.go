package exec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// Defaults for a Config's zero fields.
const (
	DefaultTimeout      = 60 * time.Second
	DefaultPollInterval = 15 * time.Second
	DefaultMaxOutput    = 1 << 20
	stderrTail          = 2 << 10
)

// Config says which script to run and how.
type Config struct {
	// Script is run as "Script OP" for every operation; Scripts may name
	// another script per operation (acquire, release, list, describe),
	// which is then run as "Scripts[OP] OP".
	Script  string
	Scripts map[string]string
	// Env is added to the scripts' environment (which is the server's).
	Env map[string]string
	// Timeout bounds each call; on expiry the script's process group is
	// killed.
	Timeout time.Duration
	// PollInterval is how often Poll lists the machines to find state
	// changes; Poll calls in between return nothing.
	PollInterval time.Duration
	// MaxOutput caps a call's stdout, in bytes.
	MaxOutput int
	// Offer returns an offer's details for acquire's input; nil sends the
	// offer id alone.
	Offer func(id string) (*core.Offer, bool)
}

// Provider runs the scripts of a Config.
type Provider struct {
	cfg Config

	mu sync.Mutex
	// known is each machine's state as the caller last saw it (acquire,
	// describe, list, a poll, or Released once we released it), so that
	// Poll reports each change once and tells a vanished machine from a
	// released one.
	known    map[string]provider.State
	lastPoll time.Time
	// seeded is set by the first poll, which only records the machines
	// it lists that the caller has not seen: on start the server
	// reconciles its leases with List, and an event for a machine already
	// ready would reset the lease (its idle clock, a drain under way).
	// What List showed is in known, so a machine that changed between
	// that List and the first poll is reported like any other change.
	seeded bool
}

var _ provider.Provider = (*Provider)(nil)

// New checks cfg and returns its provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxOutput == 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.Timeout < 0 {
		return nil, &core.FieldError{Field: "timeout", Value: cfg.Timeout.String(), Allowed: "a positive duration"}
	}
	if cfg.PollInterval < 0 {
		return nil, &core.FieldError{Field: "poll_interval", Value: cfg.PollInterval.String(), Allowed: "a positive duration"}
	}
	if cfg.MaxOutput < 0 {
		return nil, &core.FieldError{Field: "max_output_bytes", Value: fmt.Sprint(cfg.MaxOutput), Allowed: "a positive number of bytes"}
	}
	for op, s := range cfg.Scripts {
		switch op {
		case OpAcquire, OpRelease, OpList, OpDescribe:
		default:
			return nil, &core.FieldError{Field: "scripts", Value: op, Allowed: "acquire, release, list, describe"}
		}
		if err := checkScript("scripts."+op, s); err != nil {
			return nil, err
		}
	}
	for _, op := range []string{OpAcquire, OpRelease, OpList, OpDescribe} {
		if cfg.Scripts[op] == "" {
			if err := checkScript("script", cfg.Script); err != nil {
				return nil, err
			}
		}
	}
	return &Provider{cfg: cfg, known: map[string]provider.State{}}, nil
}

func checkScript(field, path string) error {
	if path == "" {
		return &core.FieldError{Field: field, Value: "", Allowed: "the path of an executable script"}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return &core.FieldError{Field: field, Value: path, Allowed: "an existing executable file (" + err.Error() + ")"}
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return &core.FieldError{Field: field, Value: path, Allowed: "an executable file (chmod +x)"}
	}
	return nil
}

func (p *Provider) script(op string) string {
	if s := p.cfg.Scripts[op]; s != "" {
		return s
	}
	return p.cfg.Script
}

// CallError is a failed script call: which script, which operation and
// why, with the tail of its stderr.
type CallError struct {
	Script string
	Op     string
	Err    error
	Stderr string
}

func (e *CallError) Error() string {
	msg := fmt.Sprintf("exec provider: %s %s: %v", filepath.Base(e.Script), e.Op, e.Err)
	if e.Stderr != "" {
		msg += "; stderr: " + e.Stderr
	}
	return msg
}

func (e *CallError) Unwrap() error { return e.Err }

// ErrTimeout is wrapped when a script ran past the timeout.
var ErrTimeout = errors.New("timed out")

// ErrTooMuchOutput is wrapped when a script wrote more than MaxOutput.
var ErrTooMuchOutput = errors.New("output too large")

// call runs op's script with in as JSON on stdin and decodes its stdout.
func (p *Provider) call(ctx context.Context, op string, in any) (Response, error) {
	script := p.script(op)
	fail := func(err error, stderr string) (Response, error) {
		return Response{}, &CallError{Script: script, Op: op, Err: err, Stderr: stderr}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return fail(err, "")
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	cmd := osexec.CommandContext(ctx, script, op)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = os.Environ()
	cmd.Env = append(cmd.Env, "GPUFLEET_OP="+op)
	for k, v := range p.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout := &capped{max: p.cfg.MaxOutput}
	stderr := &tail{max: stderrTail}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	killGroup(cmd)
	// A grandchild holding the pipes open must not keep Wait waiting.
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fail(fmt.Errorf("%w after %s (process group killed)", ErrTimeout, p.cfg.Timeout), stderr.String())
	case ctx.Err() != nil:
		return fail(ctx.Err(), stderr.String())
	case err != nil:
		return fail(err, stderr.String())
	case stdout.over:
		return fail(fmt.Errorf("%w: over %d bytes on stdout", ErrTooMuchOutput, p.cfg.MaxOutput), stderr.String())
	}
	r, err := Decode(stdout.buf.Bytes())
	if err != nil {
		return r, &CallError{Script: script, Op: op, Err: err, Stderr: stderr.String()}
	}
	return r, nil
}

// Acquire implements provider.Provider: the script must return the same
// machine for a client token it has seen.
func (p *Provider) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	in := AcquireInput{ClientToken: req.ClientToken, Offer: req.OfferID, Mode: string(req.Mode)}
	if b := req.Bootstrap; b.JoinToken != "" {
		in.ServerURL, in.LeaseID, in.JoinToken, in.BinaryURL = b.ServerURL, b.LeaseID, b.JoinToken, b.BinaryURL
		if !b.Expires.IsZero() {
			in.JoinExpires = b.Expires.UTC().Format(time.RFC3339)
		}
	}
	if p.cfg.Offer != nil {
		if o, ok := p.cfg.Offer(req.OfferID); ok {
			in.Provider, in.Region, in.InstanceType, in.GPUModel, in.GPUs = o.Provider, o.Region, o.InstanceType, o.GPUModel, o.GPUs
		}
	}
	m, err := p.machine(ctx, OpAcquire, in)
	if err != nil {
		return provider.Machine{}, err
	}
	if m.ClientToken != req.ClientToken {
		return provider.Machine{}, &CallError{Script: p.script(OpAcquire), Op: OpAcquire,
			Err: fmt.Errorf("%w: machine %s has client_token %q, want %q (the script must answer a token it has seen with that token's machine)", ErrProtocol, m.ProviderID, m.ClientToken, req.ClientToken)}
	}
	return m, nil
}

// Describe returns one machine as the script sees it now.
func (p *Provider) Describe(ctx context.Context, providerID string) (provider.Machine, error) {
	return p.machine(ctx, OpDescribe, MachineInput{ProviderID: providerID})
}

func (p *Provider) machine(ctx context.Context, op string, in any) (provider.Machine, error) {
	r, err := p.call(ctx, op, in)
	if err != nil {
		return provider.Machine{}, err
	}
	if r.Machine == nil {
		return provider.Machine{}, &CallError{Script: p.script(op), Op: op, Err: fmt.Errorf("%w: no \"machine\" in the output", ErrProtocol)}
	}
	m, err := r.Machine.Machine()
	if err != nil {
		return provider.Machine{}, &CallError{Script: p.script(op), Op: op, Err: err}
	}
	p.mu.Lock()
	if _, seen := p.known[m.ProviderID]; !seen {
		p.known[m.ProviderID] = m.State
	}
	p.mu.Unlock()
	return m, nil
}

// Release implements provider.Provider; releasing a released (or
// unknown) machine is not an error, as the interface asks.
func (p *Provider) Release(ctx context.Context, providerID string) error {
	_, err := p.call(ctx, OpRelease, MachineInput{ProviderID: providerID})
	if err != nil && !errors.Is(err, provider.ErrUnknownMachine) {
		return err
	}
	p.mu.Lock()
	p.known[providerID] = provider.Released
	p.mu.Unlock()
	return nil
}

// List implements provider.Provider. The states it returns count as
// seen: Poll reports the changes after them (see Poll).
func (p *Provider) List(ctx context.Context) ([]provider.Machine, error) {
	ms, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, m := range ms {
		// A machine we released that the script still lists stays
		// released here: its going is no failure.
		if p.known[m.ProviderID] != provider.Released {
			p.known[m.ProviderID] = m.State
		}
	}
	p.mu.Unlock()
	return ms, nil
}

// list runs the list script: every machine but the released ones.
func (p *Provider) list(ctx context.Context) ([]provider.Machine, error) {
	r, err := p.call(ctx, OpList, struct{}{})
	if err != nil {
		return nil, err
	}
	out := make([]provider.Machine, 0, len(r.Machines))
	seen := map[string]bool{}
	for i := range r.Machines {
		m, err := r.Machines[i].Machine()
		if err != nil {
			return nil, &CallError{Script: p.script(OpList), Op: OpList, Err: fmt.Errorf("machines[%d]: %w", i, err)}
		}
		if seen[m.ProviderID] {
			return nil, &CallError{Script: p.script(OpList), Op: OpList, Err: fmt.Errorf("%w: machine %s listed twice", ErrProtocol, m.ProviderID)}
		}
		seen[m.ProviderID] = true
		if m.State != provider.Released {
			out = append(out, m)
		}
	}
	return out, nil
}

// Poll implements provider.Provider by listing at most every
// PollInterval and reporting each machine whose state changed since it
// was last seen (ready, reclaiming, reclaimed, failed). A machine we knew
// that is gone from the list without our release is reported failed. The
// first poll reports changes of the machines this process has shown its
// caller (Acquire, Describe, List): a restarted server reconciles with
// List, and a machine that List showed provisioning and that is ready by
// the first poll is reported ready, not taken as seen. The machines the
// caller has never been shown the first poll only records.
func (p *Provider) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	p.mu.Lock()
	due := p.lastPoll.IsZero() || now.Sub(p.lastPoll) >= p.cfg.PollInterval
	p.mu.Unlock()
	if !due {
		return nil, nil
	}
	ms, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastPoll = now
	var evs []provider.Event
	listed := map[string]bool{}
	for _, m := range ms {
		listed[m.ProviderID] = true
		old, ok := p.known[m.ProviderID]
		if ok && old == m.State {
			continue
		}
		if !ok && !p.seeded {
			p.known[m.ProviderID] = m.State
			continue
		}
		p.known[m.ProviderID] = m.State
		at := now
		switch m.State {
		case provider.Provisioning:
			continue
		case provider.Ready:
			if !m.ReadyAt.IsZero() && !m.ReadyAt.After(now) {
				at = m.ReadyAt
			}
		case provider.Reclaimed, provider.Failed:
			if !m.EndedAt.IsZero() && !m.EndedAt.After(now) {
				at = m.EndedAt
			}
		}
		evs = append(evs, provider.Event{At: at, Machine: m})
	}
	for id, st := range p.known {
		if listed[id] || st == provider.Released || st == provider.Failed || st == provider.Reclaimed {
			continue
		}
		p.known[id] = provider.Failed
		evs = append(evs, provider.Event{At: now, Machine: provider.Machine{ProviderID: id, State: provider.Failed, EndedAt: now}})
	}
	p.seeded = true
	sortEvents(evs)
	return evs, nil
}

func sortEvents(evs []provider.Event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].At.Before(evs[j-1].At); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// capped keeps the first max bytes written and notes whether there was
// more; it goes on accepting, so a script is never blocked on a full
// pipe.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(b []byte) (int, error) {
	keep := b
	if room := c.max - c.buf.Len(); len(b) > room {
		c.over = true
		keep = b[:max(room, 0)]
	}
	c.buf.Write(keep)
	return len(b), nil
}

// tail keeps the last max bytes written.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

func (t *tail) String() string { return strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "?")) }
