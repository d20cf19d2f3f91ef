package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// uplink returns the agent's HTTP client for agent id on f's server.
func (f *fixture) uplink(id string) *link.HTTP {
	return &link.HTTP{URL: f.ts.URL, Token: f.tokens["agent"], Agent: id, Epoch: "e1", Timeout: 5 * time.Second}
}

// TestJobLogs: a job's log, uploaded through the agent protocol the
// server mounts, read back by offset, byte tail and line tail under team
// isolation; parameters out of range are a 400 naming them.
func TestJobLogs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	up := f.uplink("node-1")
	if err := up.Heartbeat(ctx, link.Heartbeat{Offer: "idc/cd/v100x8", Source: "fake", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Agents().EnqueueCommands(ctx, store.AgentCommand{ID: "run:ja-r1", Agent: "node-1", Kind: store.CommandRun, Unit: "ja", Job: "ja", Team: "a", Run: "ja-r1", Spec: "{}", Created: t0}); err != nil {
		t.Fatal(err)
	}
	if end, err := up.SendLog(ctx, "ja-r1", 0, []byte("line 1\nline 2\n")); err != nil || end != 14 {
		t.Fatalf("log chunk: %d %v", end, err)
	}
	var lv LogView
	code, b, _ := f.call(t, "member", "GET", "/api/v1/jobs/ja/logs", "")
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
