package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
)

// TestServeSimTakesHandStartedAgent: under the default serve (the sim
// provider), an agent started by hand with a catalog offer and without
// --lease joins as a free machine, and a submitted job runs on it (its
// command's output is the agent's GPU) without anything being rented —
// the sim's machines boot in an hour here, so a rented one could not
// have run it. An agent started without --offer or --lease shows in
// nodes as unbound, saying why, and gets no work.
func TestServeSimTakesHandStartedAgent(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	token, base, stop := serveWith(t, "--tick", "100ms", "--sim-delay", "1h")
	defer stop()
	c, err := client.New(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.CreateTeam(ctx, api.TeamRequest{ID: "ml", Name: "ML"}); err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Secret string `json:"secret"`
	}
	if code, b := serveCall(t, base, token, "POST", "/api/v1/tokens", `{"role":"agent","name":"by hand"}`); code != 201 || json.Unmarshal([]byte(b), &tok) != nil {
		t.Fatalf("agent token: %d %s", code, b)
	}
	cat, err := loadCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	offer := ""
	for _, o := range cat.Offers {
		if o.GPUs == 1 {
			offer = o.ID
			break
		}
	}
	if offer == "" {
		t.Fatal("no one-GPU offer in the demo catalog")
	}
	agents := make(chan int, 2)
	for _, a := range []struct{ id, offer string }{{"box-1", offer}, {"box-0", ""}} {
		args := []string{"agent", "--server", base, "--token", tok.Secret, "--gpu-source", "fake", "--data-dir", filepath.Join(dir, a.id),
			"--agent-id", a.id, "--sample-interval", "100ms", "--heartbeat-interval", "100ms"}
		if a.offer != "" {
			args = append(args, "--offer", a.offer)
		}
		go func() { agents <- run(ctx, args, io.Discard, io.Discard) }()
	}
	defer func() {
		cancel()
		for range 2 {
			select {
			case <-agents:
			case <-time.After(20 * time.Second):
				t.Error("an agent did not stop")
			}
		}
	}()
	// The job is submitted once box-1 has joined: a tick between the
	// submission and its join would rightly rent a machine for the job.
	for joined := time.Now().Add(30 * time.Second); ; {
		nodes, err := c.ListNodes(ctx, client.PageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(nodes.Nodes, func(n api.NodeView) bool { return n.ID == "box-1" }) {
			break
		}
		if time.Now().After(joined) {
			t.Fatal("box-1 did not join within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	marker := filepath.Join(dir, "ran")
	if _, _, err := c.SubmitJob(ctx, api.JobRequest{ID: "j1", Team: "ml", GPUs: 1, EstDurationSeconds: 60,
		Command: []string{"sh", "-c", "echo $CUDA_VISIBLE_DEVICES > " + marker}}, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := c.GetJob(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		if j.State == "succeeded" {
			break
		}
		if j.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("j1 %s", j.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var runs struct{ Events []api.EventView }
	if code, b := serveCall(t, base, token, "GET", "/api/v1/events?kind=agent.job-started&subject=j1", ""); code != 200 || json.Unmarshal([]byte(b), &runs) != nil {
		t.Fatalf("events: %d %s", code, b)
	}
	if len(runs.Events) != 1 || runs.Events[0].Attrs["agent"] != "box-1" {
		t.Errorf("j1's starts: %+v, want one, on box-1", runs.Events)
	}
	var leases api.LeasesPage
	if code, b := serveCall(t, base, token, "GET", "/api/v1/leases", ""); code != 200 || json.Unmarshal([]byte(b), &leases) != nil {
		t.Fatalf("leases: %d %s", code, b)
	}
	if len(leases.Leases) != 1 || !strings.HasPrefix(leases.Leases[0].ID, "J") || leases.Leases[0].OfferID != offer {
		t.Errorf("leases %+v, want one, a joined lease of %s: nothing rented", leases.Leases, offer)
	}
	nodes, err := c.ListNodes(ctx, client.PageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range nodes.Nodes {
		got[n.ID] = n.Binding
	}
	if !strings.HasPrefix(got["box-0"], "unbound: no offer") {
		t.Errorf("box-0 (no --offer, no --lease) binding %q, want unbound: no offer", got["box-0"])
	}
	if b := got["box-1"]; !strings.HasPrefix(b, "lease J") && !strings.HasPrefix(b, "free: a machine of "+offer) {
		t.Errorf("box-1 binding %q, want its joined lease, or free again", b)
	}
}
