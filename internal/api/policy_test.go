package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/readmodel/readmodeltest"
)

// GET /api/v1/policy shows the policy the server was given, to any
// reader, and nothing without a token.
func TestGetPolicy(t *testing.T) {
	st := readmodeltest.Store(t)
	p, err := policy.Parse("night.yaml", []byte("name: night\nbase: reactive\nidle:\n  util_pct: 35\n"))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(New(readmodeltest.Catalog(), clock.NewManual(readmodeltest.Now), slog.New(slog.NewTextHandler(io.Discard, nil)),
		WithStore(st), WithRateLimit(httpapi.RateLimit{}), WithPolicy(p)))
	defer ts.Close()
	_, member := uiServer(t, st) // a member token of team a in st
	var got struct {
		Policy struct {
			Name        string            `json:"name"`
			Source      string            `json:"source"`
			WaitTargets map[string]string `json:"wait_targets"`
			Idle        struct {
				UtilPct int    `json:"util_pct"`
				For     string `json:"for"`
			} `json:"idle"`
			Release struct {
				AtBoundary bool `json:"at_boundary"`
			} `json:"release"`
		} `json:"policy"`
		Hash  string `json:"hash"`
		Label string `json:"label"`
	}
	if code := uiGet(t, ts, member, "/api/v1/policy", &got); code != http.StatusOK {
		t.Fatalf("GET /api/v1/policy as a member: %d", code)
	}
	want := got
	want.Policy.Name, want.Policy.Source = "night", "night.yaml"
	want.Policy.WaitTargets = map[string]string{"core": "0s", "regular": "0s", "offline": "0s"}
	want.Policy.Idle.UtilPct, want.Policy.Idle.For = 35, (30 * time.Minute).String()
	want.Policy.Release.AtBoundary = false
	want.Hash, want.Label = p.Hash(), "night (night.yaml, "+p.Hash()+")"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /api/v1/policy (-want +got):\n%s", diff)
	}
	if code := uiGet(t, ts, "", "/api/v1/policy", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/policy without a token: %d, want 401", code)
	}
}
