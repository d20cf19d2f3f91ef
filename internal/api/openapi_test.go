package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/httpapi"
)

var update = flag.Bool("update", false, "rewrite testdata/openapi.json from the server's document")

// documented reports whether the OpenAPI document lists code among the
// answers of route (a routes() pattern).
func documented(s *Server, route string, code int) bool {
	method, path, _ := strings.Cut(route, " ")
	path = strings.ReplaceAll(path, "{id...}", "{id}")
	paths := s.OpenAPI()["paths"].(map[string]any)
	op, ok := paths[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if !ok {
		return false
	}
	_, ok = op["responses"].(map[string]any)[strconv.Itoa(code)]
	return ok
}

// TestOpenAPIForGenerators: what client generators and Redocly's
// recommended rules need of every operation: a unique operationId, its
// security stated (a bearer token, or an explicit none), a 4xx answer
// (the probes, which refuse nothing, excepted) and every error answer
// with the one Error schema; and servers set.
func TestOpenAPIForGenerators(t *testing.T) {
	s := New(testCatalog(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	doc := s.OpenAPI()
	if servers, _ := doc["servers"].([]any); len(servers) == 0 {
		t.Error("no servers")
	}
	ids := map[string]string{}
	for _, r := range s.routes() {
		method, path, _ := strings.Cut(r.Pattern, " ")
		path = strings.ReplaceAll(path, "{id...}", "{id}")
		op := doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
		id, _ := op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s: no operationId", r.Pattern)
		case ids[id] != "":
			t.Errorf("%s: operationId %q is %s's too", r.Pattern, id, ids[id])
		}
		ids[id] = r.Pattern
		sec, ok := op["security"].([]any)
		if !ok || (r.Roles != nil) != (len(sec) == 1) {
			t.Errorf("%s: security %v (roles %v)", r.Pattern, op["security"], r.Roles)
		}
		has4xx := false
		for code, resp := range op["responses"].(map[string]any) {
			if code != "default" && code[0] == '2' {
				continue
			}
			has4xx = has4xx || code[0] == '4'
			b, _ := json.Marshal(resp)
			if !strings.Contains(string(b), `"$ref":"#/components/schemas/Error"`) {
				t.Errorf("%s: answer %s has no Error schema: %s", r.Pattern, code, b)
			}
		}
		if !has4xx && !httpapi.IsProbe(r.Pattern) {
			t.Errorf("%s: no 4xx answer", r.Pattern)
		}
	}
}

// TestOpenAPIFile: testdata/openapi.json, which CI lints with Redocly
// and clients are generated from, is the document the server serves
// (go test -run TestOpenAPIFile -update rewrites it).
func TestOpenAPIFile(t *testing.T) {
	s := New(testCatalog(), clock.Real{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	got, err := json.MarshalIndent(s.OpenAPI(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	file := filepath.Join("testdata", "openapi.json")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the server's document: go test ./internal/api -run TestOpenAPIFile -update", file)
	}
}
