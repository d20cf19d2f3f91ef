package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnits: the units in deploy/systemd start a subcommand with
// flags that exist (a renamed flag would stop the service at boot), and
// keep their hardening: a dedicated user, no new privileges, a read-only
// system but for the unit's own state directory.
func TestSystemdUnits(t *testing.T) {
	for _, tc := range []struct{ unit, sub, user, state string }{
		{"gpufleet-serve.service", "serve", "gpufleet", "gpufleet"},
		{"gpufleet-agent.service", "agent", "gpufleet-agent", "gpufleet-agent"},
	} {
		t.Run(tc.unit, func(t *testing.T) {
			dirs := unitDirectives(t, filepath.Join("..", "..", "deploy", "systemd", tc.unit))
			for key, want := range map[string]string{"User": tc.user, "StateDirectory": tc.state,
				"NoNewPrivileges": "yes", "ProtectSystem": "strict", "CapabilityBoundingSet": ""} {
				if got, ok := dirs[key]; !ok || got[len(got)-1] != want {
					t.Errorf("%s=%q, want %q", key, got, want)
				}
			}
			exec := strings.Fields(dirs["ExecStart"][0])
			if len(exec) < 2 || exec[1] != tc.sub {
				t.Fatalf("ExecStart %q does not run gpufleet %s", exec, tc.sub)
			}
			cmd, _, err := newRoot(io.Discard, io.Discard).Find([]string{tc.sub})
			if err != nil {
				t.Fatal(err)
			}
			for _, arg := range exec[2:] {
				if strings.HasPrefix(arg, "$") {
					continue // the operator's arguments, from the environment file
				}
				name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				if !strings.HasPrefix(arg, "--") || cmd.Flags().Lookup(name) == nil {
					t.Errorf("ExecStart argument %q is not a flag of gpufleet %s", arg, tc.sub)
				}
			}
		})
	}
}

// unitDirectives reads a unit file's Key=Value lines, each key's values
// in order.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=Value", path, line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// TestCompletion: docs/install.md tells operators to install the shell
// completion that cobra's completion command writes.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out bytes.Buffer
		if code := run(t.Context(), []string{"completion", shell}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "gpufleet") {
			t.Errorf("gpufleet completion %s: exit %d, %d bytes", shell, code, out.Len())
		}
	}
}
