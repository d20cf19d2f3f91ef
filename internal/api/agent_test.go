package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// uplink returns the agent's HTTP client for agent id on f's server.
func (f *fixture) uplink(id string) *link.HTTP {
	return &link.HTTP{URL: f.ts.URL, Token: f.tokens["agent"], Agent: id, Epoch: "e1", Timeout: 5 * time.Second}
}

func sampleRec(seq uint64, at time.Time, util int) link.Record {
	return link.Record{Seq: seq, Kind: link.KindSample, Sample: &link.Sample{LeaseID: "ignored", GPU: 0, At: at, UtilPct: util, MemUsedMiB: 10, MemTotalMiB: 80, Processes: link.Unknown}}
}

func eventRec(seq uint64, kind, subject string, attrs map[string]string) link.Record {
	return link.Record{Seq: seq, Kind: link.KindEvent, Event: &core.Event{At: t0.Add(time.Minute), Kind: kind, Subject: subject, Reason: kind, Attrs: attrs}}
}

// TestAgentProtocol drives the agent routes through the agent's own HTTP
// uplink: join, samples applied once however often sent, events turned
// into reports and acknowledgements, commands fetched, logs uploaded
// idempotently and read back under team isolation.
func TestAgentProtocol(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	up := f.uplink("node-1")

	// Before joining, a batch is refused with a message naming the call.
	err := up.SendSamples(ctx, []link.Record{sampleRec(1, t0, 50)})
	var he *link.Error
	if !errors.As(err, &he) || he.Status != 404 || !strings.Contains(err.Error(), "POST /api/v1/agent/samples: 404") {
		t.Fatalf("samples before join: %v", err)
	}
	if err := up.Heartbeat(ctx, link.Heartbeat{Offer: "idc/cd/v100x8", Source: "fake", Version: "v1",
		GPUs: []link.GPUInfo{{Index: 0, UUID: "GPU-0", Model: "V100", MemTotalMiB: 32768}}}); err != nil {
		t.Fatal(err)
	}
	a, err := f.st.Agents().GetAgent(ctx, "node-1")
	if err != nil || a.OfferID != "idc/cd/v100x8" || len(a.GPUs) != 1 || a.State != store.AgentOK || !a.LastSeen.Equal(t0) {
		t.Fatalf("joined agent = %+v, %v", a, err)
	}
	if ev, _ := f.st.Events().ListEvents(ctx, store.EventFilter{Kind: "agent.joined"}); len(ev.Items) != 1 {
		t.Errorf("join events = %+v", ev.Items)
	}
	// A heartbeat declaring an offer outside the catalog is refused.
	err = up.Heartbeat(ctx, link.Heartbeat{Offer: "nope/x"})
	if !errors.As(err, &he) || he.Status != 400 || he.Field != "offer" {
		t.Errorf("unknown offer: %v", err)
	}

	// Samples: the server's lease name wins; a resent batch (lost reply)
	// adds nothing; out-of-order sequence numbers are refused.
	if err := f.st.Agents().BindAgent(ctx, "node-1", "L1"); err != nil {
		t.Fatal(err)
	}
	batch := []link.Record{sampleRec(1, t0, 10), sampleRec(2, t0.Add(time.Second), 20), sampleRec(3, t0.Add(2*time.Second), link.Unknown)}
	for i := 0; i < 2; i++ {
		if err := up.SendSamples(ctx, batch); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	got, err := f.st.Samples().QuerySamples(ctx, store.SampleFilter{LeaseID: "L1"})
	if err != nil || len(got) != 2 || got[0].UtilPct != 10 || got[1].UtilPct != 20 {
		t.Errorf("stored samples = %+v, %v (the unknown one skipped, the resend not doubled)", got, err)
	}
	a, _ = f.st.Agents().GetAgent(ctx, "node-1")
	if a.AppliedSeq != 3 || a.Epoch != "e1" {
		t.Errorf("applied %d epoch %q", a.AppliedSeq, a.Epoch)
	}
	code, b, _ := f.call(t, "agent", "POST", "/api/v1/agent/samples",
		`{"agent":"node-1","epoch":"e1","records":[{"seq":9,"kind":"sample","sample":{"lease_id":"L1","gpu":0,"at":"2026-03-01T00:00:09Z"}},{"seq":8,"kind":"sample","sample":{"lease_id":"L1","gpu":0,"at":"2026-03-01T00:00:08Z"}}]}`)
	if code != 400 || !strings.Contains(string(b), `"records[1].seq"`) {
		t.Errorf("out of order: %d %s", code, b)
	}
	code, b, _ = f.call(t, "agent", "POST", "/api/v1/agent/events", `{"agent":"node-1","epoch":"e1","records":[{"seq":10,"kind":"sample","sample":{"lease_id":"L1","gpu":0,"at":"2026-03-01T00:00:09Z"}}]}`)
	if code != 400 || !strings.Contains(string(b), `records[0].kind`) {
		t.Errorf("a sample on the events route: %d %s", code, b)
	}

	// Commands: queued by the loop, fetched, acknowledged by the agent's
	// command event; job events become reports for the loop.
	spec, _ := json.Marshal(link.Command{Job: link.JobSpec{ID: "ja-r1", Team: "a", Command: []string{"true"}, GPUs: []string{"0"}}})
	if err := f.st.Agents().EnqueueCommands(ctx, store.AgentCommand{ID: "run:ja-r1", Agent: "node-1", Kind: store.CommandRun, Unit: "ja", Job: "ja", Team: "a", Run: "ja-r1", Spec: string(spec), Created: t0}); err != nil {
		t.Fatal(err)
	}
	cmds, err := up.FetchCommands(ctx)
	if err != nil || len(cmds) != 1 || cmds[0].ID != "run:ja-r1" || cmds[0].Kind != link.CommandRun || cmds[0].Job.ID != "ja-r1" {
		t.Fatalf("commands = %+v, %v", cmds, err)
	}
	evs := []link.Record{
		eventRec(4, "agent-command", "node-1", map[string]string{"command": "run:ja-r1", "result": "ok"}),
		eventRec(5, "job-started", "ja-r1", map[string]string{"pid": "42"}),
		eventRec(6, "job-exited", "ja-r1", map[string]string{"exit_code": "0", "user_cpu_ms": "12", "max_rss_kib": "2048"}),
	}
	for i := 0; i < 2; i++ { // the second is a resend
		if err := up.SendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	if cmds, _ := up.FetchCommands(ctx); len(cmds) != 0 {
		t.Errorf("acknowledged command fetched again: %+v", cmds)
	}
	reps, _ := f.st.Agents().PendingReports(ctx, 0)
	if len(reps) != 2 || reps[1].Kind != "job-exited" || reps[1].Run != "ja-r1" || reps[1].Attrs["exit_code"] != "0" {
		t.Errorf("reports = %+v", reps)
	}
	// The exit is on the trail under the unit, visible to its team.
	ev, _ := f.st.Events().ListEvents(ctx, store.EventFilter{Kind: "agent.job-exited"})
	if len(ev.Items) != 1 || ev.Items[0].Subject != "ja" || ev.Items[0].Attrs["run"] != "ja-r1" || ev.Items[0].Attrs["agent"] != "node-1" {
		t.Errorf("exit events = %+v", ev.Items)
	}

	// Logs: chunks by offset, a resend skipped, a gap answered with where
	// to resume; read back by offset and tail.
	if end, err := up.SendLog(ctx, "ja-r1", 0, []byte("line 1\n")); err != nil || end != 7 {
		t.Fatalf("log chunk: %d %v", end, err)
	}
	if end, err := up.SendLog(ctx, "ja-r1", 0, []byte("line 1\nline 2\n")); err != nil || end != 14 {
		t.Fatalf("overlapping chunk: %d %v", end, err)
	}
	_, err = up.SendLog(ctx, "ja-r1", 100, []byte("x"))
	var gap *link.LogGapError
	if !errors.As(err, &gap) || gap.End != 14 {
		t.Errorf("gap: %v", err)
	}
	_, err = up.SendLog(ctx, "not-mine", 0, []byte("x"))
	if !errors.Is(err, link.ErrUnknownRun) {
		t.Errorf("unknown run: %v", err)
	}
	var lv LogView
	code, b, _ = f.call(t, "member", "GET", "/api/v1/jobs/ja/logs", "")
	if code != 200 || json.Unmarshal(b, &lv) != nil || lv.Text != "line 1\nline 2\n" || lv.End != 14 {
		t.Errorf("member reads the log: %d %s", code, b)
	}
	code, b, _ = f.call(t, "viewer", "GET", "/api/v1/jobs/ja/logs?offset=7", "")
	if code != 200 || json.Unmarshal(b, &lv) != nil || lv.Text != "line 2\n" || lv.Start != 7 {
		t.Errorf("offset 7: %d %s", code, b)
	}
	code, b, _ = f.call(t, "member", "GET", "/api/v1/jobs/ja/logs?tail=3", "")
	if code != 200 || json.Unmarshal(b, &lv) != nil || lv.Text != " 2\n" || lv.Start != 11 {
		t.Errorf("tail 3: %d %s", code, b)
	}
	for q, want := range map[string]string{"lines=1": "line 2\n", "lines=2": "line 1\nline 2\n", "lines=9": "line 1\nline 2\n"} {
		code, b, _ = f.call(t, "member", "GET", "/api/v1/jobs/ja/logs?"+q, "")
		if code != 200 || json.Unmarshal(b, &lv) != nil || lv.Text != want || lv.Start != int64(14-len(want)) || lv.End != 14 {
			t.Errorf("%s: %d %s; want text %q", q, code, b, want)
		}
	}
	for _, bad := range []string{"offset=-1", "tail=x", "offset=1&tail=2", "limit=99999999", "lines=-1", "lines=x", "lines=2&tail=2", "lines=1&offset=3", "lines=100001"} {
		code, b, _ = f.call(t, "member", "GET", "/api/v1/jobs/ja/logs?"+bad, "")
		if code != 400 || !strings.Contains(string(b), "invalid_argument") {
			t.Errorf("%s: %d %s", bad, code, b)
		}
	}
	code, b, _ = f.call(t, "member", "GET", "/api/v1/jobs/jb/logs", "")
	if code != 404 {
		t.Errorf("another team's job's logs: %d %s", code, b)
	}
}

// TestNodesScoping: an admin sees every node; a team role sees the nodes
// running its team's units, and only those units.
func TestNodesScoping(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range []string{"n1", "n2", "n3"} {
		if err := f.uplink(id).Heartbeat(ctx, link.Heartbeat{Source: "fake"}); err != nil {
			t.Fatal(err)
		}
	}
	for id, lease := range map[string]string{"n1": "L1", "n2": "L2"} {
		if err := f.st.Agents().BindAgent(ctx, id, lease); err != nil {
			t.Fatal(err)
		}
	}
	// ja (team a) runs on L1, jb (team b) on L2.
	for job, lease := range map[string]string{"ja": "L1", "jb": "L2"} {
		u := store.Unit{JobID: job, State: core.JobRunning, Parts: []store.Part{{LeaseID: lease, GPUs: []int{0}}}, Start: t0, Since: t0}
		if err := f.st.Units().SaveUnits(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	nodes := func(role string) map[string][]string {
		t.Helper()
		code, b, _ := f.call(t, role, "GET", "/api/v1/nodes", "")
		var p NodesPage
		if code != 200 || json.Unmarshal(b, &p) != nil {
			t.Fatalf("%s: %d %s", role, code, b)
		}
		out := map[string][]string{}
		for _, n := range p.Nodes {
			out[n.ID] = n.Jobs
		}
		return out
	}
	if got := nodes("admin"); len(got) != 3 || len(got["n1"]) != 1 || got["n2"][0] != "jb" || len(got["n3"]) != 0 {
		t.Errorf("admin sees %v", got)
	}
	for _, role := range []string{"team-admin", "member", "viewer"} {
		if got := nodes(role); len(got) != 1 || len(got["n1"]) != 1 || got["n1"][0] != "ja" {
			t.Errorf("%s sees %v, want n1 running ja only", role, got)
		}
	}
	code, b, _ := f.call(t, "admin", "GET", "/api/v1/nodes?state=sleepy", "")
	if code != 400 || !strings.Contains(string(b), `"field": "state"`) {
		t.Errorf("bad state filter: %d %s", code, b)
	}
}

// TestTailLines: the last n lines of a log, however long its lines and
// wherever the chunks the store reads fall, read backwards no further
// than store.MaxLogRead bytes.
func TestTailLines(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // lines longer than the first chunk read
	tests := []struct {
		name, log string
		n         int
		want      string
	}{
		{"empty", "", 3, ""},
		{"fewer lines", "a\nb\n", 3, "a\nb\n"},
		{"exact", "a\nb\nc\n", 3, "a\nb\nc\n"},
		{"last two", "a\nb\nc\n", 2, "b\nc\n"},
		{"no final newline", "a\nb\nc", 2, "b\nc"},
		{"blank lines count", "a\n\n\n", 2, "\n\n"},
		{"long lines", "first\n" + long + "\n" + long + "\nlast\n", 3, long + "\n" + long + "\nlast\n"},
		{"one line", "one line, no newline", 1, "one line, no newline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &memLogs{data: []byte(tt.log)}
			got, err := tailLines(context.Background(), logs, "j", tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Data) != tt.want || got.Start != int64(len(tt.log)-len(tt.want)) || got.End != int64(len(tt.log)) {
				t.Errorf("tailLines(%d) = start %d end %d %.40q…; want start %d %.40q…", tt.n, got.Start, got.End, got.Data, len(tt.log)-len(tt.want), tt.want)
			}
		})
	}
	// A log of one huge line and then short ones: the read stops at
	// MaxLogRead bytes and the text begins at a whole line.
	huge := strings.Repeat("y", store.MaxLogRead+10) + "\n"
	var tail strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&tail, "line %d\n", i)
	}
	logs := &memLogs{data: []byte(huge + tail.String())}
	got, err := tailLines(context.Background(), logs, "j", 5000)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != tail.String() || logs.read > store.MaxLogRead+64<<10 {
		t.Errorf("bounded: %d bytes back from start %d, %d read; want the 1000 short lines, at most %d read", len(got.Data), got.Start, logs.read, store.MaxLogRead+64<<10)
	}
}

// TestTailLinesProperty: on random logs (line lengths around the chunk
// size, blank lines, with or without a final newline; under MaxLogRead in
// all), tailLines returns
// what splitting the whole log into lines and keeping the last n gives.
func TestTailLinesProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 200 {
		var b strings.Builder
		for range rng.IntN(40) {
			switch rng.IntN(4) {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString(strings.Repeat("a", rng.IntN(100<<10)) + "\n")
			default:
				b.WriteString(strings.Repeat("b", rng.IntN(80)) + "\n")
			}
		}
		if rng.IntN(2) == 0 {
			b.WriteString("partial")
		}
		log := b.String()
		n := 1 + rng.IntN(45)
		lines := strings.SplitAfter(log, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		want := strings.Join(lines[max(len(lines)-n, 0):], "")
		got, err := tailLines(context.Background(), &memLogs{data: []byte(log)}, "j", n)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Data) != want || got.Start != int64(len(log)-len(want)) {
			t.Fatalf("seed %d: log of %d bytes, %d lines, last %d: got %d bytes from %d, want %d bytes", seed, len(log), len(lines), n, len(got.Data), got.Start, len(want))
		}
	}
}

// memLogs is a job log in memory, for tailLines; it counts bytes read.
type memLogs struct {
	store.JobLogs
	data []byte
	read int
}

func (m *memLogs) ReadLog(_ context.Context, _ string, offset int64, limit int) (store.LogRead, error) {
	end := min(offset+int64(limit), int64(len(m.data)))
	m.read += int(end - offset)
	return store.LogRead{Data: m.data[offset:end], Start: offset, End: int64(len(m.data))}, nil
}

func (m *memLogs) TailLog(ctx context.Context, id string, n int) (store.LogRead, error) {
	return m.ReadLog(ctx, id, max(int64(len(m.data)-n), 0), n)
}

// failingCommands is a store whose transactions' GetCommand fails while
// fail is set: a read failure such as PostgreSQL's serialization error.
type failingCommands struct {
	store.Store
	fail *bool
}

func (s failingCommands) Tx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Tx(ctx, func(tx store.Tx) error { return fn(failingTx{tx, s.fail}) })
}

type failingTx struct {
	store.Tx
	fail *bool
}

func (t failingTx) Agents() store.Agents { return failingAgents{t.Tx.Agents(), t.fail} }

type failingAgents struct {
	store.Agents
	fail *bool
}

func (a failingAgents) GetCommand(ctx context.Context, id string) (store.AgentCommand, error) {
	if *a.fail {
		return store.AgentCommand{}, errors.New("could not serialize access (injected)")
	}
	return a.Agents.GetCommand(ctx, id)
}

// TestAgentEventsSurfaceReadErrors: a failed command read inside the
// events batch fails the batch (nothing applied, the agent resends), so
// that a backend's retry can happen; it is not taken for "no such
// command", which would store the event under the wrong subject and
// leave a PostgreSQL transaction aborted.
func TestAgentEventsSurfaceReadErrors(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/api.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fail := false
	f := newFixtureOn(t, failingCommands{st, &fail})
	ctx := context.Background()
	up := f.uplink("node-1")
	if err := up.Heartbeat(ctx, link.Heartbeat{Offer: "idc/cd/v100x8", Source: "fake", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Agents().EnqueueCommands(ctx, store.AgentCommand{ID: "run:ja-r1", Agent: "node-1", Kind: store.CommandRun, Unit: "ja", Job: "ja", Team: "a", Run: "ja-r1", Spec: "{}", Created: t0}); err != nil {
		t.Fatal(err)
	}
	evs := []link.Record{eventRec(1, "job-started", "ja-r1", map[string]string{"pid": "42"})}
	fail = true
	var he *link.Error
	if err := up.SendEvents(ctx, evs); !errors.As(err, &he) || he.Status != 500 {
		t.Fatalf("events while the read fails: %v, want a 500", err)
	}
	if a, _ := st.Agents().GetAgent(ctx, "node-1"); a.AppliedSeq != 0 {
		t.Errorf("applied seq %d after a failed batch, want 0", a.AppliedSeq)
	}
	fail = false
	if err := up.SendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	page, err := st.Events().ListEvents(ctx, store.EventFilter{Kind: "agent.job-started"})
	if err != nil || len(page.Items) != 1 || page.Items[0].Subject != "ja" {
		t.Errorf("job-started events = %+v, %v, want one on unit ja", page.Items, err)
	}
}
