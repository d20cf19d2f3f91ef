package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse: no input panics, and every policy Parse accepts is valid,
// converts for the engine and survives Marshal then Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte("base: autostop\nidle: {for: 1h}\n"))
	f.Add([]byte("wait_targets: {core: 0s, regular: 1m, offline: 2h}\nbilling_modes: [spot]\n"))
	f.Add([]byte("reserved:\n  gpus: {A100: 3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.yaml", data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid policy: %v", err)
		}
		if _, err := p.Engine(nil, time.Time{}); err != nil && len(p.Reserved.GPUs) == 0 {
			t.Fatalf("Engine: %v", err)
		}
		b, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse("f.yaml", b)
		if err != nil {
			t.Fatalf("Parse(Marshal(p)) = %v\n%s", err, b)
		}
		p.Base = ""
		if diff := cmp.Diff(p, q); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
