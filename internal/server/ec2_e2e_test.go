package server

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpufleet/gpufleet/internal/agent"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider/ec2"
	"github.com/gpufleet/gpufleet/internal/provider/ec2/ec2fake"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// ec2Machine is one fake instance's agent and metadata service: what
// cloud-init would start from the user data.
type ec2Machine struct {
	lease, instance string
	imds            *ec2fake.IMDS
	cancel          context.CancelFunc
	done            chan struct{}
}

// TestEC2EndToEnd runs the control loop on the ec2 provider against the
// local EC2 endpoint (ec2fake), with a real agent started for each
// instance it runs, as the user data would: an on-demand and a spot
// instance for two jobs; a restart of the loop with a new provider in
// between (reconciled by tag: no duplicate instance); a spot notice from
// the spot instance's IMDS that its agent reports, giving the lease its
// ReclaimAt and the run its checkpoint; the interruption, after which the
// job is requeued, resumes from its checkpoint and succeeds; and the
// idle on-demand instance released, which terminates it.
func TestEC2EndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fleet{t: t, ckpt: t.TempDir(), agents: map[string]*fleetAgent{}, ctx: ctx, cancel: cancel}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ec2.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f.st = st
	clk := clock.Real{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if f.admin, err = api.EnsureAdminToken(ctx, st, clk); err != nil {
		t.Fatal(err)
	}
	if err := st.Teams().CreateTeam(ctx, core.Team{ID: "ml", Name: "ML", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	f.member = f.token(store.RoleMember, "ml")
	f.agentT = f.token(store.RoleAgent, "")
	const offer = "aws/us-east-1/g5.xlarge"
	offers := []core.Offer{{ID: offer, Provider: "aws", Region: "us-east-1", InstanceType: "g5.xlarge", GPUModel: "A100", GPUs: 1, GPUMemMiB: 40960,
		VCPUs: 4, MemoryMiB: 16384, Currency: "USD", Plans: []core.PricePlan{
			{Mode: core.OnDemand, Price: 2_000_000, Per: core.Hour, Granularity: 1},
			{Mode: core.Spot, Price: 600_000, Per: core.Hour, Granularity: 1}}}}
	cat := &pricing.Catalog{Currency: "USD", Offers: offers}
	f.api = httptest.NewServer(api.New(cat, clk, log, api.WithStore(st), api.WithRateLimit(httpapi.RateLimit{})))
	defer f.api.Close()

	cloud := ec2fake.New()
	defer cloud.Close()
	var mu sync.Mutex
	machines := map[string]*ec2Machine{} // by lease
	cloud.OnRun(func(in ec2fake.Instance) {
		// cloud-init: the user data starts the agent of the lease.
		lease := in.Tags[ec2.TagLease]
		for _, want := range []string{"--lease=" + lease, "--offer=" + offer, "--server=" + f.api.URL, "--imds=auto"} {
			if !strings.Contains(in.UserData, want) {
				t.Errorf("user data of %s lacks %q", in.ID, want)
			}
		}
		m := &ec2Machine{lease: lease, instance: in.ID, imds: ec2fake.NewIMDS(), done: make(chan struct{})}
		dir := t.TempDir()
		epoch, err := agent.SpoolEpoch(dir)
		if err != nil {
			t.Error(err)
			return
		}
		actx, acancel := context.WithCancel(ctx)
		m.cancel = acancel
		up := &link.HTTP{URL: f.api.URL, Token: f.agentT, Agent: lease, Epoch: epoch, Timeout: 2 * time.Second}
		cfg := agent.Config{AgentID: lease, LeaseID: lease, OfferID: offer, DataDir: dir, Source: &countingSource{idle: true}, Uplink: up,
			SampleInterval: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, LogInterval: 100 * time.Millisecond,
			BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second, TermGrace: time.Second, Seed: 7,
			Spot: agent.NewIMDS(m.imds.URL), SpotInterval: 20 * time.Millisecond}
		mu.Lock()
		machines[lease] = m
		mu.Unlock()
		go func() {
			defer close(m.done)
			if err := agent.Run(actx, cfg); err != nil {
				t.Errorf("agent of %s: %v", lease, err)
			}
		}()
	})
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range machines {
			m.cancel()
			<-m.done
			m.imds.Close()
		}
	}()

	newProvider := func() *ec2.Provider {
		p, err := ec2.New(ctx, ec2.Config{Region: "us-east-1", Cluster: "e2e", DefaultAMI: "ami-0123456789abcdef0", Endpoint: cloud.URL,
			PollInterval: time.Nanosecond, Timeout: 5 * time.Second, ServerURL: f.api.URL, AgentToken: f.agentT,
			Offer: func(id string) (*core.Offer, bool) { o, err := cat.Offer(id); return o, err == nil }},
			awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")),
			awsconfig.WithSharedConfigFiles(nil), awsconfig.WithSharedCredentialsFiles(nil))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	eng := engine.Config{}
	eng.Fleet.WaitTarget = map[core.Tier]time.Duration{core.TierCore: 0, core.TierRegular: 0, core.TierOffline: 0}
	eng.Fleet.MinIdle, eng.Fleet.MinHold = 300*time.Millisecond, 300*time.Millisecond
	agentCfg := AgentConfig{SuspectAfter: suspectAfter, DownAfter: downAfter, CheckpointRoot: f.ckpt, Grace: 2 * time.Second}
	startLoop := func() (stop func()) {
		loop, err := NewLoop(Config{Store: st, Provider: newProvider(), Offers: offers, Clock: clk, Log: log, Engine: eng, Tick: fleetTick, Agents: agentCfg})
		if err != nil {
			t.Fatal(err)
		}
		lctx, lcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = loop.Run(lctx) }()
		return func() { lcancel(); <-done }
	}
	stop := startLoop()
	defer func() { stop() }()

	leaseOf := func(job string) store.Lease {
		units, err := st.Units().ListUnits(ctx, job)
		if err != nil || len(units) == 0 || len(units[0].Parts) == 0 {
			return store.Lease{}
		}
		l, _ := st.Leases().GetLease(ctx, units[0].Parts[0].LeaseID)
		return l
	}
	running := func(job string) bool {
		units, err := st.Units().ListUnits(ctx, job)
		return err == nil && len(units) == 1 && units[0].State == core.JobRunning && f.agentOf(job) != ""
	}

	// On-demand and spot.
	f.submit("steady", 60, "")
	f.submit("spotty", 200, `,"interruptible":true`)
	f.waitFor("both jobs to run on their instances", func() bool { return running("steady") && running("spotty") })
	if m := leaseOf("steady").Mode; m != core.OnDemand {
		t.Errorf("steady runs on a %s lease", m)
	}
	spotLease := leaseOf("spotty")
	if spotLease.Mode != core.Spot {
		t.Fatalf("spotty runs on a %s lease", spotLease.Mode)
	}
	if in, _ := cloud.Instance(spotLease.ProviderID); !in.Spot || in.Tags[ec2.TagLease] != spotLease.ID {
		t.Errorf("spot lease %s's instance %+v", spotLease.ID, in)
	}
	if in, _ := cloud.Instance(leaseOf("steady").ProviderID); in.Spot {
		t.Errorf("the on-demand lease runs a spot instance")
	}
	if cloud.Runs() != 2 {
		t.Fatalf("%d instances for 2 jobs", cloud.Runs())
	}

	// The server restarts: a new provider reconciles by tag.
	stop()
	described := cloud.Calls("DescribeInstances")
	stop = startLoop()
	f.waitFor("a few ticks after the restart", func() bool { return cloud.Calls("DescribeInstances") > described+10 })
	if cloud.Runs() != 2 || !running("spotty") {
		t.Fatalf("after the restart: %d instances, spotty running %v", cloud.Runs(), running("spotty"))
	}

	// The spot notice: the agent reads it from IMDS and reports it.
	f.waitFor("a few steps", func() bool { return strings.Contains(f.logs("spotty"), "step 10\n") })
	mu.Lock()
	sm := machines[spotLease.ID]
	mu.Unlock()
	reclaimAt := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Second).Add(time.Second)
	sm.imds.Notice("terminate", reclaimAt)
	f.waitFor("the lease's ReclaimAt", func() bool {
		l, _ := st.Leases().GetLease(ctx, spotLease.ID)
		return l.ReclaimAt.Equal(reclaimAt)
	})
	f.waitFor("the checkpoint signal on the spot run", func() bool {
		for _, e := range f.events("agent.job-signal") {
			if e.Attrs["agent"] == spotLease.ID && strings.Contains(e.Reason, "reclaim") {
				return true
			}
		}
		return false
	})
	f.waitFor("the checkpoint in the log", func() bool { return strings.Contains(f.logs("spotty"), "checkpointed at ") })

	// The interruption: EC2 ends the instance and its agent with it.
	time.Sleep(time.Until(reclaimAt))
	if err := cloud.Interrupt(spotLease.ProviderID); err != nil {
		t.Fatal(err)
	}
	sm.cancel()
	f.waitFor("the spot lease reclaimed", func() bool {
		l, _ := st.Leases().GetLease(ctx, spotLease.ID)
		return l.State == core.LeaseReclaimed
	})
	f.waitFor("spotty to succeed", func() bool { return f.job("spotty").State == "succeeded" })
	units, _ := st.Units().ListUnits(ctx, "spotty")
	if len(units) != 1 || units[0].Reclaims != 1 {
		t.Errorf("spotty's units = %+v, want one reclaim", units)
	}
	f.waitFor("spotty's whole log", func() bool { return strings.Contains(f.logs("spotty"), "done at 200") })
	if text := f.logs("spotty"); !strings.Contains(text, "resumed at ") {
		t.Errorf("spotty's log shows no resume from its checkpoint:\n%s", text)
	}

	// Release: steady's instance, idle once steady is done, is terminated.
	f.waitFor("steady to succeed", func() bool { return f.job("steady").State == "succeeded" })
	var od string
	for _, e := range f.events("unit.succeeded") {
		if strings.HasPrefix(e.Subject, "steady") {
			od = e.Attrs["agent"]
		}
	}
	l, err := st.Leases().GetLease(ctx, od)
	if err != nil {
		t.Fatalf("steady's lease %q: %v", od, err)
	}
	f.waitFor("steady's instance terminated", func() bool {
		in, _ := cloud.Instance(l.ProviderID)
		return in.State == "shutting-down" || in.State == "terminated"
	})
	if got := cloud.Runs(); got < 2 || got > 3 {
		t.Errorf("%d instances in all, want 2 (or 3: a new one for the requeued spot job)", got)
	}
	t.Logf("%d RunInstances made instances, %d TerminateInstances, %d DescribeInstances", cloud.Runs(), cloud.Calls("TerminateInstances"), cloud.Calls("DescribeInstances"))
}
