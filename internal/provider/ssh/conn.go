package ssh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The kinds of host failure, wrapped in a HostError.
var (
	// ErrUnreachable: the host did not answer (down, wrong address,
	// filtered port, timeout).
	ErrUnreachable = errors.New("ssh provider: host unreachable")
	// ErrHostKey: the host's key is not the one known_hosts holds for it,
	// or known_hosts holds none.
	ErrHostKey = errors.New("ssh provider: host key refused")
	// ErrAuth: the host refused the login.
	ErrAuth = errors.New("ssh provider: authentication refused")
)

// HostError is a failure on one host: which host, at which address, and
// why.
type HostError struct {
	Host    string
	Address string
	Err     error
}

func (e *HostError) Error() string {
	return fmt.Sprintf("ssh provider: host %s (%s): %v", e.Host, e.Address, strings.TrimPrefix(e.Err.Error(), "ssh provider: "))
}

func (e *HostError) Unwrap() error { return e.Err }

func (h *Host) fail(err error) error {
	var he *HostError
	if errors.As(err, &he) {
		return err
	}
	return &HostError{Host: h.Name, Address: h.Address, Err: err}
}

// probeKey stands in for the host's key when asking known_hosts which
// keys it holds for a host; it never matches one.
var probeKey = func() gossh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(nil)
	k, _ := gossh.NewPublicKey(pub)
	return k
}()

// dial opens an SSH connection to h, checking its key against its
// known_hosts file and logging in with its identity file or the
// ssh-agent's keys.
func dial(ctx context.Context, h *Host, timeout time.Duration) (*gossh.Client, error) {
	check, err := knownhosts.New(h.KnownHosts)
	if err != nil {
		return nil, h.fail(fmt.Errorf("%w: known_hosts: %w", ErrHostKey, err))
	}
	auth, closeAuth, err := authMethod(h)
	if err != nil {
		return nil, h.fail(err)
	}
	defer closeAuth()
	var offered gossh.PublicKey
	cfg := &gossh.ClientConfig{
		User: h.User,
		Auth: []gossh.AuthMethod{auth},
		HostKeyCallback: func(hostname string, remote net.Addr, key gossh.PublicKey) error {
			offered = key
			return check(hostname, remote, key)
		},
		HostKeyAlgorithms: knownAlgorithms(check, h.Address),
		Timeout:           timeout,
	}
	d := net.Dialer{Timeout: timeout}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", h.Address)
	if err != nil {
		return nil, h.fail(fmt.Errorf("%w: %w", ErrUnreachable, err))
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c, chans, reqs, err := gossh.NewClientConn(conn, h.Address, cfg)
	if err != nil {
		conn.Close()
		return nil, h.fail(handshakeError(h, err, offered))
	}
	_ = conn.SetDeadline(time.Time{})
	return gossh.NewClient(c, chans, reqs), nil
}

// handshakeError says in words why a handshake failed.
func handshakeError(h *Host, err error, offered gossh.PublicKey) error {
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) {
		fp := "?"
		if offered != nil {
			fp = offered.Type() + " " + gossh.FingerprintSHA256(offered)
		}
		if len(ke.Want) == 0 {
			host, port, _ := net.SplitHostPort(h.Address)
			return fmt.Errorf("%w: %s holds no key for the host, which offered %s (check the fingerprint, then add it: ssh-keyscan -p %s %s >> %s)", ErrHostKey, h.KnownHosts, fp, port, host, h.KnownHosts)
		}
		var want []string
		for _, k := range ke.Want {
			want = append(want, fmt.Sprintf("%s:%d %s %s", k.Filename, k.Line, k.Key.Type(), gossh.FingerprintSHA256(k.Key)))
		}
		return fmt.Errorf("%w: key mismatch: the host offered %s, known_hosts has %s (a reinstalled host or a man in the middle; refusing)", ErrHostKey, fp, strings.Join(want, ", "))
	}
	var re *knownhosts.RevokedError
	if errors.As(err, &re) {
		return fmt.Errorf("%w: the host's key is revoked in %s:%d", ErrHostKey, re.Revoked.Filename, re.Revoked.Line)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unable to authenticate"):
		how := "the key " + h.IdentityFile
		if h.IdentityFile == "" {
			how = "the ssh-agent's keys"
		}
		return fmt.Errorf("%w for user %s with %s: %w", ErrAuth, h.User, how, err)
	case errors.Is(err, io.EOF), strings.Contains(msg, "timeout"), strings.Contains(msg, "connection reset"):
		return fmt.Errorf("%w: the SSH handshake did not finish: %w", ErrUnreachable, err)
	}
	return fmt.Errorf("ssh handshake: %w", err)
}

// knownAlgorithms returns the host key algorithms of the keys known_hosts
// holds for addr, so that the host is asked for a key that can be
// checked (rather than one of another type that reads as a mismatch).
// None known: nil, the library's defaults (the check then fails).
func knownAlgorithms(check gossh.HostKeyCallback, addr string) []string {
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		tcp = &net.TCPAddr{}
	}
	var ke *knownhosts.KeyError
	if err := check(addr, tcp, probeKey); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case gossh.KeyAlgoRSA:
			add(gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

// authMethod is the host's identity file, or the ssh-agent's keys.
func authMethod(h *Host) (gossh.AuthMethod, func(), error) {
	if h.IdentityFile != "" {
		pem, err := os.ReadFile(h.IdentityFile)
		if err != nil {
			return nil, nil, fmt.Errorf("identity_file: %w", err)
		}
		signer, err := gossh.ParsePrivateKey(pem)
		if err != nil {
			var pp *gossh.PassphraseMissingError
			if errors.As(err, &pp) {
				return nil, nil, fmt.Errorf("identity_file %s is encrypted: load it into ssh-agent and leave identity_file empty", h.IdentityFile)
			}
			return nil, nil, fmt.Errorf("identity_file %s: %w", h.IdentityFile, err)
		}
		return gossh.PublicKeys(signer), func() {}, nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, fmt.Errorf("%w: no identity_file and no ssh-agent (SSH_AUTH_SOCK is empty)", ErrAuth)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: ssh-agent at SSH_AUTH_SOCK: %w", ErrAuth, err)
	}
	return gossh.PublicKeysCallback(agent.NewClient(conn).Signers), func() { conn.Close() }, nil
}

// runResult is one remote command's outcome.
type runResult struct {
	Stdout, Stderr string
	Code           int
}

// run runs cmd on the client's host with stdin as its input. Scripts go
// as "sh -s" with the script on stdin, so that nothing of them, a token
// included, shows in the host's process list. A non-zero exit is not an
// error; a lost connection is.
func run(ctx context.Context, c *gossh.Client, cmd string, stdin io.Reader) (runResult, error) {
	s, err := c.NewSession()
	if err != nil {
		return runResult{}, fmt.Errorf("%w: new session: %w", ErrUnreachable, err)
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	s.Stdin = stdin
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case <-ctx.Done():
		_ = s.Signal(gossh.SIGKILL)
		s.Close()
		return runResult{}, ctx.Err()
	case err = <-done:
	}
	r := runResult{Stdout: out.String(), Stderr: tailString(errb.String(), 2048)}
	var ee *gossh.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitStatus()
	case err != nil:
		return r, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return r, nil
}

// script runs a shell script on the host (see run).
func script(ctx context.Context, c *gossh.Client, text string) (runResult, error) {
	return run(ctx, c, "sh -s", strings.NewReader(text))
}

func tailString(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
