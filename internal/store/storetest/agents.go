package storetest

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

func testAgents(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	gpus := []store.AgentGPU{{Index: 0, UUID: "GPU-a", Model: "H100", MemTotalMiB: 81559}, {Index: 1, UUID: "GPU-b", Model: "H100", MemTotalMiB: 81559}}
	hb := store.Agent{ID: "node-1", OfferID: "idc/cd/v100x8", Version: "v1", Source: "fake", GPUs: gpus, LastSeen: at(1), Backlog: 3}
	prev, created, err := s.Agents().SaveHeartbeat(c, hb)
	ok(t, err, "join")
	if !created || prev.ID != "" {
		t.Errorf("join: created %v prev %+v, want a new agent", created, prev)
	}
	got, err := s.Agents().GetAgent(c, "node-1")
	ok(t, err, "get")
	want := hb
	want.State, want.StateAt, want.Joined, want.Running = store.AgentOK, at(1), at(1), []string{}
	diff(t, "joined agent", want, got)

	// Suspect, then a heartbeat: ok again, the lease kept when the
	// heartbeat names none, the join time kept.
	ok(t, s.Agents().SetAgentState(c, "node-1", store.AgentSuspect, at(2)), "suspect")
	ok(t, s.Agents().BindAgent(c, "node-1", "L1"), "bind")
	hb2 := hb
	hb2.LastSeen, hb2.Running, hb2.Backlog, hb2.Version = at(3), []string{"j1-r1"}, 0, "v2"
	prev, created, err = s.Agents().SaveHeartbeat(c, hb2)
	ok(t, err, "heartbeat")
	if created || prev.State != store.AgentSuspect || prev.LeaseID != "L1" {
		t.Errorf("heartbeat: created %v prev %+v, want the suspect agent on L1", created, prev)
	}
	got, err = s.Agents().GetAgent(c, "node-1")
	ok(t, err, "get after heartbeat")
	want.LeaseID, want.LastSeen, want.Running, want.Backlog, want.Version, want.StateAt = "L1", at(3), []string{"j1-r1"}, 0, "v2", at(3)
	diff(t, "agent after heartbeat", want, got)

	// TouchAgent: the same for an ok agent in one statement; nothing for
	// an agent that is not ok, or unknown.
	hbT := hb2
	hbT.LastSeen, hbT.Backlog = at(3).Add(time.Second), 9
	lease, touched, err := s.Agents().TouchAgent(c, hbT)
	ok(t, err, "touch")
	if !touched || lease != "L1" {
		t.Errorf("touch an ok agent: %v lease %q, want true on L1", touched, lease)
	}
	got, _ = s.Agents().GetAgent(c, "node-1")
	if !got.LastSeen.Equal(at(3).Add(time.Second)) || got.Backlog != 9 || got.State != store.AgentOK || got.StateAt != at(3) {
		t.Errorf("after touch: %+v", got)
	}
	if _, touched, err := s.Agents().TouchAgent(c, store.Agent{ID: "ghost", LastSeen: at(3)}); err != nil || touched {
		t.Errorf("touch unknown: %v %v", touched, err)
	}
	ok(t, s.Agents().SetAgentState(c, "node-1", store.AgentSuspect, at(3)), "suspect again")
	if _, touched, err := s.Agents().TouchAgent(c, hbT); err != nil || touched {
		t.Errorf("touch suspect: %v %v, want false (the join path writes the recovery)", touched, err)
	}
	if got, _ = s.Agents().GetAgent(c, "node-1"); got.State != store.AgentSuspect {
		t.Errorf("touch changed a suspect agent to %s", got.State)
	}
	_, _, err = s.Agents().SaveHeartbeat(c, hb2)
	ok(t, err, "heartbeat after touch")

	// A heartbeat naming a lease sets it.
	hb3 := hb2
	hb3.LeaseID, hb3.LastSeen = "L9", at(4)
	_, _, err = s.Agents().SaveHeartbeat(c, hb3)
	ok(t, err, "heartbeat with lease")
	got, _ = s.Agents().GetAgent(c, "node-1")
	if got.LeaseID != "L9" || got.StateAt != at(3) {
		t.Errorf("lease %q state_at %v, want L9 and the state time unchanged at %v", got.LeaseID, got.StateAt, at(3))
	}

	ok(t, s.Agents().AdvanceAgent(c, "node-1", "ep1", 42), "advance")
	got, _ = s.Agents().GetAgent(c, "node-1")
	if got.Epoch != "ep1" || got.AppliedSeq != 42 {
		t.Errorf("after advance: epoch %q seq %d", got.Epoch, got.AppliedSeq)
	}
	_, _, err = s.Agents().SaveHeartbeat(c, hb3)
	ok(t, err, "heartbeat after advance")
	if got, _ = s.Agents().GetAgent(c, "node-1"); got.AppliedSeq != 42 {
		t.Errorf("a heartbeat reset applied seq to %d", got.AppliedSeq)
	}

	// Listing by state and lease, paginated in join order.
	for i, id := range []string{"node-2", "node-3", "node-4"} {
		_, _, err := s.Agents().SaveHeartbeat(c, store.Agent{ID: id, LastSeen: at(5 + i)})
		ok(t, err, "join "+id)
	}
	ok(t, s.Agents().SetAgentState(c, "node-3", store.AgentDown, at(9)), "down")
	var ids []string
	f := store.AgentFilter{Limit: 2}
	for {
		p, err := s.Agents().ListAgents(c, f)
		ok(t, err, "list")
		for _, a := range p.Items {
			ids = append(ids, a.ID)
		}
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	diff(t, "agents in join order", []string{"node-1", "node-2", "node-3", "node-4"}, ids)
	p, err := s.Agents().ListAgents(c, store.AgentFilter{States: []store.AgentState{store.AgentDown}})
	ok(t, err, "list down")
	if len(p.Items) != 1 || p.Items[0].ID != "node-3" {
		t.Errorf("down agents = %+v", p.Items)
	}
	p, err = s.Agents().ListAgents(c, store.AgentFilter{LeaseID: "L9"})
	ok(t, err, "list by lease")
	if len(p.Items) != 1 || p.Items[0].ID != "node-1" {
		t.Errorf("agents on L9 = %+v", p.Items)
	}
	ok(t, s.Agents().BindAgent(c, "node-1", ""), "unbind")
	if got, _ = s.Agents().GetAgent(c, "node-1"); got.LeaseID != "" {
		t.Errorf("unbound agent on lease %q", got.LeaseID)
	}

	// Missing agents and bad input.
	_, err = s.Agents().GetAgent(c, "nope")
	wantErr(t, err, store.ErrNotFound, "get missing")
	wantErr(t, s.Agents().SetAgentState(c, "nope", store.AgentOK, at(1)), store.ErrNotFound, "state of missing")
	wantErr(t, s.Agents().BindAgent(c, "nope", "L1"), store.ErrNotFound, "bind missing")
	wantField(t, s.Agents().SetAgentState(c, "node-1", "asleep", at(1)), "state", "asleep", "bad state")
	_, _, err = s.Agents().SaveHeartbeat(c, store.Agent{ID: "", LastSeen: at(1)})
	wantField(t, err, "agent", "", "empty id")
	_, _, err = s.Agents().SaveHeartbeat(c, store.Agent{ID: "x", LastSeen: at(1), GPUs: []store.AgentGPU{{Index: -1}}})
	wantField(t, err, "gpus[0].index", "-1", "negative gpu index")
	_, err = s.Agents().ListAgents(c, store.AgentFilter{States: []store.AgentState{"bogus"}})
	wantField(t, err, "state", "bogus", "list bad state")
}

func testAgentCommands(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	for _, id := range []string{"n1", "n2"} {
		_, _, err := s.Agents().SaveHeartbeat(c, store.Agent{ID: id, LastSeen: at(0)})
		ok(t, err, "join "+id)
	}
	run := store.AgentCommand{ID: "run:j1-r1", Agent: "n1", Kind: store.CommandRun, Unit: "j1", Job: "j1", Team: "ml", Run: "j1-r1", Spec: `{"id":"j1-r1"}`, Reason: "placed", Created: at(1)}
	ckpt := store.AgentCommand{ID: "checkpoint:j1-r1:1", Agent: "n1", Kind: store.CommandCheckpoint, Unit: "j1", Job: "j1", Team: "ml", Run: "j1-r1", Spec: "{}", Reason: "reclaim notice", Created: at(2)}
	other := store.AgentCommand{ID: "run:j2-r1", Agent: "n2", Kind: store.CommandRun, Unit: "j2", Job: "j2", Run: "j2-r1", Spec: "{}", Created: at(2)}
	ok(t, s.Agents().EnqueueCommands(c, run, ckpt, other), "enqueue")
	// Queueing again (a loop tick retried) adds nothing and changes nothing.
	again := run
	again.Reason = "changed"
	ok(t, s.Agents().EnqueueCommands(c, again), "enqueue again")
	pend, err := s.Agents().PendingCommands(c, "n1")
	ok(t, err, "pending")
	diff(t, "pending of n1", []store.AgentCommand{run, ckpt}, pend)

	ok(t, s.Agents().AckCommand(c, "n1", run.ID, at(3), "ok"), "ack")
	ok(t, s.Agents().AckCommand(c, "n1", run.ID, at(4), "error: late"), "ack twice")
	got, err := s.Agents().GetCommand(c, run.ID)
	ok(t, err, "get")
	want := run
	want.Acked, want.Result = at(3), "ok"
	diff(t, "acked command keeps its first ack", want, got)
	pend, _ = s.Agents().PendingCommands(c, "n1")
	diff(t, "pending after ack", []store.AgentCommand{ckpt}, pend)

	// Another agent cannot acknowledge n1's command.
	wantErr(t, s.Agents().AckCommand(c, "n2", ckpt.ID, at(3), "ok"), store.ErrNotFound, "ack by another agent")
	wantErr(t, s.Agents().EnqueueCommands(c, store.AgentCommand{ID: "x", Agent: "ghost", Kind: store.CommandKill, Created: at(1)}), store.ErrNotFound, "command for unknown agent")
	bad := run
	bad.ID, bad.Kind = "bad", "reboot"
	wantField(t, s.Agents().EnqueueCommands(c, bad), "command.kind", "reboot", "bad kind")
	_, err = s.Agents().GetCommand(c, "nope")
	wantErr(t, err, store.ErrNotFound, "get missing command")

	// Reports: stored in order, consumed up to a sequence number.
	rs := []store.AgentReport{
		{Agent: "n1", Kind: "job-started", Run: "j1-r1", At: at(1), Reason: "started", Attrs: map[string]string{"pid": "7"}},
		{Agent: "n1", Kind: "job-exited", Run: "j1-r1", At: at(5), Reason: "exit 0", Attrs: map[string]string{"exit_code": "0"}},
		{Agent: "n2", Kind: "job-exited", Run: "j2-r1", At: at(6), Reason: "exit 3", Attrs: map[string]string{"exit_code": "3"}},
	}
	ok(t, s.Agents().AppendReports(c, rs...), "append reports")
	got2, err := s.Agents().PendingReports(c, 0)
	ok(t, err, "pending reports")
	if len(got2) != 3 {
		t.Fatalf("pending reports = %+v", got2)
	}
	for i := range got2 {
		if i > 0 && got2[i].Seq <= got2[i-1].Seq {
			t.Errorf("report %d seq %d after %d", i, got2[i].Seq, got2[i-1].Seq)
		}
		rs[i].Seq = got2[i].Seq
	}
	diff(t, "reports", rs, got2)
	ok(t, s.Agents().DeleteReports(c, []int64{got2[1].Seq, got2[0].Seq}), "delete reports")
	ok(t, s.Agents().AppendReports(c, store.AgentReport{Agent: "n1", Kind: "job-checkpoint", Run: "j1-r1", At: at(7)}), "append after delete")
	got3, err := s.Agents().PendingReports(c, 0)
	ok(t, err, "pending after delete")
	if len(got3) != 2 || got3[0].Seq != got2[2].Seq || got3[1].Seq <= got2[2].Seq || got3[1].Kind != "job-checkpoint" {
		t.Errorf("after delete: %+v", got3)
	}
	wantField(t, s.Agents().AppendReports(c, store.AgentReport{Agent: "n1", Kind: "x"}), "report.at", "", "report without time")
	_, err = s.Agents().PendingReports(c, -1)
	wantField(t, err, "limit", "-1", "bad report limit")

	// A command, a report and a state change in one transaction roll
	// back together.
	err = s.Tx(c, func(tx store.Tx) error {
		if err := tx.Agents().EnqueueCommands(c, store.AgentCommand{ID: "kill:j1-r1", Agent: "n1", Kind: store.CommandKill, Created: at(8)}); err != nil {
			return err
		}
		if err := tx.Agents().SetAgentState(c, "n1", store.AgentDown, at(8)); err != nil {
			return err
		}
		return store.ErrConflict
	})
	wantErr(t, err, store.ErrConflict, "rolled back tx")
	if _, err := s.Agents().GetCommand(c, "kill:j1-r1"); err == nil {
		t.Error("a rolled back command was kept")
	}
	if a, _ := s.Agents().GetAgent(c, "n1"); a.State != store.AgentOK {
		t.Errorf("a rolled back state change was kept: %s", a.State)
	}
}
