package ec2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Defaults for a Config's zero fields.
const (
	DefaultPollInterval = 15 * time.Second
	DefaultBinaryPath   = "/usr/local/bin/gpufleet"
	DefaultTimeout      = 60 * time.Second
)

// Config says where and how the provider launches instances.
type Config struct {
	// Region is the AWS region; offers of other regions are refused.
	Region string
	// Cluster names this gpufleet installation: every instance carries
	// it in the gpufleet:cluster tag, and List sees only its instances.
	Cluster string
	// AMI is the image per catalog offer id; DefaultAMI for the others.
	AMI        map[string]string
	DefaultAMI string
	// SubnetID, SecurityGroupIDs and KeyName place the instance; empty
	// leaves them to the account's defaults.
	SubnetID         string
	SecurityGroupIDs []string
	KeyName          string
	// InstanceProfile is the IAM instance profile's name or ARN; empty
	// launches without one.
	InstanceProfile string
	// Endpoint overrides the EC2 endpoint (a local fake in tests).
	Endpoint string
	// PollInterval is how often Poll describes the instances (15 s).
	PollInterval time.Duration
	// Timeout bounds each API call, retries included (60 s).
	Timeout time.Duration
	// BinaryPath is where the machine's gpufleet binary is installed,
	// or downloaded to when the bootstrap names a BinaryURL.
	BinaryPath string
	// AgentArgs are added to the agent's command line (e.g.
	// --gpu-source nvml).
	AgentArgs []string
	// ServerURL and AgentToken are the bootstrap for a request that
	// brings none (AcquireRequest.Bootstrap zero): the server's URL as
	// the machines reach it and an agent token they join with.
	ServerURL  string
	AgentToken string
	// Fallback, when set, gives ServerURL and AgentToken where the file
	// has none: called once, at the first acquire that needs them (serve
	// mints an agent token there).
	Fallback func() (serverURL, agentToken string, err error)
	// Offer looks up a catalog offer; required.
	Offer func(id string) (*core.Offer, bool)
}

// File is the provider's YAML configuration file (docs/providers.md).
type File struct {
	Region          string            `yaml:"region"`
	Cluster         string            `yaml:"cluster"`
	AMI             map[string]string `yaml:"ami"`
	DefaultAMI      string            `yaml:"default_ami"`
	Subnet          string            `yaml:"subnet"`
	SecurityGroups  []string          `yaml:"security_groups"`
	KeyName         string            `yaml:"key_name"`
	InstanceProfile string            `yaml:"instance_profile"`
	Endpoint        string            `yaml:"endpoint"`
	PollInterval    string            `yaml:"poll_interval"`
	Timeout         string            `yaml:"timeout"`
	BinaryPath      string            `yaml:"binary_path"`
	AgentArgs       []string          `yaml:"agent_args"`
	ServerURL       string            `yaml:"server_url"`
	AgentToken      string            `yaml:"agent_token"`
}

// LoadConfig reads the YAML file at path strictly: an unknown key or a
// bad value is an error naming it.
func LoadConfig(path string) (Config, error) {
	if path == "" {
		return Config{}, &core.FieldError{Field: "--provider-config", Value: "", Allowed: "the ec2 provider's YAML file (docs/providers.md)"}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("ec2 provider config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("ec2 provider config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a configuration file's bytes.
func ParseConfig(data []byte) (Config, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, err
	}
	cfg := Config{Region: f.Region, Cluster: f.Cluster, AMI: f.AMI, DefaultAMI: f.DefaultAMI, SubnetID: f.Subnet,
		SecurityGroupIDs: f.SecurityGroups, KeyName: f.KeyName, InstanceProfile: f.InstanceProfile, Endpoint: f.Endpoint,
		BinaryPath: f.BinaryPath, AgentArgs: f.AgentArgs, ServerURL: f.ServerURL, AgentToken: f.AgentToken}
	for _, d := range []struct {
		name string
		v    string
		dst  *time.Duration
	}{{"poll_interval", f.PollInterval, &cfg.PollInterval}, {"timeout", f.Timeout, &cfg.Timeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return Config{}, &core.FieldError{Field: d.name, Value: d.v, Allowed: "a positive duration such as 15s or 1m"}
		}
		*d.dst = v
	}
	return cfg, cfg.validate()
}

var (
	regionRe  = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	clusterRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	amiRe     = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	// safeArg is what the user data script may carry unquoted-safe: it
	// is single-quoted anyway, but a quote would end the quoting.
	safeArg = regexp.MustCompile(`^[^'\x00\n\r]*$`)
)

func (c *Config) validate() error {
	switch {
	case !regionRe.MatchString(c.Region):
		return &core.FieldError{Field: "region", Value: c.Region, Allowed: "an AWS region such as us-east-1"}
	case !clusterRe.MatchString(c.Cluster):
		return &core.FieldError{Field: "cluster", Value: c.Cluster, Allowed: "a name of letters, digits, '.', '_' and '-' (up to 63) that tags this installation's instances"}
	case c.DefaultAMI != "" && !amiRe.MatchString(c.DefaultAMI):
		return &core.FieldError{Field: "default_ami", Value: c.DefaultAMI, Allowed: "an AMI id such as ami-0123456789abcdef0"}
	case c.DefaultAMI == "" && len(c.AMI) == 0:
		return &core.FieldError{Field: "ami", Value: "", Allowed: "an AMI per offer (ami:) or a default_ami"}
	}
	for offer, ami := range c.AMI {
		if !amiRe.MatchString(ami) {
			return &core.FieldError{Field: "ami." + offer, Value: ami, Allowed: "an AMI id such as ami-0123456789abcdef0"}
		}
	}
	for _, a := range append([]string{c.BinaryPath, c.ServerURL, c.AgentToken}, c.AgentArgs...) {
		if !safeArg.MatchString(a) {
			return &core.FieldError{Field: "agent_args", Value: a, Allowed: "no single quote or newline (it goes into a shell script)"}
		}
	}
	return nil
}
