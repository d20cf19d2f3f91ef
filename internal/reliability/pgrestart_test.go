package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
)

// privatePG is a PostgreSQL server of our own, in a temporary directory on
// a free port, that a test may crash and restart without disturbing the
// shared one on 5432 (which other packages' tests use at the same time).
type privatePG struct {
	t        *testing.T
	bin, dir string
	port     int
}

// asPostgres runs a PostgreSQL tool as the postgres user when we are
// root (initdb and postgres refuse to run as root).
func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (install postgresql)")
	}
	pg := &privatePG{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: filepath.Join(os.TempDir(), fmt.Sprintf("gpufleet-pg-%d", time.Now().UnixNano()))}
	if err := os.MkdirAll(pg.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pg.dir) })
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:postgres", pg.dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pg.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if out, err := asPostgres(filepath.Join(pg.bin, "initdb"), "-D", filepath.Join(pg.dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.start()
	t.Cleanup(func() { pg.stop("fast") })
	return pg
}

func (pg *privatePG) start() {
	pg.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", pg.port, pg.dir)
	cmd := asPostgres(filepath.Join(pg.bin, "pg_ctl"), "-D", filepath.Join(pg.dir, "data"), "-o", opts, "-l", filepath.Join(pg.dir, "log"), "-w", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		pg.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// stop stops the server; mode "immediate" is a crash: no checkpoint,
// every connection cut, recovery from the WAL on the next start.
func (pg *privatePG) stop(mode string) {
	asPostgres(filepath.Join(pg.bin, "pg_ctl"), "-D", filepath.Join(pg.dir, "data"), "-m", mode, "-w", "stop").Run()
}

func (pg *privatePG) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// TestPostgresRestartUnderLoad crashes and restarts the database under a
// stream of job submissions through the API. Clients retry with their
// idempotency keys, as the API tells them to. Afterwards every
// submission the API acknowledged is stored exactly once, the server
// recovered without a restart of its own (readyz is 200 again and new
// submissions succeed), and errors during the outage were 5xx JSON
// answers, never a hang.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := startPrivatePG(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, pg.dsn(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Teams().CreateTeam(ctx, core.Team{ID: "a", Name: "team a", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Users().CreateUser(ctx, store.User{ID: "m", Team: "a", Role: store.RoleMember, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().CreateToken(ctx, store.Token{ID: "tm", Hash: hash, User: "m", Team: "a", Role: store.RoleMember, Created: t0}); err != nil {
		t.Fatal(err)
	}
	srv := api.New(pricing.Demo(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)), api.WithStore(st), api.WithRateLimit(httpapi.RateLimit{}))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client := &http.Client{Timeout: 10 * time.Second}

	// submit sends one job with its key until the API acknowledges it
	// or stop closes; it returns whether it was acknowledged.
	var failures, attempts atomic.Int64
	submit := func(key string, stop <-chan struct{}) bool {
		// The server names the job; the key is what makes it one job.
		body := []byte(`{"team":"a","tier":"regular","gpus":1,"est_duration_seconds":60}`)
		for {
			attempts.Add(1)
			req, _ := http.NewRequest("POST", ts.URL+"/api/v1/jobs", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := client.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
					return true
				}
				if resp.StatusCode < 500 {
					t.Errorf("submit %s: %d %s", key, resp.StatusCode, b)
					return false
				}
				if !json.Valid(b) {
					t.Errorf("submit %s: %d with a non-JSON body %q", key, resp.StatusCode, b)
				}
			}
			failures.Add(1)
			select {
			case <-stop:
				return false
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	const workers = 8
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
		n     atomic.Int64
	)
	stop := make(chan struct{})
	deadline := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-deadline:
					return
				default:
				}
				key := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if submit(key, stop) {
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
					n.Add(1)
				}
			}
		})
	}
	// Let load build, crash the database, keep it down a moment, bring
	// it back, and let load run on.
	waitFor(t, func() bool { return n.Load() >= 200 }, 30*time.Second, "200 submissions before the crash")
	pg.stop("immediate")
	crashedAt := n.Load()
	time.Sleep(1500 * time.Millisecond)
	pg.start()
	waitFor(t, func() bool { return n.Load() >= crashedAt+200 }, 60*time.Second, "200 submissions after the restart")
	close(deadline)
	close(stop)
	wg.Wait()

	resp, err := client.Get(ts.URL + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz after the restart: %v %v", err, resp)
	}
	resp.Body.Close()
	seen, byKey := map[string]int{}, map[string]int{}
	for cursor := ""; ; {
		page, err := st.Jobs().ListJobs(ctx, store.JobFilter{Team: "a", Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Items {
			seen[j.ID]++
			byKey[j.IdempotencyKey]++
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	for id, c := range seen {
		if c > 1 {
			t.Errorf("job %s stored %d times", id, c)
		}
	}
	for _, key := range acked {
		if byKey[key] != 1 {
			t.Errorf("acknowledged submission %s stored %d times", key, byKey[key])
		}
	}
	if failures.Load() == 0 {
		t.Errorf("no request failed while the database was down: the crash did not happen")
	}
	t.Logf("%d acknowledged, %d attempts, %d failed during the outage", len(acked), attempts.Load(), failures.Load())
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "PostgreSQL crashed (pg_ctl stop -m immediate) and restarted under 8 submitting clients",
		Amount: fmt.Sprintf("%d submissions acknowledged, %d attempts, %d failed while it was down", len(acked), attempts.Load(), failures.Load()),
		Held:   "every acknowledged job stored once, the server ready again with no restart of its own, 5xx JSON errors during the outage"})
}

func waitFor(t *testing.T, cond func() bool, within time.Duration, what string) {
	t.Helper()
	end := time.Now().Add(within)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
