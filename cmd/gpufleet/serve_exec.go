package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/exec"
)

// execConfigFile is the exec provider's configuration file
// (docs/exec-provider.md). Script paths are relative to the file.
type execConfigFile struct {
	Script         string            `yaml:"script"`
	Scripts        map[string]string `yaml:"scripts"`
	Env            map[string]string `yaml:"env"`
	Timeout        string            `yaml:"timeout"`
	PollInterval   string            `yaml:"poll_interval"`
	MaxOutputBytes int               `yaml:"max_output_bytes"`
}

// newExecProvider returns the provider that runs the user's scripts named
// in the file at path.
//
// Each acquire's input carries its machine's bootstrap (server_url,
// lease_id, join_token: the lease's one-time join token, minted by the
// loop). The scripts' environment also has GPUFLEET_URL, this server
// (serverURL), unless the config's env: sets it; a config may still give
// a shared GPUFLEET_AGENT_TOKEN of its own in env:, which serve no longer
// mints.
func newExecProvider(ctx context.Context, path string, c *pricing.Catalog, clk clock.Clock, log *slog.Logger, serverURL string) (provider.Provider, error) {
	cfg, err := loadExecConfig(path)
	if err != nil {
		return nil, err
	}
	if serverURL != "" {
		if cfg.Env == nil {
			cfg.Env = map[string]string{}
		}
		if _, ok := cfg.Env["GPUFLEET_URL"]; !ok {
			cfg.Env["GPUFLEET_URL"] = serverURL
		}
	}
	cfg.Offer = func(id string) (*core.Offer, bool) {
		o, err := c.Offer(id)
		return o, err == nil
	}
	p, err := exec.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("exec provider %s: %w", path, err)
	}
	log.Info("exec provider", "config", path, "script", cfg.Script, "timeout", cfg.Timeout, "poll_interval", cfg.PollInterval)
	return p, nil
}

// loadExecConfig reads the exec provider's YAML strictly: an unknown key
// or a bad duration is an error naming it.
func loadExecConfig(path string) (exec.Config, error) {
	if path == "" {
		return exec.Config{}, &core.FieldError{Field: "--provider-config", Value: "", Allowed: "the exec provider's YAML file (docs/exec-provider.md)"}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return exec.Config{}, fmt.Errorf("exec provider config: %w", err)
	}
	var f execConfigFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return exec.Config{}, fmt.Errorf("exec provider config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cfg := exec.Config{Script: abs(f.Script), Env: f.Env, MaxOutput: f.MaxOutputBytes}
	if len(f.Scripts) > 0 {
		cfg.Scripts = map[string]string{}
		for op, s := range f.Scripts {
			cfg.Scripts[op] = abs(s)
		}
	}
	for _, d := range []struct {
		name string
		v    string
		dst  *time.Duration
	}{{"timeout", f.Timeout, &cfg.Timeout}, {"poll_interval", f.PollInterval, &cfg.PollInterval}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return exec.Config{}, fmt.Errorf("exec provider config %s: %w", path, &core.FieldError{Field: d.name, Value: d.v, Allowed: "a positive duration such as 30s or 2m"})
		}
		*d.dst = v
	}
	return cfg, nil
}
