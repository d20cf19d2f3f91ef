package agentapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestRoutesDescribed: every route has its bodies described for the
// OpenAPI document, takes agent tokens only, and Bodies names no route
// the protocol lacks.
func TestRoutesDescribed(t *testing.T) {
	bodies := Bodies()
	routes := New(nil, nil, nil, nil).Routes()
	for _, r := range routes {
		if _, ok := bodies[r.Pattern]; !ok {
			t.Errorf("%s: no Bodies entry", r.Pattern)
		}
		if !slices.Equal(r.Roles, []store.Role{store.RoleAgent}) || r.Summary == "" || r.Handler == nil {
			t.Errorf("%s: roles %v, summary %q: want agent tokens only and a summary", r.Pattern, r.Roles, r.Summary)
		}
	}
	if len(bodies) != len(routes) {
		t.Errorf("%d bodies for %d routes", len(bodies), len(routes))
	}
}

// BenchmarkHeartbeat is an agent's interval on the protocol alone: a
// heartbeat and a command fetch over loopback HTTP, by parallel agents
// of one shared token (api's BenchmarkSubmitWithAgents runs 1,000 of
// them beside job submissions):
//
//	go test -run '^$' -bench Heartbeat ./internal/agentapi
func BenchmarkHeartbeat(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("node-%04d", n.Add(1))
		up := &link.HTTP{URL: f.ts.URL, Token: f.tokens["agent"], Agent: id, Epoch: "e", Client: client}
		hb := link.Heartbeat{Agent: id, Source: "fake", GPUs: []link.GPUInfo{{Index: 0, UUID: "GPU-" + id, Model: "V100", MemTotalMiB: 32768}}}
		for pb.Next() {
			if err := up.Heartbeat(ctx, hb); err != nil {
				b.Error(err)
				return
			}
			if _, err := up.FetchCommands(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
