package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/reltest"

	"github.com/gpufleet/gpufleet/internal/agent"
	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	fleetpkg "github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// The fleet tests run a real server (API over loopback HTTP, the loop on
// the wall clock with a short tick, the agent pool on SQLite) and real
// agents (the HTTP uplink, the runner running bash scripts, a fake GPU
// source), each agent reaching the server through its own reverse
// proxy, which a test can cut to partition it.

const (
	fleetTick    = 50 * time.Millisecond
	suspectAfter = 700 * time.Millisecond
	downAfter    = 2 * time.Second
	patience     = 30 * time.Second // only reached when something is wrong, or on a starved machine
)

type fleet struct {
	t      *testing.T
	st     store.Store
	api    *httptest.Server
	pool   *AgentPool
	member string // a member token of team ml
	admin  string
	agentT string
	ckpt   string
	idle   bool // the agents' GPUs report 0% utilization
	// fakeGPU: the agents read the fake Machine (gpu.NewMachine).
	fakeGPU bool
	agents  map[string]*fleetAgent
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	ctx     context.Context
}

type fleetAgent struct {
	id     string
	proxy  *httptest.Server
	cut    atomic.Bool
	src    *countingSource
	cancel context.CancelFunc
	done   chan struct{}
}

// countingSource is one GPU whose utilization counts the samples taken
// (modulo 101), so the server's samples show any that went missing.
type countingSource struct {
	n    atomic.Int64
	idle bool // report 0% instead
}

func (c *countingSource) Name() string { return "fake" }
func (c *countingSource) Close() error { return nil }
func (c *countingSource) Sample(context.Context) ([]gpu.Reading, error) {
	k := c.n.Add(1) - 1
	if c.idle {
		k = 0
	}
	return []gpu.Reading{{Index: 0, UUID: "GPU-0", Name: "NVIDIA A100", UtilPct: int(k % 101), MemUsedMiB: 100, MemTotalMiB: 40960, PowerW: 100, TempC: 40, ProcessesKnown: false}}, nil
}

func fleetOffers() []core.Offer {
	return []core.Offer{{ID: "lab/local/a100x1", Provider: "lab", Region: "local", InstanceType: "a100x1", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960,
		VCPUs: 8, MemoryMiB: 65536, Currency: "USD",
		Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 3600}}}}
}

func newFleet(t *testing.T, agents ...string) *fleet {
	t.Helper()
	return newFleetWith(t, fleetOpts{}, agents...)
}

// fleetOpts vary newFleet: the control loop off; the idle ladder's
// fleet settings; agents whose GPUs idle.
type fleetOpts struct {
	noLoop bool
	sched  sched.Config
	fleet  fleetpkg.Config
	idle   bool
	// fakeGPU gives the agents the fake Machine source, driven by their
	// runs (processes listed); notify is the loop's Notifier.
	fakeGPU bool
	notify  Notifier
}

// newFleetWith is newFleet with opts.
func newFleetWith(t *testing.T, opts fleetOpts, agents ...string) *fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{t: t, ckpt: t.TempDir(), agents: map[string]*fleetAgent{}, ctx: ctx, cancel: cancel}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "fleet.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	clk := clock.Real{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("GPUFLEET_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if f.admin, err = api.EnsureAdminToken(ctx, st, clk); err != nil {
		t.Fatal(err)
	}
	if err := st.Teams().CreateTeam(ctx, core.Team{ID: "ml", Name: "ML", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	f.member = f.token(store.RoleMember, "ml")
	f.agentT = f.token(store.RoleAgent, "")
	cfg := AgentConfig{SuspectAfter: suspectAfter, DownAfter: downAfter, CheckpointRoot: f.ckpt, Grace: 2 * time.Second}
	offers := fleetOffers()
	f.pool, err = NewAgentPool(st, clk, []string{offers[0].ID}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cat := &pricing.Catalog{Currency: "USD", Offers: offers}
	f.api = httptest.NewServer(api.New(cat, clk, log, api.WithStore(st), api.WithRateLimit(httpapi.RateLimit{})))
	// Owned machines cost nothing more for being used: pending work
	// need not wait for the fleet's wait targets before one is leased.
	eng := engine.Config{Fleet: opts.fleet, Sched: opts.sched}
	eng.Fleet.WaitTarget = map[core.Tier]time.Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}
	f.idle, f.fakeGPU = opts.idle, opts.fakeGPU
	loop, err := NewLoop(Config{Store: st, Provider: f.pool, Offers: offers, Clock: clk, Log: log, Engine: eng, Tick: fleetTick, Notify: opts.notify})
	if err != nil {
		t.Fatal(err)
	}
	if !opts.noLoop {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_ = loop.Run(ctx)
		}()
	}
	for _, id := range agents {
		f.start(id)
	}
	t.Cleanup(f.close)
	return f
}

func (f *fleet) close() {
	for _, a := range f.agents {
		a.cancel()
		<-a.done
		a.proxy.Close()
	}
	f.cancel()
	f.wg.Wait()
	f.api.Close()
	f.st.Close()
}

func (f *fleet) token(role store.Role, team string) string {
	f.t.Helper()
	secret, hash, err := store.NewToken()
	if err != nil {
		f.t.Fatal(err)
	}
	id := fmt.Sprintf("t-%s-%d", role, time.Now().UnixNano())
	tok := store.Token{ID: id, Hash: hash, Role: role, Team: team, Name: id, Created: time.Now()}
	if role != store.RoleAgent {
		u := store.User{ID: "u-" + id, Team: team, Role: role, Created: time.Now()}
		if err := f.st.Users().CreateUser(f.ctx, u); err != nil {
			f.t.Fatal(err)
		}
		tok.User = u.ID
	}
	if err := f.st.Tokens().CreateToken(f.ctx, tok); err != nil {
		f.t.Fatal(err)
	}
	return secret
}

// start runs agent id behind its own cuttable proxy.
func (f *fleet) start(id string) *fleetAgent {
	f.t.Helper()
	target, _ := url.Parse(f.api.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = stdlog.New(io.Discard, "", 0) // requests cut at shutdown are expected
	a := &fleetAgent{id: id, src: &countingSource{idle: f.idle}, done: make(chan struct{})}
	a.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.cut.Load() {
			// A partition: the connection dies without an answer.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		}
		rp.ServeHTTP(w, r)
	}))
	dir := f.t.TempDir()
	epoch, err := agent.SpoolEpoch(dir)
	if err != nil {
		f.t.Fatal(err)
	}
	up := &link.HTTP{URL: a.proxy.URL, Token: f.agentT, Agent: id, Epoch: epoch, Timeout: 2 * time.Second,
		Client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	cfg := agent.Config{AgentID: id, OfferID: "lab/local/a100x1", DataDir: dir, Source: a.src, Uplink: up,
		SampleInterval: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, LogInterval: 100 * time.Millisecond,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second, TermGrace: time.Second, Seed: 7}
	if f.fakeGPU {
		cfg.Source, cfg.GPUSource, cfg.GPU = nil, "fake", gpu.Options{FakeBoard: gpu.Board{Count: 1, Model: "NVIDIA A100", MemMiB: 40960}}
	}
	ctx, cancel := context.WithCancel(f.ctx)
	a.cancel = cancel
	go func() {
		defer close(a.done)
		if err := agent.Run(ctx, cfg); err != nil {
			f.t.Errorf("agent %s: %v", id, err)
		}
	}()
	f.agents[id] = a
	return a
}

// call sends a request with token and decodes the JSON reply into out.
func (f *fleet) call(token, method, path, body string, out any) int {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.api.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (f *fleet) submit(id string, steps int, extra string) {
	f.t.Helper()
	script, _ := filepath.Abs("testdata/steps.sh")
	// The admin names the job (a team token's jobs are named by the
	// server), in team ml.
	body := fmt.Sprintf(`{"id":%q,"team":"ml","gpus":1,"est_duration_seconds":1,"command":["bash",%q,"%d"]%s}`, id, script, steps, extra)
	if code := f.call(f.admin, "POST", "/api/v1/jobs", body, nil); code != 201 {
		f.t.Fatalf("submit %s: %d", id, code)
	}
}

// waitFor polls cond until it holds.
func (f *fleet) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			evs := f.events("")
			for _, e := range evs[max(len(evs)-40, 0):] {
				f.t.Logf("trail: %s %s %s: %s %v", e.At.Format("15:04:05.000"), e.Kind, e.Subject, e.Reason, e.Attrs)
			}
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fleet) job(id string) api.JobView {
	f.t.Helper()
	var j api.JobView
	f.call(f.member, "GET", "/api/v1/jobs/"+id, "", &j)
	return j
}

func (f *fleet) logs(id string) string {
	f.t.Helper()
	var lv api.LogView
	if code := f.call(f.member, "GET", "/api/v1/jobs/"+id+"/logs", "", &lv); code != 200 {
		f.t.Fatalf("logs of %s: %d", id, code)
	}
	return lv.Text
}

// events returns the trail's events of kind (all when empty), oldest
// first.
func (f *fleet) events(kind string) []core.Event {
	f.t.Helper()
	var out []core.Event
	filter := store.EventFilter{Kind: kind, Limit: store.MaxLimit}
	for {
		p, err := f.st.Events().ListEvents(f.ctx, filter)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, p.Items...)
		if p.Next == "" {
			break
		}
		filter.Cursor = p.Next
	}
	return out
}

// agentOf returns the agent running job id now ("" if none).
func (f *fleet) agentOf(id string) string {
	units, err := f.st.Units().ListUnits(f.ctx, id)
	if err != nil || len(units) == 0 || units[0].State != core.JobRunning || len(units[0].Parts) == 0 {
		return ""
	}
	p, err := f.st.Agents().ListAgents(f.ctx, store.AgentFilter{LeaseID: units[0].Parts[0].LeaseID})
	if err != nil || len(p.Items) == 0 {
		return ""
	}
	return p.Items[0].ID
}

// TestFleetJobCompletes: a job placed on an agent's machine runs as a
// real process, its exit decides its state (not the estimated duration,
// one second here, far shorter than the run), its output is readable
// through the API, and a failing job fails with its exit status.
func TestFleetJobCompletes(t *testing.T) {
	f := newFleet(t, "node-1", "node-2")
	f.submit("hello", 40, "")
	f.waitFor("hello to succeed", func() bool { return f.job("hello").State == "succeeded" })
	var reason string
	for _, e := range f.events("unit.succeeded") {
		if e.Subject == "hello" {
			reason = e.Reason
		}
	}
	if !strings.Contains(reason, "reports run") || !strings.Contains(reason, "exited 0") {
		t.Errorf("succeeded because %q, want the agent's exit report", reason)
	}
	f.waitFor("the whole log", func() bool { return strings.Contains(f.logs("hello"), "done at 40") })
	text := f.logs("hello")
	for _, want := range []string{"stdout step 1\n", "stdout step 40\n", "checkpointed at 30", "=== attempt 1 started"} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q:\n%s", want, text)
		}
	}
	var tail api.LogView
	f.call(f.member, "GET", "/api/v1/jobs/hello/logs?tail=200", "", &tail)
	if !strings.Contains(tail.Text, "done at 40") || tail.End != int64(len(text)) || len(tail.Text) != 200 {
		t.Errorf("tail: %d bytes ending at %d of %d: %q", len(tail.Text), tail.End, len(text), tail.Text)
	}

	script := `{"id":"oops","team":"ml","gpus":1,"command":["bash","-c","echo failing >&2; exit 3"]}`
	if code := f.call(f.admin, "POST", "/api/v1/jobs", script, nil); code != 201 {
		t.Fatal(code)
	}
	f.waitFor("oops to fail", func() bool { return f.job("oops").State == "failed" })
	var failed []core.Event
	for _, e := range f.events("unit.failed") {
		if e.Subject == "oops" {
			failed = append(failed, e)
		}
	}
	if len(failed) != 1 || failed[0].Attrs["exit_code"] != "3" || !strings.Contains(failed[0].Reason, "exit 3") {
		t.Errorf("failure events = %+v", failed)
	}
	f.waitFor("the failing job's stderr", func() bool { return strings.Contains(f.logs("oops"), "stderr failing") })

	// Nodes: both agents ok; the member sees none of them now that its
	// jobs are done, the admin sees both.
	var nodes api.NodesPage
	f.call(f.admin, "GET", "/api/v1/nodes", "", &nodes)
	if len(nodes.Nodes) != 2 || nodes.Nodes[0].State != "ok" || nodes.Nodes[0].Offer != "lab/local/a100x1" || len(nodes.Nodes[0].GPUs) != 1 {
		t.Errorf("admin nodes = %+v", nodes)
	}
}

// TestFleetPartitionLosesNoSample cuts an agent off mid-job for longer
// than the suspect threshold: the server marks it suspect, then ok again
// when it returns, and every sample it took while away arrives, in
// order, none lost (each sample's utilization is its sequence number).
func TestFleetPartitionLosesNoSample(t *testing.T) {
	f := newFleet(t, "node-1")
	f.submit("long", 400, "")
	f.waitFor("long to run on node-1", func() bool { return f.agentOf("long") == "node-1" })
	a := f.agents["node-1"]
	units, _ := f.st.Units().ListUnits(f.ctx, "long")
	lease := units[0].Parts[0].LeaseID
	stored := func() []core.Sample {
		s, err := f.st.Samples().QuerySamples(f.ctx, store.SampleFilter{LeaseID: lease})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.waitFor("samples of the leased machine", func() bool { return len(stored()) >= 3 })

	a.cut.Store(true)
	takenAtCut := a.src.n.Load()
	f.waitFor("node-1 suspect", func() bool {
		ag, _ := f.st.Agents().GetAgent(f.ctx, "node-1")
		return ag.State == store.AgentSuspect
	})
	time.Sleep(300 * time.Millisecond) // still short of down
	takenWhileAway := a.src.n.Load() - takenAtCut
	before := len(stored())
	a.cut.Store(false)
	f.waitFor("node-1 ok again", func() bool {
		ag, _ := f.st.Agents().GetAgent(f.ctx, "node-1")
		return ag.State == store.AgentOK
	})
	f.waitFor("the backlog", func() bool { return int64(len(stored())) >= int64(before)+takenWhileAway })
	got := stored()
	if takenWhileAway < 10 {
		t.Fatalf("only %d samples taken during the partition", takenWhileAway)
	}
	for i := 1; i < len(got); i++ {
		if !got[i].At.After(got[i-1].At) {
			t.Fatalf("sample %d at %v not after %v", i, got[i].At, got[i-1].At)
		}
		if want := (got[i-1].UtilPct + 1) % 101; got[i].UtilPct != want {
			t.Fatalf("sample %d has sequence %d after %d: %d lost", i, got[i].UtilPct, got[i-1].UtilPct, (got[i].UtilPct-want+101)%101)
		}
	}
	t.Logf("%d samples taken during the partition; %d stored before it healed, %d after", takenWhileAway, before, len(got))
	kinds := map[string]int{}
	for _, e := range f.events("") {
		if e.Subject == "node-1" {
			kinds[e.Kind]++
		}
	}
	if kinds["agent.suspect"] != 1 || kinds["agent.ok"] != 1 || kinds["agent.down"] != 0 {
		t.Errorf("node-1's trail: %v", kinds)
	}
	if ag := f.agentOf("long"); ag != "node-1" {
		t.Errorf("the job moved to %q during a partition shorter than the down threshold", ag)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "an agent's link to the server cut (a reverse proxy) past the suspect threshold while its job runs",
		Amount: fmt.Sprintf("%d samples taken while away, %d stored in all", takenWhileAway, len(got)),
		Held:   "every sample arrived after the heal, in order, none lost or repeated; suspect then ok, the job stayed"})
}

// TestFleetReclaimCheckpointsBeforeKill gives the machine running a job
// a spot reclaim notice: the job gets its checkpoint signal (and saves)
// before the machine is taken and the job killed, then resumes on
// another machine from that checkpoint and finishes.
func TestFleetReclaimCheckpointsBeforeKill(t *testing.T) {
	f := newFleet(t, "node-1", "node-2")
	f.submit("spot", 120, "")
	var first string
	f.waitFor("spot to run", func() bool { first = f.agentOf("spot"); return first != "" })
	f.waitFor("a few steps", func() bool { return strings.Contains(f.logs("spot"), "step 15\n") })
	if err := f.pool.Reclaim(f.ctx, first, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f.waitFor("spot to succeed", func() bool { return f.job("spot").State == "succeeded" })
	// On the first run: the signal, then the kill.
	var signal, exit int
	var order []string
	for i, e := range f.events("") {
		if e.Attrs["agent"] != first || !strings.HasPrefix(e.Kind, "agent.job-") {
			continue
		}
		order = append(order, e.Kind+" "+e.Reason)
		switch e.Kind {
		case "agent.job-signal":
			if signal == 0 && e.Attrs["signal"] == "USR1" && strings.Contains(e.Reason, "reclaim") {
				signal = i + 1
			}
		case "agent.job-exited":
			exit = i + 1
			if e.Attrs["signal"] != "KILL" {
				t.Errorf("first run ended with %+v, want the kill at reclaim", e.Attrs)
			}
		}
	}
	if signal == 0 || exit == 0 || signal > exit {
		t.Errorf("on %s: checkpoint signal at %d, exit at %d: %v", first, signal, exit, order)
	}
	f.waitFor("the whole log", func() bool { return strings.Contains(f.logs("spot"), "done at 120") })
	text := f.logs("spot")
	ck := strings.Index(text, "checkpointed at ")
	res := strings.Index(text, "resumed at ")
	if ck < 0 || res < ck || !strings.Contains(text, "done at 120") {
		t.Fatalf("log does not show a checkpoint, a resume and the end:\n%s", text)
	}
	var resumedAt int
	fmt.Sscanf(text[res:], "resumed at %d", &resumedAt)
	if resumedAt < 15 {
		t.Errorf("resumed at step %d, want at least the 15 done before the notice", resumedAt)
	}
	// It resumed elsewhere: the reclaimed machine is gone.
	var second string
	for _, e := range f.events("agent.job-started") {
		if e.Subject == "spot" && e.Attrs["agent"] != first {
			second = e.Attrs["agent"]
		}
	}
	if second == "" {
		t.Errorf("no run of spot started on another agent than %s", first)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "a spot reclaim notice (1.5 s lead) on the machine running a real job",
		Amount: fmt.Sprintf("1 reclaim; the job resumed at step %d of 120 on %s", resumedAt, second),
		Held:   "the checkpoint signal reached the job before the kill; it resumed elsewhere from the checkpoint and finished"})
}

// agentChildEnv makes the test binary an agent process
// (TestAgentProcess) that a test can kill with SIGKILL.
const agentChildEnv = "GPUFLEET_TEST_AGENT_CHILD"

// TestAgentProcess is the agent process of TestFleetKilledAgent; it does
// nothing in a normal run.
func TestAgentProcess(t *testing.T) {
	spec := os.Getenv(agentChildEnv)
	if spec == "" {
		return
	}
	var c struct{ URL, Token, ID, Dir string }
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	epoch, err := agent.SpoolEpoch(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	up := &link.HTTP{URL: c.URL, Token: c.Token, Agent: c.ID, Epoch: epoch, Timeout: 2 * time.Second}
	cfg := agent.Config{AgentID: c.ID, OfferID: "lab/local/a100x1", DataDir: c.Dir, Source: &countingSource{}, Uplink: up,
		SampleInterval: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, LogInterval: 100 * time.Millisecond,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second, TermGrace: time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// startProcess runs agent id as a process of its own.
func (f *fleet) startProcess(id string) *exec.Cmd {
	f.t.Helper()
	spec, _ := json.Marshal(map[string]string{"URL": f.api.URL, "Token": f.agentT, "ID": id, "Dir": f.t.TempDir()})
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentProcess$")
	cmd.Env = append(os.Environ(), agentChildEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestFleetKilledAgent kills, with SIGKILL, the agent process running a
// job, and the job's processes with it (the machine is gone): the server
// marks the agent suspect, then down, requeues the job from its last
// checkpoint, and another agent resumes it from there to the end.
func TestFleetKilledAgent(t *testing.T) {
	f := newFleet(t)
	proc := f.startProcess("node-p")
	f.submit("train", 100, "")
	f.waitFor("train to run on node-p", func() bool { return f.agentOf("train") == "node-p" })
	f.waitFor("a checkpoint", func() bool { return strings.Contains(f.logs("train"), "checkpointed at 20") })
	f.start("node-2")
	var pid int
	for _, e := range f.events("agent.job-started") {
		if e.Subject == "train" && e.Attrs["agent"] == "node-p" {
			pid, _ = strconv.Atoi(e.Attrs["pid"])
		}
	}
	if pid <= 0 {
		t.Fatal("no pid in the job-started event")
	}
	// The agent's last heartbeat is at most one interval before the kill:
	// the time is taken before it, since waiting for the process to go
	// can take long on a loaded machine.
	killed := time.Now()
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the job's process group %d: %v", pid, err)
	}
	f.waitFor("train to succeed", func() bool { return f.job("train").State == "succeeded" })
	f.waitFor("the whole log", func() bool { return strings.Contains(f.logs("train"), "done at 100") })
	text := f.logs("train")
	var resumedAt int
	if i := strings.Index(text, "resumed at "); i < 0 {
		t.Fatalf("no resume in the log:\n%s", text)
	} else {
		fmt.Sscanf(text[i:], "resumed at %d", &resumedAt)
	}
	if resumedAt < 20 {
		t.Errorf("resumed at step %d, want at least the 20 checkpointed before the kill", resumedAt)
	}
	var down, requeued bool
	for _, e := range f.events("") {
		switch {
		case e.Kind == "agent.down" && e.Subject == "node-p":
			down = true
			if d := e.At.Sub(killed); d < downAfter-200*time.Millisecond {
				t.Errorf("node-p down %s after the kill, before the %s threshold", d, downAfter)
			}
		case e.Kind == "unit.requeued" && e.Subject == "train" && strings.Contains(e.Reason, "node-p is down"):
			requeued = true
		}
	}
	if !down || !requeued {
		t.Errorf("down event %v, requeue event %v", down, requeued)
	}
	a, _ := f.st.Agents().GetAgent(f.ctx, "node-p")
	if a.State != store.AgentDown || a.LeaseID != "" {
		t.Errorf("node-p = %s on lease %q, want down and unbound", a.State, a.LeaseID)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "a gpufleet agent process and its job killed with SIGKILL mid-run",
		Amount: fmt.Sprintf("1 agent of 2, the job checkpointed; resumed at step %d of 100", resumedAt),
		Held:   "the agent went down after its threshold, the job was requeued and finished on the other agent from its checkpoint"})
}

// TestFleetLogRetention: the loop removes log chunks older than the
// retention, and keeps the rest at their offsets.
func TestFleetLogRetention(t *testing.T) {
	f := newFleetWith(t, fleetOpts{noLoop: true})
	if code := f.call(f.admin, "POST", "/api/v1/jobs", `{"id":"old","team":"ml","gpus":1,"tier":"offline","deferrable":true}`, nil); code != 201 {
		t.Fatal(code)
	}
	if _, err := f.st.JobLogs().AppendLog(f.ctx, "old", "a/r", 0, []byte("ancient\n"), time.Now().Add(-15*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.JobLogs().AppendLog(f.ctx, "old", "a/r", 8, []byte("recent\n"), time.Now()); err != nil {
		t.Fatal(err)
	}
	// A loop that starts now prunes at its first tick.
	loop, err := NewLoop(Config{Store: f.st, Provider: f.pool, Offers: fleetOffers(), Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Tick(f.ctx); err != nil {
		t.Fatal(err)
	}
	r, err := f.st.JobLogs().ReadLog(f.ctx, "old", 0, 0)
	if err != nil || string(r.Data) != "recent\n" || r.Start != 8 || r.End != 15 {
		t.Errorf("after retention: %q from %d to %d, %v", r.Data, r.Start, r.End, err)
	}
}

// TestFleetIdleLadderFromAgents: a job whose GPU its agent reports idle
// climbs the idle ladder on the server from the agent's samples (here
// with a 300 ms threshold): the alert event names the unit and its GPU.
func TestFleetIdleLadderFromAgents(t *testing.T) {
	f := newFleetWith(t, fleetOpts{idle: true, fleet: fleetpkg.Config{IdleUtilPct: 20, IdleFor: 300 * time.Millisecond, NotifyAfter: time.Hour, ActAfter: time.Hour}}, "node-1")
	f.submit("lazy", 400, "")
	f.waitFor("an idle alert for lazy", func() bool {
		for _, e := range f.events("idle-alert") {
			if e.Subject == "lazy" {
				return true
			}
		}
		return false
	})
	if j := f.job("lazy"); j.State != "running" {
		t.Errorf("lazy is %s after the alert, want still running (the action is an hour away)", j.State)
	}
}

// TestFleetCancelKillsTheRun: cancelling a running job through the API
// kills its process on the agent.
func TestFleetCancelKillsTheRun(t *testing.T) {
	f := newFleet(t, "node-1")
	f.submit("doomed", 1000, "")
	f.waitFor("doomed to run", func() bool { return strings.Contains(f.logs("doomed"), "step 5\n") })
	if code := f.call(f.member, "POST", "/api/v1/jobs/doomed/cancel", "", nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	f.waitFor("the run killed", func() bool {
		for _, e := range f.events("agent.job-exited") {
			if e.Subject == "doomed" && e.Attrs["signal"] == "KILL" {
				return true
			}
		}
		return false
	})
	if j := f.job("doomed"); j.State != "cancelled" {
		t.Errorf("doomed is %s", j.State)
	}
	if text := f.logs("doomed"); strings.Contains(text, "done at") {
		t.Errorf("the cancelled job ran to the end:\n%s", text)
	}
}

// TestFleetPreemptionStopsWithCheckpoint: a core job preempts an
// interruptible offline one on the only machine: the offline run is
// stopped (checkpoint signal, grace, SIGTERM), the core job runs, and the
// offline job resumes from its checkpoint afterwards.
func TestFleetPreemptionStopsWithCheckpoint(t *testing.T) {
	f := newFleetWith(t, fleetOpts{sched: sched.Config{MinRuntime: time.Millisecond}}, "node-1")
	f.submit("batch", 60, `,"tier":"offline","interruptible":true`)
	f.waitFor("batch to run", func() bool { return strings.Contains(f.logs("batch"), "step 12\n") })
	f.submit("urgent", 10, `,"tier":"core"`)
	f.waitFor("urgent to succeed", func() bool { return f.job("urgent").State == "succeeded" })
	f.waitFor("batch to succeed", func() bool { return f.job("batch").State == "succeeded" })
	f.waitFor("batch's whole log", func() bool { return strings.Contains(f.logs("batch"), "done at 60") })
	text := f.logs("batch")
	var resumedAt int
	if i := strings.Index(text, "resumed at "); i < 0 {
		t.Fatalf("batch did not resume:\n%s", text)
	} else {
		fmt.Sscanf(text[i:], "resumed at %d", &resumedAt)
	}
	if resumedAt < 12 {
		t.Errorf("batch resumed at %d, want at least the 12 steps done before the preemption", resumedAt)
	}
	var stopped bool
	for _, e := range f.events("agent.job-exited") {
		if e.Subject == "batch" && e.Attrs["stopped"] == "true" && e.Attrs["exit_code"] == "143" {
			stopped = true
		}
	}
	if !stopped {
		for _, e := range f.events("") {
			if strings.HasPrefix(e.Subject, "batch") || strings.HasPrefix(e.Subject, "urgent") {
				t.Logf("trail: %s %s %s: %s %v", e.At.Format("15:04:05.000"), e.Kind, e.Subject, e.Reason, e.Attrs)
			}
		}
		t.Errorf("no stopped exit (SIGTERM after the grace, status 143) of batch's first run")
	}
}
