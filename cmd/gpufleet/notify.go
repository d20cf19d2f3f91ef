package main

import (
	"fmt"
	"log/slog"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/server"
	"github.com/gpufleet/gpufleet/internal/store"
)

// policyNotifier is the webhook the policy's idle.notify names, its
// secret read from the variable idle.notify.secret_env names (only cmd
// reads the environment); nil when the policy names no webhook. serve
// sets it as server.Config.Notify.
func policyNotifier(pol policy.Policy, getenv func(string) string, st store.Store, clk clock.Clock, log *slog.Logger) (server.Notifier, error) {
	n := pol.Idle.Notify
	if n.URL == "" {
		return nil, nil
	}
	secret := getenv(n.SecretEnv)
	if secret == "" {
		return nil, usageError{&core.FieldError{Field: "idle.notify.secret_env", Value: n.SecretEnv,
			Allowed: "a variable set, in serve's environment, to the webhook's signing secret"}}
	}
	w, err := server.NewWebhook(server.WebhookConfig{URL: n.URL, Secret: []byte(secret), Store: st, Clock: clk, Log: log})
	if err != nil {
		return nil, fmt.Errorf("policy %s: idle.notify: %w", pol.Source, err)
	}
	return w, nil
}
