package ssh

import (
	"fmt"
	"strings"
	"time"
)

// The remote side: shell scripts run with "sh -s" over one SSH session
// each. Everything the provider keeps on a host lives under its
// RemoteDir: bin/gpufleet, and per lease agents/<id>/ (the agent's data
// dir), agents/<id>.log, agents/<id>.pid (setsid) or agents/<id>.unit
// (systemd), and agents/<id>.env (the token, 0600, systemd only).

// q quotes s for sh.
func q(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dirExpr is the host's RemoteDir as a shell word: "~/x" is under
// $HOME, a relative path is too (a session starts in the home dir).
func dirExpr(dir string) string {
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		return `"$HOME"/` + q(rest)
	}
	return q(dir)
}

// slug makes s safe in a file or unit name: letters, digits, '.', '_'
// and '-' stay, anything else becomes '-'.
func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			b[i] = '-'
		}
	}
	if len(b) == 0 || b[0] == '.' || b[0] == '-' {
		return "x" + string(b)
	}
	return string(b)
}

// inspectScript prepares RemoteDir and prints what the provider needs to
// know about the host as key=value lines.
func inspectScript(dir string) string {
	return `dir=` + dirExpr(dir) + `
mkdir -p "$dir/bin" "$dir/agents" && d=$(cd "$dir" && pwd) || exit 3
echo "dir=$d"
echo "arch=$(uname -m)"
if [ -x "$d/bin/gpufleet" ]; then echo "sha=$(sha256sum "$d/bin/gpufleet" | cut -d' ' -f1)"; fi
if command -v systemd-run >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1; then echo systemd=1; fi
if command -v nvidia-smi >/dev/null 2>&1; then echo smi=1; fi
if command -v curl >/dev/null 2>&1; then echo curl=1; fi
if command -v wget >/dev/null 2>&1; then echo wget=1; fi
`
}

// parseKV reads inspectScript's output.
func parseKV(out string) map[string]string {
	kv := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// aliveFn defines alive PGID: the process group has a member and its
// leader is no zombie (an orphan nobody reaps still answers kill -0).
const aliveFn = `alive() { kill -0 "-$1" 2>/dev/null || return 1; s=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null); [ "$s" != Z ]; }
`

// agentStart is what the start script needs.
type agentStart struct {
	Dir, ID, Supervisor string
	// TokenEnv is the variable the agent reads Token from:
	// GPUFLEET_JOIN_TOKEN for a lease's join token, GPUFLEET_TOKEN for
	// an agent token.
	TokenEnv, Token string
	Args            []string
	StopGrace       time.Duration
}

// startScript starts the lease's agent unless it already runs: under
// systemd-run --user (a unit that restarts it on failure, the token in
// an EnvironmentFile) or setsid with a pid file (the token in its
// environment). The token never appears on a command line.
func startScript(a agentStart) string {
	var args []string
	for _, s := range a.Args {
		args = append(args, q(s))
	}
	return aliveFn + `d=` + q(a.Dir) + `; id=` + q(a.ID) + `; bin="$d/bin/gpufleet"; a="$d/agents/$id"
mkdir -p "$a" || exit 3
if [ -f "$a.unit" ] && systemctl --user is-active --quiet "$(cat "$a.unit")" 2>/dev/null; then echo running; exit 0; fi
if [ -f "$a.pid" ] && alive "$(cat "$a.pid")"; then echo running; exit 0; fi
set -- ` + strings.Join(args, " ") + ` --data-dir "$a"
umask 077
if [ ` + q(a.Supervisor) + ` = systemd ]; then
  unit="gpufleet-agent-$id"
  printf '%s=%s\n' ` + q(a.TokenEnv) + ` ` + q(a.Token) + ` >"$a.env"
  systemctl --user reset-failed "$unit" 2>/dev/null
  systemd-run --user --quiet --collect --unit="$unit" -p EnvironmentFile="$a.env" -p Restart=on-failure -p RestartSec=5 \
    -p KillMode=control-group -p TimeoutStopSec=` + fmt.Sprint(int(a.StopGrace.Seconds())+1) + ` "$bin" "$@" || exit 4
  echo "$unit" >"$a.unit"; rm -f "$a.pid"
  echo started systemd
else
  ` + a.TokenEnv + `=` + q(a.Token) + ` setsid "$bin" "$@" </dev/null >>"$a.log" 2>&1 &
  echo $! >"$a.pid"; rm -f "$a.unit" "$a.env"
  echo started setsid
fi
`
}

// checkScript prints running, stopped (and the log's tail) or none for
// the lease's agent.
func checkScript(dir, id string) string {
	return aliveFn + `d=` + q(dir) + `; a="$d/agents/"` + q(id) + `
if [ -f "$a.unit" ]; then
  if systemctl --user is-active --quiet "$(cat "$a.unit")"; then echo running; else echo stopped; journalctl --user -u "$(cat "$a.unit")" -n 20 --no-pager 2>/dev/null | tail -c 1500; fi
elif [ -f "$a.pid" ]; then
  if alive "$(cat "$a.pid")"; then echo running; else echo stopped; tail -c 1500 "$a.log" 2>/dev/null; fi
else echo none; fi
`
}

// stopScript stops the lease's agent: SIGTERM to its process group (or
// systemctl stop), up to grace for it to stop its jobs, then SIGKILL.
// The agent's data dir goes; its log stays.
func stopScript(dir, id string, grace time.Duration) string {
	tenths := int(grace / (100 * time.Millisecond))
	return aliveFn + `d=` + q(dir) + `; a="$d/agents/"` + q(id) + `
if [ -f "$a.unit" ]; then systemctl --user stop "$(cat "$a.unit")" 2>/dev/null; rm -f "$a.unit"; fi
if [ -f "$a.pid" ]; then
  p=$(cat "$a.pid")
  if [ -n "$p" ]; then
    kill -TERM "-$p" 2>/dev/null
    i=0
    while alive "$p" && [ $i -lt ` + fmt.Sprint(tenths) + ` ]; do sleep 0.1; i=$((i+1)); done
    kill -KILL "-$p" 2>/dev/null
  fi
  rm -f "$a.pid"
fi
rm -rf "$a.env" "$a"
echo stopped
`
}

// copyCommand writes stdin to the host's binary, atomically.
func copyCommand(dir string) string {
	return `set -e; d=` + q(dir) + `; t="$d/bin/.gpufleet.$$"; cat >"$t"; chmod 755 "$t"; mv -f "$t" "$d/bin/gpufleet"`
}

// downloadScript fetches the binary from url on the host.
func downloadScript(dir, url string, curl bool) string {
	get := `wget -q -O "$t" ` + q(url)
	if curl {
		get = `curl -fsSL -o "$t" ` + q(url)
	}
	return `set -e; d=` + q(dir) + `; t="$d/bin/.gpufleet.$$"; ` + get + `; chmod 755 "$t"; mv -f "$t" "$d/bin/gpufleet"
`
}

// goArch is uname -m's name for a GOARCH.
var goArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
