package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// TestPortfolioPolicyOut: plan portfolio --policy-out writes its reserved
// base as a policy file the loader takes as it is: the same GPUs per
// model as the plan's JSON, on the base's committed mode, and every other
// knob gpufleet's default.
func TestPortfolioPolicyOut(t *testing.T) {
	out := filepath.Join(t.TempDir(), "base.yaml")
	code, stdout, stderr := runCLI(t, "plan", "portfolio", "--json", "--no-sensitivity", "--demand", v100Peak, "--catalog", v100Catalog, "--policy-out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var o portfolioOut
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, r := range o.Reserved {
		want[r.GPUModel] = int(r.Count)
	}
	if len(want) == 0 {
		t.Fatal("the plan reserved nothing: the test needs a base")
	}
	p, err := loadPolicy(out)
	if err != nil {
		t.Fatalf("the loader refuses plan portfolio's file: %v", err)
	}
	if diff := cmp.Diff(want, p.Reserved.GPUs); diff != "" {
		t.Errorf("reserved.gpus (-plan +policy file):\n%s", diff)
	}
	if p.Reserved.Mode != core.Monthly {
		t.Errorf("reserved.mode %s; want monthly (the base is 1-month terms)", p.Reserved.Mode)
	}
	d := policy.Default()
	d.Name, d.Doc, d.Source, d.Reserved = p.Name, p.Doc, p.Source, p.Reserved
	if diff := cmp.Diff(d, p); diff != "" {
		t.Errorf("knobs other than the base differ from gpufleet's (-default +file):\n%s", diff)
	}
	// And the file converts for the engine over that catalog: the base in
	// machines of the cheapest monthly offer.
	cat, err := loadCatalog(v100Catalog)
	if err != nil {
		t.Fatal(err)
	}
	ecfg, err := p.Engine(p.Offers(cat.Offers), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for model, gpus := range want {
		if m := ecfg.Fleet.Reserved[model]; m < 1 || m > gpus {
			t.Errorf("%s: %d GPUs became %d machines", model, gpus, m)
		}
	}
}

// TestSimPolicyFile: sim --policy takes presets and files side by side,
// and the report names each (a file with its path and hash).
func TestSimPolicyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lazy.yaml")
	if err := os.WriteFile(file, []byte("name: lazy\nbase: reactive\nrelease:\n  min_idle: 30m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jsonOut := filepath.Join(dir, "r.json")
	code, stdout, stderr := runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--no-lp", "--quiet", "--policy", "reactive,"+file, "--json", jsonOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Policies []struct {
			Policy       string `json:"policy"`
			PolicySource string `json:"policy_source"`
			PolicyHash   string `json:"policy_hash"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	f, err := loadPolicy(file)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := policy.Preset("reactive")
	type pv = struct{ Policy, PolicySource, PolicyHash string }
	got := make([]pv, len(v.Policies))
	for i, p := range v.Policies {
		got[i] = pv{p.Policy, p.PolicySource, p.PolicyHash}
	}
	if diff := cmp.Diff([]pv{{"reactive", "preset reactive", r.Hash()}, {"lazy", file, f.Hash()}}, got); diff != "" {
		t.Errorf("policies in the JSON report (-want +got):\n%s", diff)
	}
	if !strings.Contains(stdout, "lazy ("+file+", "+f.Hash()+")") {
		t.Errorf("the table does not name the file policy with its path and hash:\n%s", stdout)
	}
	code, _, stderr = runCLI(t, "sim", "--trace", "testdata/small-trace.csv", "--no-lp", "--quiet", "--policy", "reactive,reactive")
	if code == 0 || !strings.Contains(stderr, "policies with different names") {
		t.Errorf("two policies of one name: exit %d, %s", code, stderr)
	}
}
