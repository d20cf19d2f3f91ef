package exec

import (
	"errors"
	"testing"

	"github.com/gpufleet/gpufleet/internal/provider"
)

// FuzzDecode: whatever a script prints, Decode and Machine return a
// value or an error, never panic, and a machine they accept is valid.
// Seeds are in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"machine":{"provider_id":"m1","client_token":"L1","offer":"o","mode":"weekly","state":"ready","launched_at":"2026-03-01T00:00:00Z"}}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := Decode(out)
		if err != nil {
			if r.Error == nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("an error that is neither reported nor a protocol violation: %v", err)
			}
			return
		}
		docs := r.Machines
		if r.Machine != nil {
			docs = append(docs, *r.Machine)
		}
		for i := range docs {
			m, err := docs[i].Machine()
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("machine error not a protocol violation: %v", err)
				}
				continue
			}
			if m.ProviderID == "" || m.State == "" || (m.State != provider.Failed && m.LaunchedAt.IsZero()) {
				t.Fatalf("accepted an invalid machine %+v from %q", m, out)
			}
		}
	})
}
