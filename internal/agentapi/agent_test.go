package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

func sampleRec(seq uint64, at time.Time, util int) link.Record {
	return link.Record{Seq: seq, Kind: link.KindSample, Sample: &link.Sample{LeaseID: "ignored", GPU: 0, At: at, UtilPct: util, MemUsedMiB: 10, MemTotalMiB: 80, Processes: link.Unknown}}
}

func eventRec(seq uint64, kind, subject string, attrs map[string]string) link.Record {
	return link.Record{Seq: seq, Kind: link.KindEvent, Event: &core.Event{At: t0.Add(time.Minute), Kind: kind, Subject: subject, Reason: kind, Attrs: attrs}}
}

// TestAgentProtocol drives the agent routes through the agent's own HTTP
// uplink: join, samples applied once however often sent, events turned
// into reports and acknowledgements, commands fetched, logs uploaded
// idempotently into the job's log.
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
	// The chunks are the job's log, as the REST API reads it back (its
	// TestJobLogs reads it by offset, tail and lines under isolation).
	lr, err := f.st.JobLogs().ReadLog(ctx, "ja", 0, 0)
	if err != nil || string(lr.Data) != "line 1\nline 2\n" || lr.Start != 0 || lr.End != 14 {
		t.Errorf("stored log = %q from %d to %d, %v", lr.Data, lr.Start, lr.End, err)
	}
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
