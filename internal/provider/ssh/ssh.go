package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// bootTimeout bounds one machine's start: dial, GPUs, the binary's copy,
// the agent's start.
const bootTimeout = 5 * time.Minute

// Provider rents the hosts of a Config, one lease per host at a time.
type Provider struct {
	cfg   Config
	hosts map[string]*Host

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	machines map[string]*machine // by provider ID
	byToken  map[string]*machine
	// retryAt passes over a host whose last start failed until then.
	retryAt map[string]time.Time
	// probed is the offer nvidia-smi showed a host without one to be.
	probed   map[string]string
	lastPoll time.Time

	shaOnce sync.Once
	sha     string
	shaErr  error
}

var _ provider.Provider = (*Provider)(nil)

// machine is one lease on one host. The exported fields are the state
// file's; the rest lives as long as this process.
type machine struct {
	ProviderID  string           `json:"provider_id"`
	ClientToken string           `json:"client_token"`
	Host        string           `json:"host"`
	OfferID     string           `json:"offer"`
	Mode        core.BillingMode `json:"mode"`
	State       provider.State   `json:"state"`
	LaunchedAt  time.Time        `json:"launched_at"`
	ReadyAt     time.Time        `json:"ready_at,omitzero"`
	EndedAt     time.Time        `json:"ended_at,omitzero"`
	// Dir is the host's RemoteDir, resolved, once the host was reached.
	Dir string `json:"dir,omitempty"`
	// Started: an agent may run on the host, so a release must reach the
	// host to stop it.
	Started bool `json:"started,omitempty"`
	// Stopping: released by the caller, its agent not yet stopped; the
	// host stays held and Poll retries the stop.
	Stopping bool `json:"stopping,omitempty"`
	// Reason says why the machine failed.
	Reason           string    `json:"reason,omitempty"`
	UnreachableSince time.Time `json:"unreachable_since,omitzero"`

	shown   provider.State
	booting bool
	stop    context.CancelFunc
	booted  chan struct{}
}

func (m *machine) public() provider.Machine {
	return provider.Machine{ProviderID: m.ProviderID, ClientToken: m.ClientToken, OfferID: m.OfferID, Mode: m.Mode,
		State: m.State, LaunchedAt: m.LaunchedAt, ReadyAt: m.ReadyAt, EndedAt: m.EndedAt}
}

// holds reports whether m keeps its host from other leases.
func (m *machine) holds() bool { return m.State != provider.Released || m.Stopping }

// New checks cfg and loads the state file: the leases a previous process
// held are held again.
func New(cfg Config) (*Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	for i := range cfg.Hosts {
		if h := cfg.Hosts[i]; h.FakeGPUs > 0 && h.Offer == "" {
			return nil, &core.FieldError{Field: "hosts[" + strconv.Itoa(i) + "].offer", Value: "", Allowed: "the offer a host with fake_gpus is (fake GPUs match no catalog model)"}
		}
	}
	p := &Provider{cfg: cfg, hosts: map[string]*Host{}, machines: map[string]*machine{}, byToken: map[string]*machine{},
		retryAt: map[string]time.Time{}, probed: map[string]string{}}
	for i := range p.cfg.Hosts {
		p.hosts[p.cfg.Hosts[i].Name] = &p.cfg.Hosts[i]
	}
	ms, err := loadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if p.hosts[m.Host] == nil && m.holds() {
			cfg.Log.Warn("ssh provider: the state file holds a machine on a host the config no longer lists; it stays failed until released",
				"provider_id", m.ProviderID, "host", m.Host)
			if m.State != provider.Released {
				m.State, m.Reason = provider.Failed, "host "+m.Host+" is not in the config"
			}
		}
		m.shown = m.State
		p.machines[m.ProviderID] = m
		p.byToken[m.ClientToken] = m
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Close stops the starts under way (the machines they were for stay
// provisioning; a restarted provider checks them) and waits for them.
func (p *Provider) Close() error {
	p.cancel()
	p.wg.Wait()
	return nil
}

// Reason returns why a machine failed ("" if it did not), for logs and
// tests: provider.Machine has no field for it.
func (p *Provider) Reason(providerID string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.machines[providerID]; m != nil {
		return m.Reason
	}
	return ""
}

// Acquire implements provider.Provider: it takes a free host of the
// offer and starts the machine's agent there in the background; the
// machine is provisioning until the agent runs (Poll reports it ready),
// or failed with its reason (host down, login refused, host key
// refused, no GPU). With no free host of the offer: provider.ErrCapacity.
func (p *Provider) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	if req.ClientToken == "" {
		return provider.Machine{}, &core.FieldError{Field: "client_token", Value: "", Allowed: "a token naming the lease"}
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	if m := p.byToken[req.ClientToken]; m != nil {
		defer p.mu.Unlock()
		return m.public(), nil
	}
	h := p.pick(req.OfferID, now)
	unprobed := p.unprobed(now)
	p.mu.Unlock()
	if h == nil && len(unprobed) > 0 {
		p.probe(ctx, unprobed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.byToken[req.ClientToken]; m != nil {
		return m.public(), nil
	}
	if h == nil {
		h = p.pick(req.OfferID, now)
	}
	if h == nil {
		return provider.Machine{}, fmt.Errorf("%w: no free host of offer %s", provider.ErrCapacity, req.OfferID)
	}
	m := &machine{ProviderID: h.Name + "/" + slug(req.ClientToken), ClientToken: req.ClientToken, Host: h.Name, OfferID: req.OfferID,
		Mode: req.Mode, State: provider.Provisioning, LaunchedAt: now, shown: provider.Provisioning}
	if p.machines[m.ProviderID] != nil {
		// Two tokens with one slug on one host: the second gets its own ID.
		m.ProviderID += "-" + strconv.FormatInt(now.UnixNano(), 36)
	}
	p.machines[m.ProviderID] = m
	p.byToken[m.ClientToken] = m
	if err := p.saveLocked(); err != nil {
		delete(p.machines, m.ProviderID)
		delete(p.byToken, m.ClientToken)
		return provider.Machine{}, err
	}
	p.cfg.Log.Info("ssh provider: acquiring", "host", h.Name, "address", h.Address, "lease", req.ClientToken, "offer", req.OfferID)
	p.startBoot(m, h, req.Bootstrap)
	return m.public(), nil
}

// pick returns a free host of the offer, the first in the config's order.
func (p *Provider) pick(offer string, now time.Time) *Host {
	held := map[string]bool{}
	for _, m := range p.machines {
		if m.holds() {
			held[m.Host] = true
		}
	}
	for i := range p.cfg.Hosts {
		h := &p.cfg.Hosts[i]
		if held[h.Name] || now.Before(p.retryAt[h.Name]) {
			continue
		}
		if h.Offer == offer || (h.Offer == "" && p.probed[h.Name] == offer) {
			return h
		}
	}
	return nil
}

// unprobed returns the free hosts whose offer is not yet known.
func (p *Provider) unprobed(now time.Time) []*Host {
	held := map[string]bool{}
	for _, m := range p.machines {
		if m.holds() {
			held[m.Host] = true
		}
	}
	var hs []*Host
	for i := range p.cfg.Hosts {
		h := &p.cfg.Hosts[i]
		if h.Offer == "" && p.probed[h.Name] == "" && !held[h.Name] && !now.Before(p.retryAt[h.Name]) {
			hs = append(hs, h)
		}
	}
	return hs
}

// probe reads the GPUs of hosts without an offer, at once, and matches
// each to the catalog. A host that fails is passed over for RetryAfter.
func (p *Provider) probe(ctx context.Context, hs []*Host) {
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 2*p.cfg.ConnectTimeout)
			defer cancel()
			offer, err := p.probeOne(ctx, h)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.retryAt[h.Name] = p.cfg.Clock.Now().Add(p.cfg.RetryAfter)
				p.cfg.Log.Warn("ssh provider: cannot tell the host's offer", "host", h.Name, "err", err)
				return
			}
			p.probed[h.Name] = offer
			p.cfg.Log.Info("ssh provider: host matched", "host", h.Name, "offer", offer)
		})
	}
	wg.Wait()
}

func (p *Provider) probeOne(ctx context.Context, h *Host) (string, error) {
	c, err := dial(ctx, h, p.cfg.ConnectTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	gpus, err := readGPUs(ctx, c, h)
	if err != nil {
		return "", err
	}
	offer, err := MatchOffer(gpus, p.cfg.Offers)
	if err != nil {
		return "", h.fail(err)
	}
	return offer, nil
}

// readGPUs runs nvidia-smi on the host.
func readGPUs(ctx context.Context, c *gossh.Client, h *Host) ([]GPU, error) {
	r, err := run(ctx, c, SMIQuery, nil)
	if err != nil {
		return nil, h.fail(err)
	}
	switch {
	case r.Code == 127:
		return nil, h.fail(fmt.Errorf("%w: nvidia-smi not found (no NVIDIA driver? fake_gpus: N makes a test host)", ErrNoGPU))
	case r.Code != 0:
		return nil, h.fail(fmt.Errorf("%w: nvidia-smi exited %d: %s", ErrNoGPU, r.Code, r.Stderr+strings.TrimSpace(r.Stdout)))
	}
	gpus, err := ParseSMI(r.Stdout)
	if err != nil {
		return nil, h.fail(err)
	}
	if len(gpus) == 0 {
		return nil, h.fail(fmt.Errorf("%w: nvidia-smi lists none", ErrNoGPU))
	}
	return gpus, nil
}

func (p *Provider) offer(id string) *core.Offer {
	for i := range p.cfg.Offers {
		if p.cfg.Offers[i].ID == id {
			return &p.cfg.Offers[i]
		}
	}
	return nil
}

// startBoot starts m's agent on h in the background; m.booted closes
// when it is done.
func (p *Provider) startBoot(m *machine, h *Host, b provider.Bootstrap) {
	ctx, cancel := context.WithTimeout(p.ctx, bootTimeout)
	m.booting, m.stop, m.booted = true, cancel, make(chan struct{})
	p.wg.Go(func() {
		defer close(m.booted)
		defer cancel()
		err := p.boot(ctx, m, h, b)
		now := p.cfg.Clock.Now()
		p.mu.Lock()
		defer p.mu.Unlock()
		m.booting = false
		switch {
		case m.Stopping || m.State == provider.Released:
		case err != nil && p.ctx.Err() != nil:
			// Shutting down: a restarted provider checks the machine.
		case err != nil:
			m.State, m.Reason, m.EndedAt = provider.Failed, err.Error(), now
			p.retryAt[h.Name] = now.Add(p.cfg.RetryAfter)
			p.cfg.Log.Warn("ssh provider: machine failed", "host", h.Name, "provider_id", m.ProviderID, "lease", m.ClientToken, "err", err)
		default:
			m.State, m.ReadyAt = provider.Ready, now
			p.cfg.Log.Info("ssh provider: agent started", "host", h.Name, "provider_id", m.ProviderID, "lease", m.ClientToken)
		}
		if err := p.saveLocked(); err != nil {
			p.cfg.Log.Error("ssh provider: state file", "err", err)
		}
	})
}

// boot connects to the host, checks its GPUs, brings the binary and
// starts the agent.
func (p *Provider) boot(ctx context.Context, m *machine, h *Host, b provider.Bootstrap) error {
	url, token, tokenEnv := b.ServerURL, b.JoinToken, "GPUFLEET_JOIN_TOKEN"
	if p.cfg.ServerURL != "" {
		url = p.cfg.ServerURL
	}
	if token == "" && p.cfg.Join != nil {
		u, t, err := p.cfg.Join()
		if err != nil {
			return fmt.Errorf("ssh provider: an agent token for host %s: %w", h.Name, err)
		}
		token, tokenEnv = t, "GPUFLEET_TOKEN"
		if url == "" {
			url = u
		}
	}
	if url == "" || token == "" {
		return h.fail(errors.New("no server URL or join token to start the agent with (no bootstrap, no server_url)"))
	}
	c, err := dial(ctx, h, p.cfg.ConnectTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := script(ctx, c, inspectScript(h.RemoteDir))
	if err != nil {
		return h.fail(err)
	}
	if r.Code != 0 {
		return h.fail(fmt.Errorf("cannot make remote_dir %s: exit %d: %s", h.RemoteDir, r.Code, r.Stderr))
	}
	info := parseKV(r.Stdout)
	dir := info["dir"]
	if dir == "" {
		return h.fail(fmt.Errorf("the inspect script printed no dir: %q", r.Stdout))
	}
	if h.FakeGPUs == 0 {
		if info["smi"] == "" {
			return h.fail(fmt.Errorf("%w: nvidia-smi not found (no NVIDIA driver? fake_gpus: N makes a test host)", ErrNoGPU))
		}
		gpus, err := readGPUs(ctx, c, h)
		if err != nil {
			return err
		}
		if o := p.offer(m.OfferID); o != nil {
			if err := CheckOffer(gpus, o); err != nil {
				return h.fail(err)
			}
		}
	}
	if err := p.ensureBinary(ctx, c, h, dir, info, b.BinaryURL); err != nil {
		return err
	}
	sup := h.Supervisor
	if sup == SupervisorAuto {
		sup = SupervisorSetsid
		if info["systemd"] != "" {
			sup = SupervisorSystemd
		}
	}
	lease := b.LeaseID
	if lease == "" {
		lease = m.ClientToken
	}
	args := []string{"agent", "--server", url, "--lease", lease, "--offer", m.OfferID, "--agent-id", slug(h.Name + "-" + m.ClientToken)}
	if h.FakeGPUs > 0 {
		args = append(args, "--gpu-source", "fake", "--fake-gpus", strconv.Itoa(h.FakeGPUs))
	}
	args = append(args, h.AgentArgs...)
	p.mu.Lock()
	m.Dir, m.Started = dir, true
	err = p.saveLocked()
	p.mu.Unlock()
	if err != nil {
		return err
	}
	r, err = script(ctx, c, startScript(agentStart{Dir: dir, ID: slug(m.ClientToken), Supervisor: sup, TokenEnv: tokenEnv, Token: token, Args: args, StopGrace: p.cfg.StopGrace}))
	if err != nil {
		return h.fail(err)
	}
	if r.Code != 0 {
		return h.fail(fmt.Errorf("starting the agent (%s): exit %d: %s", sup, r.Code, r.Stderr))
	}
	return nil
}

// ensureBinary copies this gpufleet binary to the host unless the host
// has the same one; a host of another architecture downloads it from the
// bootstrap's BinaryURL instead, if there is one.
func (p *Provider) ensureBinary(ctx context.Context, c *gossh.Client, h *Host, dir string, info map[string]string, binaryURL string) error {
	local, sum, err := p.localBinary()
	if err != nil {
		return h.fail(err)
	}
	if info["sha"] == sum {
		return nil
	}
	if want := goArch[runtime.GOARCH]; info["arch"] != "" && want != "" && info["arch"] != want {
		if binaryURL == "" || (info["curl"] == "" && info["wget"] == "") {
			return h.fail(fmt.Errorf("the host is %s and has no gpufleet binary in %s/bin; this one is %s (install one there, or serve one for its architecture)", info["arch"], dir, runtime.GOARCH))
		}
		r, err := script(ctx, c, downloadScript(dir, binaryURL, info["curl"] != ""))
		if err != nil {
			return h.fail(err)
		}
		if r.Code != 0 {
			return h.fail(fmt.Errorf("downloading the binary from %s: exit %d: %s", binaryURL, r.Code, r.Stderr))
		}
	} else {
		f, err := os.Open(local)
		if err != nil {
			return h.fail(err)
		}
		defer f.Close()
		r, err := run(ctx, c, copyCommand(dir), f)
		if err != nil {
			return h.fail(fmt.Errorf("copying the binary: %w", err))
		}
		if r.Code != 0 {
			return h.fail(fmt.Errorf("copying the binary to %s/bin: exit %d: %s", dir, r.Code, r.Stderr))
		}
	}
	r, err := run(ctx, c, q(dir+"/bin/gpufleet")+" version", nil)
	if err != nil {
		return h.fail(err)
	}
	if r.Code != 0 {
		return h.fail(fmt.Errorf("the gpufleet binary does not run on the host (%s): exit %d: %s", info["arch"], r.Code, r.Stderr))
	}
	p.cfg.Log.Info("ssh provider: binary installed", "host", h.Name, "path", dir+"/bin/gpufleet", "version", strings.TrimSpace(r.Stdout))
	return nil
}

// localBinary returns the binary to copy and its SHA-256, read once.
func (p *Provider) localBinary() (string, string, error) {
	path := p.cfg.Binary
	p.shaOnce.Do(func() {
		if path == "" {
			path, p.shaErr = os.Executable()
			if p.shaErr != nil {
				return
			}
		}
		f, err := os.Open(path)
		if err != nil {
			p.shaErr = fmt.Errorf("ssh provider: the gpufleet binary to copy: %w", err)
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			p.shaErr = err
			return
		}
		p.cfg.Binary, p.sha = path, hex.EncodeToString(h.Sum(nil))
	})
	return p.cfg.Binary, p.sha, p.shaErr
}

// Release implements provider.Provider: it stops the machine's agent
// (SIGTERM to its process group, StopGrace, then SIGKILL) and frees the
// host. A host that cannot be reached keeps the machine stopping: the
// host stays held and Poll retries the stop. Releasing a released or
// unknown machine is not an error.
func (p *Provider) Release(ctx context.Context, providerID string) error {
	p.mu.Lock()
	m := p.machines[providerID]
	if m == nil || (m.State == provider.Released && !m.Stopping) {
		p.mu.Unlock()
		return nil
	}
	m.Stopping = true
	booted := m.booted
	if m.booting {
		m.stop()
	}
	err := p.saveLocked()
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if booted != nil {
		<-booted
	}
	return p.stopAgent(ctx, m)
}

// stopAgent stops m's agent on its host, if one may run, and marks m
// released.
func (p *Provider) stopAgent(ctx context.Context, m *machine) error {
	p.mu.Lock()
	h, started, dir := p.hosts[m.Host], m.Started, m.Dir
	p.mu.Unlock()
	if started && h != nil {
		if err := p.stopOn(ctx, h, dir, slug(m.ClientToken)); err != nil {
			p.cfg.Log.Warn("ssh provider: stopping the agent failed; retrying at the next poll", "host", h.Name, "provider_id", m.ProviderID, "err", err)
			return err
		}
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	m.Stopping, m.State, m.shown = false, provider.Released, provider.Released
	if m.EndedAt.IsZero() {
		m.EndedAt = now
	}
	p.cfg.Log.Info("ssh provider: released", "host", m.Host, "provider_id", m.ProviderID, "lease", m.ClientToken)
	return p.saveLocked()
}

func (p *Provider) stopOn(ctx context.Context, h *Host, dir, id string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout+p.cfg.StopGrace+10*time.Second)
	defer cancel()
	c, err := dial(ctx, h, p.cfg.ConnectTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := script(ctx, c, stopScript(dir, id, p.cfg.StopGrace))
	if err != nil {
		return h.fail(err)
	}
	if r.Code != 0 {
		return h.fail(fmt.Errorf("stopping the agent: exit %d: %s", r.Code, r.Stderr))
	}
	return nil
}

// List implements provider.Provider: every machine but the released
// ones, failed ones included until they are released. What it shows
// counts as seen by Poll.
func (p *Provider) List(context.Context) ([]provider.Machine, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []provider.Machine
	for _, m := range p.machines {
		if m.State == provider.Released || m.Stopping {
			continue
		}
		m.shown = m.State
		out = append(out, m.public())
	}
	sortMachines(out)
	return out, nil
}

// Poll implements provider.Provider. At most every PollInterval it checks
// each machine's agent on its host: a provisioning machine whose agent
// runs is ready (after a restart that cut its start short), one whose
// agent is gone or whose host stays unreachable for UnreachableAfter is
// failed; and it retries the stops a release could not finish. Every
// change since a machine was last shown is reported once.
func (p *Provider) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	p.mu.Lock()
	due := p.lastPoll.IsZero() || now.Sub(p.lastPoll) >= p.cfg.PollInterval
	if due {
		p.lastPoll = now
	}
	var check []*machine
	if due {
		for _, m := range p.machines {
			if !m.booting && (m.Stopping || m.State == provider.Ready || m.State == provider.Provisioning) {
				check = append(check, m)
			}
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range check {
		wg.Go(func() { p.check(ctx, m, now) })
	}
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	var evs []provider.Event
	for _, m := range p.machines {
		if m.State == m.shown || m.Stopping || m.State == provider.Released || m.State == provider.Provisioning {
			continue
		}
		m.shown = m.State
		at := now
		switch {
		case m.State == provider.Ready && !m.ReadyAt.IsZero() && !m.ReadyAt.After(now):
			at = m.ReadyAt
		case m.State == provider.Failed && !m.EndedAt.IsZero() && !m.EndedAt.After(now):
			at = m.EndedAt
		}
		evs = append(evs, provider.Event{At: at, Machine: m.public()})
	}
	sortEvents(evs)
	if len(check) > 0 {
		if err := p.saveLocked(); err != nil {
			return evs, err
		}
	}
	return evs, nil
}

// check looks at one machine's agent on its host (or retries its stop).
func (p *Provider) check(ctx context.Context, m *machine, now time.Time) {
	p.mu.Lock()
	h, dir, stopping, state, started := p.hosts[m.Host], m.Dir, m.Stopping, m.State, m.Started
	p.mu.Unlock()
	if h == nil {
		return
	}
	if stopping {
		_ = p.stopAgent(ctx, m)
		return
	}
	fail := func(reason string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if m.Stopping || m.State == provider.Released {
			return
		}
		m.State, m.Reason, m.EndedAt = provider.Failed, reason, now
		p.cfg.Log.Warn("ssh provider: machine failed", "host", h.Name, "provider_id", m.ProviderID, "lease", m.ClientToken, "reason", reason)
	}
	if !started {
		// A start a restart cut short before the agent was launched.
		fail(h.fail(errors.New("the server restarted before the agent was started")).Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*p.cfg.ConnectTimeout)
	defer cancel()
	status, detail, err := p.status(ctx, h, dir, slug(m.ClientToken))
	if err != nil {
		p.mu.Lock()
		since := m.UnreachableSince
		if since.IsZero() {
			m.UnreachableSince, since = now, now
		}
		p.mu.Unlock()
		if now.Sub(since) >= p.cfg.UnreachableAfter {
			fail(fmt.Sprintf("%v (unreachable since %s)", err, since.UTC().Format(time.RFC3339)))
		}
		return
	}
	p.mu.Lock()
	m.UnreachableSince = time.Time{}
	if status == "running" && state == provider.Provisioning && m.State == provider.Provisioning {
		m.State, m.ReadyAt = provider.Ready, now
	}
	p.mu.Unlock()
	switch status {
	case "running":
	case "stopped":
		fail(h.fail(fmt.Errorf("the agent exited; its log ends: %s", tailString(detail, 600))).Error())
	default:
		fail(h.fail(errors.New("no agent of this lease on the host")).Error())
	}
}

func (p *Provider) status(ctx context.Context, h *Host, dir, id string) (status, detail string, err error) {
	c, err := dial(ctx, h, p.cfg.ConnectTimeout)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	r, err := script(ctx, c, checkScript(dir, id))
	if err != nil {
		return "", "", h.fail(err)
	}
	status, detail, _ = strings.Cut(r.Stdout, "\n")
	return strings.TrimSpace(status), detail, nil
}
