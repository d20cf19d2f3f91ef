package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/provider"
	"github.com/gpufleet/gpufleet/internal/provider/ec2/ec2fake"
)

// TestEC2ProviderFromConfig: serve's ec2 provider reads its file, rents
// the catalog's AWS offers of its region through the endpoint named
// there, and mints the fallback agent token once, at the first acquire
// without a bootstrap; a catalog without such an offer is refused.
func TestEC2ProviderFromConfig(t *testing.T) {
	cloud := ec2fake.New()
	defer cloud.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	path := filepath.Join(t.TempDir(), "ec2.yaml")
	if err := os.WriteFile(path, []byte("region: us-east-1\ncluster: cmdtest\ndefault_ami: ami-0123456789abcdef0\nendpoint: "+cloud.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := core.Offer{ID: "aws/us-east-1/g5.xlarge", Provider: "aws", Region: "us-east-1", InstanceType: "g5.xlarge", GPUModel: "A10G", GPUs: 1,
		Plans: []core.PricePlan{{Mode: core.OnDemand, Price: 1_000_000, Per: core.Hour, Granularity: 1}}}
	cat := &pricing.Catalog{Currency: "USD", Offers: []core.Offer{o}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	minted := 0
	mint := func() (string, string, error) { minted++; return "http://10.0.0.1:8080", "gpf_fallback", nil }
	p, err := newEC2Provider(context.Background(), path, cat, log, mint)
	if err != nil {
		t.Fatal(err)
	}
	if minted != 0 {
		t.Errorf("minted %d tokens at start", minted)
	}
	for _, lease := range []string{"L1", "L2"} {
		if _, err := p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: lease, OfferID: o.ID, Mode: core.OnDemand}); err != nil {
			t.Fatal(err)
		}
	}
	ins := cloud.Instances()
	if minted != 1 || len(ins) != 2 || !strings.Contains(ins[0].UserData, "GPUFLEET_TOKEN=gpf_fallback") || ins[0].Tags["gpufleet:cluster"] != "cmdtest" {
		t.Errorf("minted %d, instances %+v", minted, ins)
	}
	b := provider.Bootstrap{ServerURL: "http://10.0.0.1:8080", LeaseID: "L3", JoinToken: "gpfj_once", Expires: time.Now().Add(time.Hour)}
	if _, err := p.Acquire(context.Background(), provider.AcquireRequest{ClientToken: "L3", OfferID: o.ID, Mode: core.OnDemand, Bootstrap: b}); err != nil {
		t.Fatal(err)
	}
	if in := cloud.Instances()[2]; !strings.Contains(in.UserData, "GPUFLEET_JOIN_TOKEN=gpfj_once") || strings.Contains(in.UserData, "gpf_fallback") {
		t.Errorf("the lease's bootstrap was not used:\n%s", in.UserData)
	}

	other := &pricing.Catalog{Currency: "USD", Offers: []core.Offer{{ID: "lab/x/a100", Provider: "lab", Region: "x", InstanceType: "a100", GPUModel: "A100", GPUs: 1}}}
	if _, err := newEC2Provider(context.Background(), path, other, log, mint); err == nil || !strings.Contains(err.Error(), "AWS offers") {
		t.Errorf("a catalog without AWS offers: %v", err)
	}
	if _, err := newEC2Provider(context.Background(), filepath.Join(t.TempDir(), "missing.yaml"), cat, log, mint); err == nil {
		t.Error("a missing config file was accepted")
	}
}
