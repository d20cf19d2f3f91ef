package agent

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link/fake"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/provider/ec2/ec2fake"
)

// TestIMDSNotice: the IMDSv2 client answers no notice on the 404, then
// the notice once it is posted.
func TestIMDSNotice(t *testing.T) {
	md := ec2fake.NewIMDS()
	defer md.Close()
	m := NewIMDS(md.URL)
	ctx := context.Background()
	if err := m.Probe(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := m.Notice(ctx); err != nil || ok {
		t.Fatalf("before a notice: %+v %v %v", n, ok, err)
	}
	at := time.Date(2026, 3, 1, 12, 2, 0, 0, time.UTC)
	md.Notice("terminate", at)
	n, ok, err := m.Notice(ctx)
	if err != nil || !ok || n.Action != "terminate" || !n.Time.Equal(at) {
		t.Fatalf("notice = %+v %v %v", n, ok, err)
	}
}

// TestIMDSProbeNowhere: where nothing answers (not on EC2) the probe
// fails within its timeout.
func TestIMDSProbeNowhere(t *testing.T) {
	start := time.Now()
	if err := NewIMDS("http://127.0.0.1:1").Probe(context.Background(), 500*time.Millisecond); err == nil {
		t.Fatal("probe of a closed port succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("probe took %s", d)
	}
}

// TestRunReportsSpotNotice: the agent reports a posted notice once, with
// its time, however often it asks.
func TestRunReportsSpotNotice(t *testing.T) {
	md := ec2fake.NewIMDS()
	defer md.Close()
	srv := fake.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{AgentID: "node-1", LeaseID: "L1", DataDir: t.TempDir(), Source: gpu.NewFake(clock.Real{}, gpu.Step{Readings: []gpu.Reading{{Index: 0, UUID: "GPU-0"}}}),
			Uplink: srv, SampleInterval: time.Hour, HeartbeatInterval: 10 * time.Millisecond, Spot: NewIMDS(md.URL), SpotInterval: 5 * time.Millisecond})
	}()
	waitFor(t, srv, "a heartbeat", func() bool { return len(srv.Heartbeats()) > 0 })
	at := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	md.Notice("terminate", at)
	waitFor(t, srv, "the spot notice", func() bool { return len(events(srv, EventSpotNotice, "node-1")) > 0 })
	seen := md.Gets()
	for md.Gets() < seen+5 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := events(srv, EventSpotNotice, "node-1")
	if len(evs) != 1 || evs[0].Attrs["reclaim_at"] != at.Format(time.RFC3339) || evs[0].Attrs["action"] != "terminate" || evs[0].Attrs["lease"] != "L1" {
		t.Errorf("spot notices = %+v", evs)
	}
}
