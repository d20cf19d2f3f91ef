package policy

import (
	"os"
	"testing"
)

// The example policy file in examples/ loads.
func TestExampleFile(t *testing.T) {
	const path = "../../examples/policy.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "night-shift" || p.Reserved.GPUs["V100"] != 8 || p.Idle.UtilPct != 15 {
		t.Errorf("examples/policy.yaml read as %+v", p)
	}
}
