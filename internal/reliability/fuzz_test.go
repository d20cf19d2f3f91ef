package reliability

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
)

// FuzzRequestBodies sends arbitrary bodies to every route of the served
// OpenAPI document that reads one, through the real handlers and store,
// with a token the route accepts. Whatever the body, the answer is a
// JSON error or success, never a 5xx. route picks the route (modulo
// their number), so the corpus covers them all.
func FuzzRequestBodies(f *testing.F) {
	fx := newFixture(f)
	var ops []operation
	for _, op := range fx.operations(f) {
		if op.request != nil {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		f.Fatal("no route takes a body")
	}
	for i, op := range ops {
		f.Add(uint8(i), bodyFor(op.request, "x"))
		f.Add(uint8(i), []byte(`{}`))
	}
	f.Add(uint8(0), []byte(`{"id":"j9","team":"a","tier":"core","gpus":1,"est_duration_seconds":60}`))
	f.Add(uint8(0), []byte(`{"gpus":-1,"gpu_milli":1e40}`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		op := ops[int(route)%len(ops)]
		secret := fx.tokens[store.RoleAdmin]
		if op.roles != nil && !slices.Contains(op.roles, store.RoleAdmin) {
			secret = fx.tokens[op.roles[0]]
		}
		path := fill(op.path, "ja")
		req, err := http.NewRequest(op.method, fx.ts.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := fx.ts.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", op.method, path, err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", op.method, path, body, resp.StatusCode, out.String())
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s %s: content type %q", op.method, path, resp.Header.Get("Content-Type"))
		}
	})
}
