package agentapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// joinToken stores a join token for lease and returns its secret.
func (f *fixture) joinToken(t *testing.T, id, lease string) string {
	t.Helper()
	secret, hash, err := store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.Tokens().CreateToken(context.Background(), store.Token{ID: id, Hash: hash, Role: store.RoleAgent, Name: "join " + lease,
		Created: t0, Expires: t0.Add(20 * time.Minute), Kind: store.TokenJoin, Lease: lease}); err != nil {
		t.Fatal(err)
	}
	return secret
}

// lease stores a lease in state.
func (f *fixture) lease(t *testing.T, id string, state core.LeaseState) {
	t.Helper()
	ctx := context.Background()
	l := store.Lease{Lease: core.Lease{ID: id, OfferID: "idc/cd/v100x8", Mode: core.Weekly, State: core.LeaseRequested, ClientToken: id}, Requested: t0}
	if err := f.st.Leases().CreateLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if state == core.LeaseRequested {
		return
	}
	l.State, l.ProviderID = core.LeaseProvisioning, "m-"+id
	if err := f.st.Leases().UpdateLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if state != core.LeaseProvisioning {
		l.State, l.Start, l.ReadyAt = state, t0, t0
		if state.Final() {
			l.End = t0
		}
		if err := f.st.Leases().UpdateLease(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}

func status(err error) int {
	var he *link.Error
	if errors.As(err, &he) {
		return he.Status
	}
	if err == nil {
		return http.StatusOK
	}
	return -1
}

// TestJoinToken: a lease's join token joins one agent, bound to the lease,
// which gets its own credential and uses it from then on; the join token
// does nothing else and joins no second agent.
func TestJoinToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.lease(t, "L1", core.LeaseProvisioning)
	join := f.joinToken(t, "tj-1", "L1")
	var kept []string
	up := &link.HTTP{URL: f.ts.URL, Token: join, Agent: "m1", Epoch: "e1", Timeout: 5 * time.Second,
		OnCredential: func(s string) error { kept = append(kept, s); return nil }}

	// Before joining, a join token fetches nothing.
	if _, err := up.FetchCommands(ctx); status(err) != 403 {
		t.Errorf("commands with a join token: %v, want 403", err)
	}
	// It may not name another lease.
	if err := up.Heartbeat(ctx, link.Heartbeat{LeaseID: "L2"}); status(err) != 403 {
		t.Errorf("join naming another lease: %v, want 403", err)
	}
	if err := up.Heartbeat(ctx, link.Heartbeat{Source: "fake"}); err != nil {
		t.Fatalf("join: %v", err)
	}
	if len(kept) != 1 || kept[0] == join {
		t.Fatalf("credentials kept: %d, want 1 other than the join token", len(kept))
	}
	a, err := f.st.Agents().GetAgent(ctx, "m1")
	if err != nil || a.LeaseID != "L1" || a.TokenID == "" || a.TokenID == "tj-1" {
		t.Fatalf("joined agent %+v, %v: want lease L1 and its own credential", a, err)
	}
	cred, err := f.st.Tokens().GetToken(ctx, a.TokenID)
	if err != nil || cred.Kind != store.TokenAgent || cred.Agent != "m1" || cred.Lease != "L1" {
		t.Fatalf("credential %+v, %v", cred, err)
	}
	// From now on the uplink sends the credential.
	if err := up.Heartbeat(ctx, link.Heartbeat{Source: "fake"}); err != nil {
		t.Fatalf("heartbeat with the credential: %v", err)
	}
	if _, err := up.FetchCommands(ctx); err != nil {
		t.Errorf("commands with the credential: %v", err)
	}
	// The join token joins no other agent.
	other := &link.HTTP{URL: f.ts.URL, Token: join, Agent: "m2", Epoch: "e1", Timeout: 5 * time.Second}
	if err := other.Heartbeat(ctx, link.Heartbeat{}); status(err) != 403 {
		t.Errorf("second agent with a spent join token: %v, want 403", err)
	}
	// The same agent repeating its join (its reply was lost) gets a new
	// credential; the one before stops working.
	again := &link.HTTP{URL: f.ts.URL, Token: join, Agent: "m1", Epoch: "e1", Timeout: 5 * time.Second}
	if err := again.Heartbeat(ctx, link.Heartbeat{}); err != nil {
		t.Fatalf("repeated join: %v", err)
	}
	if err := up.Heartbeat(ctx, link.Heartbeat{}); status(err) != 401 {
		t.Errorf("the first credential after a repeated join: %v, want 401", err)
	}
	if err := again.Heartbeat(ctx, link.Heartbeat{}); err != nil {
		t.Errorf("the new credential: %v", err)
	}
	// An expired join token, and one of an ended lease, join nothing.
	f.lease(t, "L3", core.LeaseReleased)
	ended := &link.HTTP{URL: f.ts.URL, Token: f.joinToken(t, "tj-3", "L3"), Agent: "m3", Epoch: "e1", Timeout: 5 * time.Second}
	if err := ended.Heartbeat(ctx, link.Heartbeat{}); status(err) != 403 {
		t.Errorf("join token of an ended lease: %v, want 403", err)
	}
	f.lease(t, "L4", core.LeaseProvisioning)
	late := &link.HTTP{URL: f.ts.URL, Token: f.joinToken(t, "tj-4", "L4"), Agent: "m4", Epoch: "e1", Timeout: 5 * time.Second}
	f.clk.Advance(21 * time.Minute)
	if err := late.Heartbeat(ctx, link.Heartbeat{}); status(err) != 401 {
		t.Errorf("expired join token: %v, want 401", err)
	}
}

// TestStolenAgentToken: a stolen agent token cannot fetch another agent's
// commands (403), nor send its records, acknowledge its commands or
// heartbeat as it — whether the token is a lease's credential or a
// shared one.
func TestStolenAgentToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.lease(t, "L1", core.LeaseProvisioning)
	f.lease(t, "L2", core.LeaseProvisioning)
	victim := &link.HTTP{URL: f.ts.URL, Token: f.joinToken(t, "tj-1", "L1"), Agent: "victim", Epoch: "e1", Timeout: 5 * time.Second}
	thief := &link.HTTP{URL: f.ts.URL, Token: f.joinToken(t, "tj-2", "L2"), Agent: "thief", Epoch: "e1", Timeout: 5 * time.Second}
	for _, up := range []*link.HTTP{victim, thief} {
		if err := up.Heartbeat(ctx, link.Heartbeat{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.Agents().EnqueueCommands(ctx, store.AgentCommand{ID: "c1", Agent: "victim", Kind: store.CommandStop, Run: "r1", Spec: `{}`, Created: t0}); err != nil {
		t.Fatal(err)
	}
	// The thief's credential naming the victim.
	thief.Agent = "victim"
	if _, err := thief.FetchCommands(ctx); status(err) != 403 {
		t.Errorf("commands of another agent with a lease credential: %v, want 403", err)
	}
	if err := thief.Heartbeat(ctx, link.Heartbeat{}); status(err) != 403 {
		t.Errorf("heartbeat as another agent: %v, want 403", err)
	}
	if err := thief.SendEvents(ctx, []link.Record{eventRec(1, "job-exited", "r1", nil)}); status(err) != 403 {
		t.Errorf("events as another agent: %v, want 403", err)
	}
	if err := thief.Ack(ctx, "c1", "ok"); status(err) != 403 {
		t.Errorf("ack for another agent: %v, want 403", err)
	}
	// A shared agent token (an admin's) naming the victim.
	shared := f.uplink("victim")
	if _, err := shared.FetchCommands(ctx); status(err) != 403 {
		t.Errorf("commands of a lease's agent with a shared token: %v, want 403", err)
	}
	if err := shared.Heartbeat(ctx, link.Heartbeat{}); status(err) != 403 {
		t.Errorf("heartbeat as a lease's agent with a shared token: %v, want 403", err)
	}
	// A shared token binds the agents it joins: another shared token may
	// not speak for them while it is active.
	box := f.uplink("box-1")
	if err := box.Heartbeat(ctx, link.Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	secret, hash, _ := store.NewToken()
	if err := f.st.Tokens().CreateToken(ctx, store.Token{ID: "t-agent-2", Hash: hash, Role: store.RoleAgent, Name: "other fleet", Created: t0}); err != nil {
		t.Fatal(err)
	}
	other := &link.HTTP{URL: f.ts.URL, Token: secret, Agent: "box-1", Epoch: "e1", Timeout: 5 * time.Second}
	if _, err := other.FetchCommands(ctx); status(err) != 403 {
		t.Errorf("commands of box-1 with another shared token: %v, want 403", err)
	}
	// Once its token is revoked, box-1 may rejoin with another (rotation).
	if err := f.st.Tokens().RevokeToken(ctx, "t-agent", t0); err != nil {
		t.Fatal(err)
	}
	if err := other.Heartbeat(ctx, link.Heartbeat{}); err != nil {
		t.Errorf("rejoin after the token was revoked: %v", err)
	}
	// The victim's own credential still works.
	cmds, err := victim.FetchCommands(ctx)
	if err != nil || len(cmds) != 1 {
		t.Errorf("the victim's commands: %v, %v", cmds, err)
	}
}
