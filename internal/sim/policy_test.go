package sim

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/policy"
)

// A preset written to a policy file and read back runs exactly as the
// preset: same bill to the micro-unit, same events, same steps. With
// TestDecisionHash (every preset against the bills the baselines had as
// hard-coded settings) this is "the file is the policy".
func TestPolicyFileRunsAsPreset(t *testing.T) {
	w := burstyWorkload(1)
	type summary struct {
		Cost, Idle          int64
		Events, Steps, Jobs int
		Hash                string
	}
	for _, name := range policy.PresetNames {
		t.Run(name, func(t *testing.T) {
			p, _ := policy.Preset(name)
			b, err := policy.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := policy.Parse(name+".yaml", b)
			if err != nil {
				t.Fatal(err)
			}
			var got [2]summary
			for i, q := range []policy.Policy{p, f} {
				r, err := Run(context.Background(), testConfig(w), q)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = summary{int64(r.Cost), int64(r.IdleCost), r.Events, r.Steps, r.Jobs, r.PolicyHash}
			}
			if diff := cmp.Diff(got[0], got[1]); diff != "" {
				t.Errorf("preset vs its file (-preset +file):\n%s", diff)
			}
		})
	}
}

// The result names the policy that ran: a preset by name, a file by its
// path and hash.
func TestResultNamesPolicy(t *testing.T) {
	w := burstyWorkload(1)
	f, err := policy.Parse("night.yaml", []byte("name: night\nbase: reactive\nrelease:\n  min_idle: 20m\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), testConfig(w), f)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"night", "night.yaml", f.Hash(), "night (night.yaml, " + f.Hash() + ")"}
	if diff := cmp.Diff(want, []string{r.Policy, r.PolicySource, r.PolicyHash, r.PolicyLabel}); diff != "" {
		t.Errorf("policy, source, hash, label (-want +got):\n%s", diff)
	}
	p, _ := policy.Preset("reactive")
	if r.PolicyHash == p.Hash() {
		t.Errorf("a changed min_idle kept the preset's hash %s", p.Hash())
	}
}
