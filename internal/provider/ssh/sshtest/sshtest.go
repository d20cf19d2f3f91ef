// Package sshtest runs Debian's OpenSSH server on loopback for tests: a
// throwaway sshd as the current user, with its own host key, config,
// authorized_keys and a known_hosts file for it, all in a temp dir. The
// system's sshd is neither configured nor started.
//
// It is a test helper: only _test.go files import it.
package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHD is where Debian's openssh-server puts the daemon.
const SSHD = "/usr/sbin/sshd"

// Server is one running sshd and the files a client needs for it.
type Server struct {
	// Addr is 127.0.0.1:port.
	Addr string
	Port int
	// User is the login: the user the test runs as.
	User string
	// Key is a private key the server accepts; OtherKey one it does not.
	Key, OtherKey string
	// KnownHosts holds the server's key for Addr; WrongKnownHosts holds
	// another key for Addr; EmptyKnownHosts holds none.
	KnownHosts, WrongKnownHosts, EmptyKnownHosts string
	// Dir is the temp dir everything lives in.
	Dir string

	mu   sync.Mutex
	log  bytes.Buffer
	stop func()
}

// Stop kills sshd now (a host gone down); the test's end does it too.
func (s *Server) Stop() { s.stop() }

// Log returns what sshd wrote so far (its -e log).
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

func (s *Server) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Write(b)
}

// Start runs sshd on a free loopback port until the test ends. It fails
// the test when sshd is not installed (apt-get install openssh-server;
// .ci/run does).
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		t.Fatalf("sshtest: %s is missing: apt-get install -y openssh-server (.ci/run installs it): %v", SSHD, err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{User: u.Username, Dir: dir}
	hostPub := writeKey(t, filepath.Join(dir, "host_ed25519"))
	userPub := writeKey(t, filepath.Join(dir, "id_ed25519"))
	otherHost := writeKey(t, filepath.Join(dir, "other_host_ed25519"))
	writeKey(t, filepath.Join(dir, "other_id_ed25519"))
	s.Key, s.OtherKey = filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "other_id_ed25519")
	write(t, filepath.Join(dir, "authorized_keys"), string(ssh.MarshalAuthorizedKey(userPub)))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	s.Addr = ln.Addr().String()
	ln.Close()
	hostPattern := "[127.0.0.1]:" + strconv.Itoa(s.Port)
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	s.WrongKnownHosts = filepath.Join(dir, "wrong_known_hosts")
	s.EmptyKnownHosts = filepath.Join(dir, "empty_known_hosts")
	write(t, s.KnownHosts, hostPattern+" "+string(ssh.MarshalAuthorizedKey(hostPub)))
	write(t, s.WrongKnownHosts, hostPattern+" "+string(ssh.MarshalAuthorizedKey(otherHost)))
	write(t, s.EmptyKnownHosts, "")

	cfg := filepath.Join(dir, "sshd_config")
	write(t, cfg, fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers %s
LogLevel VERBOSE
`, s.Port, filepath.Join(dir, "host_ed25519"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"), s.User))
	if os.Geteuid() == 0 {
		// sshd started as root wants its privilege separation directory,
		// which the package's service unit makes on boot.
		_ = os.MkdirAll("/run/sshd", 0o755)
	}
	cmd := exec.Command(SSHD, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = s, s
	if err := cmd.Start(); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	t.Cleanup(s.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-done:
			t.Fatalf("sshtest: sshd exited: %s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshtest: sshd not listening on %s after 10 s: %s", s.Addr, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeKey writes a new ed25519 private key in OpenSSH format to path
// and returns its public key.
func writeKey(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
