package ec2_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/ec2"
	"github.com/gpufleet/gpufleet/internal/provider/ec2/ec2fake"
)

func offers() []core.Offer {
	return []core.Offer{
		{ID: "aws/us-east-1/g5.xlarge", Provider: "aws", Region: "us-east-1", InstanceType: "g5.xlarge", GPUModel: "NVIDIA A10G", GPUs: 1},
		{ID: "aws/us-east-1/p4d.24xlarge", Provider: "aws", Region: "us-east-1", InstanceType: "p4d.24xlarge", GPUModel: "NVIDIA A100", GPUs: 8},
		{ID: "aws/us-west-2/g5.xlarge", Provider: "aws", Region: "us-west-2", InstanceType: "g5.xlarge", GPUModel: "NVIDIA A10G", GPUs: 1},
		{ID: "lab/local/a100", Provider: "lab", Region: "local", InstanceType: "box", GPUModel: "NVIDIA A100", GPUs: 1},
	}
}

func lookup(id string) (*core.Offer, bool) {
	for _, o := range offers() {
		if o.ID == id {
			return &o, true
		}
	}
	return nil, false
}

func testConfig(endpoint string) ec2.Config {
	return ec2.Config{Region: "us-east-1", Cluster: "test", DefaultAMI: "ami-0123456789abcdef0",
		AMI:      map[string]string{"aws/us-east-1/p4d.24xlarge": "ami-0fedcba9876543210"},
		SubnetID: "subnet-1", SecurityGroupIDs: []string{"sg-1", "sg-2"}, KeyName: "ops", InstanceProfile: "gpufleet-agent",
		Endpoint: endpoint, PollInterval: time.Nanosecond, Timeout: 10 * time.Second, Offer: lookup}
}

// newProvider is a provider over the fake, credentials static.
func newProvider(t *testing.T, cfg ec2.Config) *ec2.Provider {
	t.Helper()
	p, err := ec2.New(context.Background(), cfg,
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")),
		awsconfig.WithSharedConfigFiles(nil), awsconfig.WithSharedCredentialsFiles(nil))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func boot(lease string) provider.Bootstrap {
	return provider.Bootstrap{ServerURL: "http://10.0.0.1:8080", LeaseID: lease, JoinToken: "gpfj_" + lease + "_secret",
		Expires: time.Now().Add(10 * time.Minute), BinaryURL: "http://10.0.0.1:8080/download/gpufleet"}
}

// TestAcquireOnDemandAndSpot: each lease is one instance, run with its
// lease id as client token, tagged, with user data that starts the
// agent of that lease; a spot lease is a one-time spot instance that
// terminates on interruption.
func TestAcquireOnDemandAndSpot(t *testing.T) {
	f := ec2fake.New()
	defer f.Close()
	p := newProvider(t, testConfig(f.URL))
	ctx := context.Background()
	od, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.OnDemand, Bootstrap: boot("L1")})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "aws/us-east-1/p4d.24xlarge", Mode: core.Spot, Bootstrap: boot("L2")})
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Machine{ProviderID: od.ProviderID, ClientToken: "L1", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.OnDemand,
		State: provider.Provisioning, LaunchedAt: od.LaunchedAt}
	if diff := cmp.Diff(want, od); diff != "" || od.LaunchedAt.IsZero() {
		t.Errorf("on-demand machine (-want +got):\n%s", diff)
	}
	if sp.Mode != core.Spot || sp.ClientToken != "L2" || sp.State != provider.Provisioning {
		t.Errorf("spot machine = %+v", sp)
	}
	a, _ := f.Instance(od.ProviderID)
	b, _ := f.Instance(sp.ProviderID)
	if a.Spot || !b.Spot || b.SpotType != "one-time" || b.Interruption != "terminate" {
		t.Errorf("market options: on-demand %+v, spot %+v", a, b)
	}
	if a.ClientToken != "L1" || a.ImageID != "ami-0123456789abcdef0" || b.ImageID != "ami-0fedcba9876543210" || a.InstanceType != "g5.xlarge" ||
		a.SubnetID != "subnet-1" || a.KeyName != "ops" || a.Profile != "gpufleet-agent" || !cmp.Equal(a.Groups, []string{"sg-1", "sg-2"}) || a.HTTPTokens != "required" {
		t.Errorf("run parameters: %+v", a)
	}
	wantTags := map[string]string{"gpufleet:lease": "L1", "gpufleet:offer": "aws/us-east-1/g5.xlarge", "gpufleet:mode": "on-demand", "gpufleet:cluster": "test", "Name": "gpufleet L1"}
	if diff := cmp.Diff(wantTags, a.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	for _, s := range []string{"--server=http://10.0.0.1:8080", "--lease=L1", "--offer=aws/us-east-1/g5.xlarge", "--imds=auto",
		"GPUFLEET_JOIN_TOKEN=gpfj_L1_secret", "BINARY_URL='http://10.0.0.1:8080/download/gpufleet'", "systemctl enable --now gpufleet-agent.service"} {
		if !strings.Contains(a.UserData, s) {
			t.Errorf("user data lacks %q:\n%s", s, a.UserData)
		}
	}
	if strings.Contains(a.UserData, "--token") {
		t.Errorf("the join token is on the agent's command line:\n%s", a.UserData)
	}
	if f.Unsigned() != 0 {
		t.Errorf("%d requests without SigV4", f.Unsigned())
	}
}

// TestRestartMakesNoDuplicate: a second provider (the server restarted)
// lists the cluster's instances with their leases from the tags, and an
// acquire of a lease it already has — with another join token, as a
// restarted server mints — returns that instance: one RunInstances made
// an instance in all.
func TestRestartMakesNoDuplicate(t *testing.T) {
	f := ec2fake.New()
	defer f.Close()
	ctx := context.Background()
	p := newProvider(t, testConfig(f.URL))
	m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.Spot, Bootstrap: boot("L1")})
	if err != nil {
		t.Fatal(err)
	}
	// Another cluster's instance is not ours.
	other := testConfig(f.URL)
	other.Cluster = "other"
	if _, err := newProvider(t, other).Acquire(ctx, provider.AcquireRequest{ClientToken: "X1", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.OnDemand, Bootstrap: boot("X1")}); err != nil {
		t.Fatal(err)
	}

	p2 := newProvider(t, testConfig(f.URL))
	ms, err := p2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].ProviderID != m.ProviderID || ms[0].ClientToken != "L1" || ms[0].OfferID != "aws/us-east-1/g5.xlarge" || ms[0].Mode != core.Spot {
		t.Fatalf("List after restart = %+v", ms)
	}
	// The first poll after the restart reports the machine List showed
	// provisioning that is running now.
	evs, err := p2.Poll(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Machine.State != provider.Ready {
		t.Errorf("first poll after restart = %+v, want L1 ready", evs)
	}
	b := boot("L1")
	b.JoinToken = "gpfj_another"
	again, err := p2.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.Spot, Bootstrap: b})
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderID != m.ProviderID {
		t.Errorf("acquire after restart gave %s, want %s", again.ProviderID, m.ProviderID)
	}
	if f.Runs() != 2 { // L1 and the other cluster's X1
		t.Errorf("%d instances created, want 2 (no duplicate of L1)", f.Runs())
	}
}

// TestCapacityError: InsufficientInstanceCapacity is ErrCapacity, asked
// once (not retried by the SDK), and the next acquire once capacity is
// back makes the instance.
func TestCapacityError(t *testing.T) {
	f := ec2fake.New()
	defer f.Close()
	p := newProvider(t, testConfig(f.URL))
	f.Capacity("p4d.24xlarge", false)
	req := provider.AcquireRequest{ClientToken: "L9", OfferID: "aws/us-east-1/p4d.24xlarge", Mode: core.Spot, Bootstrap: boot("L9")}
	_, err := p.Acquire(context.Background(), req)
	if !errors.Is(err, provider.ErrCapacity) {
		t.Fatalf("err = %v, want ErrCapacity", err)
	}
	if !strings.Contains(err.Error(), "capacity") || f.Calls("RunInstances") != 1 || f.Runs() != 0 {
		t.Errorf("err %v after %d RunInstances, %d created", err, f.Calls("RunInstances"), f.Runs())
	}
	f.Capacity("p4d.24xlarge", true)
	if _, err := p.Acquire(context.Background(), req); err != nil || f.Runs() != 1 {
		t.Errorf("with capacity back: %v, %d created", err, f.Runs())
	}
}

// TestOffersAndRefusals: only AWS offers of the region are rentable; a
// request for another is refused before any call.
func TestOffersAndRefusals(t *testing.T) {
	f := ec2fake.New()
	defer f.Close()
	p := newProvider(t, testConfig(f.URL))
	if got, want := p.Offers(offers()), []string{"aws/us-east-1/g5.xlarge", "aws/us-east-1/p4d.24xlarge"}; !cmp.Equal(got, want) {
		t.Errorf("Offers = %v, want %v", got, want)
	}
	for _, offer := range []string{"aws/us-west-2/g5.xlarge", "lab/local/a100", "nope"} {
		if _, err := p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "L", OfferID: offer, Mode: core.OnDemand, Bootstrap: boot("L")}); err == nil {
			t.Errorf("acquire %s: no error", offer)
		}
	}
	if _, err := p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "L", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.OnDemand}); err == nil ||
		!strings.Contains(err.Error(), "join token") {
		t.Errorf("acquire without a bootstrap: %v", err)
	}
	if f.Calls("RunInstances") != 0 {
		t.Errorf("%d RunInstances for refused requests", f.Calls("RunInstances"))
	}
}

// TestLifecycle: pending → ready by poll; a spot interruption is
// reclaimed, listed until released; a release terminates, twice is no
// error, and a released instance is neither listed nor reported; an
// instance terminated by someone else is failed.
func TestLifecycle(t *testing.T) {
	f := ec2fake.New()
	defer f.Close()
	ctx := context.Background()
	p := newProvider(t, testConfig(f.URL))
	od, _ := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.OnDemand, Bootstrap: boot("L1")})
	sp, _ := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L2", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.Spot, Bootstrap: boot("L2")})
	third, _ := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L3", OfferID: "aws/us-east-1/g5.xlarge", Mode: core.Monthly, Bootstrap: boot("L3")})
	states := func() map[string]provider.State {
		t.Helper()
		evs, err := p.Poll(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]provider.State{}
		for _, e := range evs {
			out[e.Machine.ProviderID] = e.Machine.State
		}
		return out
	}
	if got := states(); len(got) != 0 {
		t.Errorf("first poll (pending still) = %v", got)
	}
	want := map[string]provider.State{od.ProviderID: provider.Ready, sp.ProviderID: provider.Ready, third.ProviderID: provider.Ready}
	if diff := cmp.Diff(want, states()); diff != "" {
		t.Errorf("second poll (-want +got):\n%s", diff)
	}
	if in, _ := f.Instance(third.ProviderID); in.Spot {
		t.Errorf("a monthly lease ran a spot instance")
	}
	if err := f.Interrupt(sp.ProviderID); err != nil {
		t.Fatal(err)
	}
	f.SetState(third.ProviderID, "terminated", "Client.UserInitiatedShutdown") // someone else's doing
	want = map[string]provider.State{sp.ProviderID: provider.Reclaimed, third.ProviderID: provider.Failed}
	if diff := cmp.Diff(want, states()); diff != "" {
		t.Errorf("after the interruption (-want +got):\n%s", diff)
	}
	if err := p.Release(ctx, od.ProviderID); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx, od.ProviderID); err != nil {
		t.Errorf("second release: %v", err)
	}
	if in, _ := f.Instance(od.ProviderID); in.State != "shutting-down" {
		t.Errorf("released instance is %s", in.State)
	}
	ms, _ := p.List(ctx)
	listed := map[string]provider.State{}
	for _, m := range ms {
		listed[m.ProviderID] = m.State
	}
	want = map[string]provider.State{sp.ProviderID: provider.Reclaimed, third.ProviderID: provider.Failed}
	if diff := cmp.Diff(want, listed); diff != "" {
		t.Errorf("List after release (-want +got):\n%s", diff)
	}
	if got := states(); len(got) != 0 {
		t.Errorf("poll after release = %v", got)
	}
	for _, id := range []string{sp.ProviderID, third.ProviderID} {
		if err := p.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if ms, _ := p.List(ctx); len(ms) != 0 {
		t.Errorf("List after every release = %+v", ms)
	}
	if err := p.Release(ctx, "i-00000000000000999"); err != nil {
		t.Errorf("release of an unknown instance: %v", err)
	}
}

// TestUserDataIsShell: the script parses as bash, and a bootstrap value
// that would end its quoting is refused.
func TestUserDataIsShell(t *testing.T) {
	ud, err := ec2.UserData(ec2.Script{Bootstrap: boot("L1"), OfferID: "aws/us-east-1/g5.xlarge", Args: []string{"--gpu-source=nvml"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ud, "#!/bin/bash\n") || !strings.Contains(ud, "--gpu-source=nvml") {
		t.Errorf("user data:\n%s", ud)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		path := filepath.Join(t.TempDir(), "ud.sh")
		if err := os.WriteFile(path, []byte(ud), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s", err, out)
		}
	}
	bad := boot("L1")
	bad.JoinToken = "x'; rm -rf / #"
	if _, err := ec2.UserData(ec2.Script{Bootstrap: bad, OfferID: "o"}); err == nil {
		t.Error("a quote in the token was accepted")
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ec2.ParseConfig([]byte(`
region: us-east-1
cluster: prod
default_ami: ami-0123456789abcdef0
ami:
  aws/us-east-1/p4d.24xlarge: ami-0fedcba9876543210
subnet: subnet-0abc
security_groups: [sg-1]
key_name: ops
instance_profile: gpufleet-agent
poll_interval: 30s
agent_args: [--gpu-source=nvml]
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "us-east-1" || cfg.Cluster != "prod" || cfg.PollInterval != 30*time.Second || cfg.AMI["aws/us-east-1/p4d.24xlarge"] != "ami-0fedcba9876543210" ||
		cfg.SubnetID != "subnet-0abc" || len(cfg.SecurityGroupIDs) != 1 || cfg.InstanceProfile != "gpufleet-agent" {
		t.Errorf("cfg = %+v", cfg)
	}
	for _, bad := range []string{
		"region: us-east-1\ncluster: prod\n",                                                 // no AMI
		"region: moon\ncluster: prod\ndefault_ami: ami-0123456789abcdef0\n",                  // region
		"region: us-east-1\ncluster: prod\ndefault_ami: ubuntu\n",                            // AMI id
		"region: us-east-1\ncluster: prod\ndefault_ami: ami-0123456789abcdef0\nsubnets: x\n", // unknown key
		"region: us-east-1\ncluster: prod\ndefault_ami: ami-0123456789abcdef0\npoll_interval: soon\n",
	} {
		if _, err := ec2.ParseConfig([]byte(bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}
