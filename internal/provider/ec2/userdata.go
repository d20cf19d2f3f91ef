package ec2

import (
	"fmt"
	"strings"

	"github.com/gpufleet/gpufleet/internal/provider"
)

// Script is what an instance's user data is made of.
type Script struct {
	Bootstrap provider.Bootstrap
	OfferID   string
	// BinaryPath is where the binary is (DefaultBinaryPath if empty).
	BinaryPath string
	// Args are added to the agent's command line.
	Args []string
	// AgentToken: Bootstrap.JoinToken is a long-lived agent token (the
	// config's fallback), not a lease's one-time join token.
	AgentToken bool
}

// UserData returns the shell script an instance runs at first boot
// (cloud-init runs user data that starts with #!): it downloads the
// gpufleet binary from the bootstrap's BinaryURL (or expects it at
// BinaryPath), writes the join token to a root-only environment file
// and starts `gpufleet agent --server … --lease … --offer … --imds auto`
// as the systemd service gpufleet-agent, the deploy/systemd unit's
// hardening included. The token goes to the agent as GPUFLEET_JOIN_TOKEN
// (GPUFLEET_TOKEN for a fallback agent token), not on its command line,
// so it is not in the process list; it is in the user data, which any
// process on the instance can read from IMDS, and that is why a join
// token is good for one join of one lease, for a short time.
func UserData(sc Script) (string, error) {
	b, offerID, binPath, args := sc.Bootstrap, sc.OfferID, sc.BinaryPath, sc.Args
	env := "GPUFLEET_JOIN_TOKEN"
	if sc.AgentToken {
		env = "GPUFLEET_TOKEN"
	}
	if binPath == "" {
		binPath = DefaultBinaryPath
	}
	for _, v := range append([]string{b.ServerURL, b.LeaseID, b.JoinToken, b.BinaryURL, offerID, binPath}, args...) {
		if !safeArg.MatchString(v) {
			return "", fmt.Errorf("ec2: user data: %q has a quote or a newline", v)
		}
	}
	if b.ServerURL == "" || b.JoinToken == "" || b.LeaseID == "" {
		return "", fmt.Errorf("ec2: user data: the bootstrap needs a server URL, a lease id and a join token (serve --provider ec2 gives them)")
	}
	q := func(s string) string { return "'" + s + "'" }
	agent := []string{binPath, "agent", "--server=" + b.ServerURL, "--lease=" + b.LeaseID, "--agent-id=" + b.LeaseID,
		"--offer=" + offerID, "--imds=auto", "--data-dir=/var/lib/gpufleet-agent"}
	agent = append(agent, args...)
	var s strings.Builder
	fmt.Fprintf(&s, `#!/bin/bash
# gpufleet: the agent of lease %[1]s (offer %[2]s), started by cloud-init.
set -euo pipefail
BIN=%[3]s
BINARY_URL=%[4]s
if [ -n "$BINARY_URL" ]; then
  tmp="$(mktemp)"
  curl -fsSL --retry 30 --retry-connrefused --retry-delay 2 -H "Authorization: Bearer $(cat <<'TOKEN'
%[5]s
TOKEN
)" -o "$tmp" "$BINARY_URL"
  install -m 0755 "$tmp" "$BIN"
  rm -f "$tmp"
fi
if [ ! -x "$BIN" ]; then
  echo "gpufleet: no binary at $BIN and no binary URL to fetch it from" >&2
  exit 1
fi
id -u gpufleet-agent >/dev/null 2>&1 || useradd --system --home-dir /var/lib/gpufleet-agent --shell /usr/sbin/nologin --groups video gpufleet-agent || useradd --system --home-dir /var/lib/gpufleet-agent --shell /usr/sbin/nologin gpufleet-agent
install -d -m 0755 /etc/gpufleet
umask 077
cat > /etc/gpufleet/agent.env <<'ENV'
%[7]s=%[5]s
ENV
umask 022
cat > /etc/systemd/system/gpufleet-agent.service <<'UNIT'
[Unit]
Description=gpufleet node agent of lease %[1]s
Wants=network-online.target
After=network-online.target nvidia-persistenced.service

[Service]
Type=exec
User=gpufleet-agent
Group=gpufleet-agent
SupplementaryGroups=video
EnvironmentFile=/etc/gpufleet/agent.env
StateDirectory=gpufleet-agent
StateDirectoryMode=0700
WorkingDirectory=/var/lib/gpufleet-agent
ExecStart=%[6]s
Restart=always
RestartSec=5s
KillMode=mixed
TimeoutStopSec=60s
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
LockPersonality=yes
CapabilityBoundingSet=
UMask=0027

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now gpufleet-agent.service
`, b.LeaseID, offerID, q(binPath), q(b.BinaryURL), b.JoinToken, strings.Join(agent, " "), env)
	return s.String(), nil
}
