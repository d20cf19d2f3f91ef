package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Defaults for a Config's zero fields.
const (
	DefaultPollInterval     = 10 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultStopGrace        = 10 * time.Second
	DefaultUnreachableAfter = time.Minute
	DefaultRetryAfter       = time.Minute
	DefaultRemoteDir        = ".gpufleet"
	DefaultStateFile        = "gpufleet-ssh.state.json"
)

// Supervisors a host may run its agent under.
const (
	SupervisorAuto    = "auto"
	SupervisorSystemd = "systemd"
	SupervisorSetsid  = "setsid"
)

// Host is one machine of the fleet: one lease at a time.
type Host struct {
	// Name names the host in errors, logs and provider IDs; its address
	// if empty.
	Name string
	// Address is host[:port]; port 22 if none.
	Address string
	User    string
	// IdentityFile is the private key to log in with; empty: the keys of
	// the ssh-agent at SSH_AUTH_SOCK.
	IdentityFile string
	// KnownHosts is the known_hosts file the host's key is checked
	// against; it is required: a host key is never taken on trust.
	KnownHosts string
	// Offer is the catalog offer the host is; empty: the offer its GPUs
	// (nvidia-smi) match.
	Offer string
	// FakeGPUs, above 0, makes the agent report that many fake GPUs
	// (--gpu-source fake) instead of reading nvidia-smi: tests and demos.
	FakeGPUs int
	// RemoteDir holds the binary, the agents' data, logs and pid files on
	// the host; relative to the login's home directory unless absolute.
	RemoteDir string
	// Supervisor runs the agent: systemd (systemd-run --user), setsid
	// (nohup, a pid file) or auto (systemd when the user has a systemd
	// manager, else setsid).
	Supervisor string
	// AgentArgs are added to the agent's command line.
	AgentArgs []string
}

// Config is the SSH provider's fleet and how it treats it.
type Config struct {
	Hosts []Host
	// StateFile keeps which lease holds which host across restarts.
	StateFile string
	// PollInterval is how often Poll checks the agents on their hosts.
	PollInterval time.Duration
	// ConnectTimeout bounds each SSH dial and handshake.
	ConnectTimeout time.Duration
	// StopGrace is how long a released agent has after SIGTERM before
	// its process group is killed.
	StopGrace time.Duration
	// UnreachableAfter is how long a ready machine's host may be
	// unreachable before the machine is failed.
	UnreachableAfter time.Duration
	// RetryAfter is how long a host whose machine failed to start is
	// passed over by Acquire.
	RetryAfter time.Duration
	// ServerURL is the URL the hosts reach the server at, when the
	// bootstrap has none or one the hosts cannot reach (a loopback
	// listen address).
	ServerURL string
	// Binary is the gpufleet binary copied to a host that lacks it;
	// this process's executable if empty.
	Binary string
	// Offers is the catalog: hosts without an offer are matched to it,
	// and a host's GPUs are checked against its offer.
	Offers []core.Offer
	// Join gives the server URL and an agent token when an acquire
	// carries no bootstrap (a server that mints no join tokens).
	Join  func() (url, token string, err error)
	Clock clock.Clock
	Log   *slog.Logger
}

// fileConfig is the YAML file (docs/providers.md). The top-level host
// fields are the defaults of every host.
type fileConfig struct {
	StateFile        string     `yaml:"state_file"`
	PollInterval     string     `yaml:"poll_interval"`
	ConnectTimeout   string     `yaml:"connect_timeout"`
	StopGrace        string     `yaml:"stop_grace"`
	UnreachableAfter string     `yaml:"unreachable_after"`
	RetryAfter       string     `yaml:"retry_after"`
	ServerURL        string     `yaml:"server_url"`
	Binary           string     `yaml:"binary"`
	User             string     `yaml:"user"`
	IdentityFile     string     `yaml:"identity_file"`
	KnownHosts       string     `yaml:"known_hosts"`
	RemoteDir        string     `yaml:"remote_dir"`
	Supervisor       string     `yaml:"supervisor"`
	AgentArgs        []string   `yaml:"agent_args"`
	Hosts            []fileHost `yaml:"hosts"`
}

type fileHost struct {
	Name         string   `yaml:"name"`
	Address      string   `yaml:"address"`
	User         string   `yaml:"user"`
	IdentityFile string   `yaml:"identity_file"`
	KnownHosts   string   `yaml:"known_hosts"`
	Offer        string   `yaml:"offer"`
	FakeGPUs     int      `yaml:"fake_gpus"`
	RemoteDir    string   `yaml:"remote_dir"`
	Supervisor   string   `yaml:"supervisor"`
	AgentArgs    []string `yaml:"agent_args"`
}

// LoadConfig reads the provider's YAML file strictly: an unknown key, a
// bad duration or a host without what it needs is an error naming it.
// Relative file paths are relative to the file's directory; "~/" is the
// home directory.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("ssh provider config: %w", err)
	}
	cfg, err := ParseConfig(data, filepath.Dir(path))
	if err != nil {
		return Config{}, fmt.Errorf("ssh provider config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig is LoadConfig on the file's bytes, with dir for relative
// paths.
func ParseConfig(data []byte, dir string) (Config, error) {
	var f fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, err
	}
	local := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				return filepath.Join(home, rest)
			}
		}
		return filepath.Join(dir, p)
	}
	cfg := Config{ServerURL: f.ServerURL, Binary: local(f.Binary), StateFile: f.StateFile}
	if cfg.StateFile != "" {
		cfg.StateFile = local(cfg.StateFile)
	}
	for _, d := range []struct {
		name string
		v    string
		dst  *time.Duration
	}{{"poll_interval", f.PollInterval, &cfg.PollInterval}, {"connect_timeout", f.ConnectTimeout, &cfg.ConnectTimeout},
		{"stop_grace", f.StopGrace, &cfg.StopGrace}, {"unreachable_after", f.UnreachableAfter, &cfg.UnreachableAfter},
		{"retry_after", f.RetryAfter, &cfg.RetryAfter}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return Config{}, &core.FieldError{Field: d.name, Value: d.v, Allowed: "a positive duration such as 30s or 2m"}
		}
		*d.dst = v
	}
	for _, h := range f.Hosts {
		host := Host{Name: h.Name, Address: h.Address, User: or(h.User, f.User), IdentityFile: local(or(h.IdentityFile, f.IdentityFile)),
			KnownHosts: local(or(h.KnownHosts, f.KnownHosts)), Offer: h.Offer, FakeGPUs: h.FakeGPUs,
			RemoteDir: or(h.RemoteDir, f.RemoteDir), Supervisor: or(h.Supervisor, f.Supervisor), AgentArgs: append(append([]string(nil), f.AgentArgs...), h.AgentArgs...)}
		cfg.Hosts = append(cfg.Hosts, host)
	}
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// withDefaults fills the zero fields; validate has passed.
func (c Config) withDefaults() Config {
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.UnreachableAfter == 0 {
		c.UnreachableAfter = DefaultUnreachableAfter
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.StateFile == "" {
		c.StateFile = DefaultStateFile
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Hosts = append([]Host(nil), c.Hosts...)
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if _, _, err := net.SplitHostPort(h.Address); err != nil {
			h.Address = net.JoinHostPort(strings.Trim(h.Address, "[]"), "22")
		}
		if h.Name == "" {
			h.Name = h.Address
		}
		if h.RemoteDir == "" {
			h.RemoteDir = DefaultRemoteDir
		}
		if h.Supervisor == "" {
			h.Supervisor = SupervisorAuto
		}
	}
	return c
}

func (c Config) validate() error {
	if len(c.Hosts) == 0 {
		return &core.FieldError{Field: "hosts", Value: "", Allowed: "at least one host (address, user, known_hosts)"}
	}
	names := map[string]bool{}
	for i, h := range c.Hosts {
		field := func(f string) string { return "hosts[" + strconv.Itoa(i) + "]." + f }
		switch {
		case h.Address == "":
			return &core.FieldError{Field: field("address"), Value: "", Allowed: "host or host:port"}
		case h.User == "":
			return &core.FieldError{Field: field("user"), Value: "", Allowed: "the login on the host (here or at the top level)"}
		case h.KnownHosts == "":
			return &core.FieldError{Field: field("known_hosts"), Value: "", Allowed: "a known_hosts file holding the host's key (host keys are always checked)"}
		case h.FakeGPUs < 0:
			return &core.FieldError{Field: field("fake_gpus"), Value: strconv.Itoa(h.FakeGPUs), Allowed: "a number of fake GPUs >= 0"}
		}
		switch h.Supervisor {
		case "", SupervisorAuto, SupervisorSystemd, SupervisorSetsid:
		default:
			return &core.FieldError{Field: field("supervisor"), Value: h.Supervisor, Allowed: "auto, systemd or setsid"}
		}
		if strings.ContainsAny(h.RemoteDir, "'\"$`\\\n") {
			return &core.FieldError{Field: field("remote_dir"), Value: h.RemoteDir, Allowed: "a path without quotes, $, ` or \\"}
		}
		name := h.Name
		if name == "" {
			name = h.Address
		}
		if names[name] {
			return &core.FieldError{Field: field("name"), Value: name, Allowed: "a name no other host has (name: tells two hosts on one address apart)"}
		}
		names[name] = true
		if strings.ContainsAny(name, "/ \t\n") {
			return &core.FieldError{Field: field("name"), Value: name, Allowed: "a name without slashes or spaces"}
		}
	}
	return nil
}
