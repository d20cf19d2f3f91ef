package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// TestPolicyNotifier: no webhook without idle.notify; with it, the
// secret must be in the environment variable the policy names.
func TestPolicyNotifier(t *testing.T) {
	p := policy.Default()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if n, err := policyNotifier(p, getenv, nil, clock.Real{}, slog.New(slog.DiscardHandler)); n != nil || err != nil {
		t.Fatalf("no idle.notify: %v, %v; want none", n, err)
	}
	p.Idle.Notify = policy.Notify{URL: "https://hooks.example.com/x", SecretEnv: "HOOK_SECRET"}
	if _, err := policyNotifier(p, getenv, nil, clock.Real{}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "idle.notify.secret_env") {
		t.Fatalf("secret unset: %v; want an error naming idle.notify.secret_env", err)
	}
}

// TestServeRefusesWebhookWithoutSecret: serve --policy with idle.notify
// and its secret's variable unset stops at start with a usage error
// naming the key, before it mints the admin token.
func TestServeRefusesWebhookWithoutSecret(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("GPUFLEET_TEST_HOOK_SECRET", "")
	pol := writeFile(t, "hook.yaml", "name: hook\nidle:\n  notify:\n    url: https://hooks.example.com/gpufleet\n    secret_env: GPUFLEET_TEST_HOOK_SECRET\n")
	code, _, errs := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--policy", pol)
	if code != 2 || !strings.Contains(errs, "idle.notify.secret_env") || !strings.Contains(errs, "GPUFLEET_TEST_HOOK_SECRET") {
		t.Errorf("exit %d, %q", code, errs)
	}
	if strings.Contains(errs, "admin token") {
		t.Errorf("a refused start minted the admin token: %q", errs)
	}
}
