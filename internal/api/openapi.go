package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// apiDoc describes each route's request and response bodies; schemas are
// derived from the Go types by reflection so they cannot drift from what
// the handlers encode.
var apiDoc = map[string]struct {
	request  any
	response any
	params   []string
	// headers are request headers the route reads.
	headers []string
	// created: the route answers 201 for a new resource.
	created bool
}{
	"GET /healthz":             {response: map[string]any{}},
	"GET /api/v1/openapi.json": {response: map[string]any{}},
	"GET /readyz":              {response: map[string]any{}},
	"GET /api/v1/offers": {response: struct {
		Offers   []OfferView `json:"offers"`
		Currency string      `json:"currency"`
	}{}, params: []string{"gpu", "region"}},
	"GET /api/v1/offers/{id...}": {response: OfferView{}},
	"POST /api/v1/quote":         {request: QuoteRequest{}, response: QuoteView{}},
	"POST /api/v1/teams":         {request: TeamRequest{}, response: TeamView{}, created: true},
	"GET /api/v1/teams": {response: struct {
		Teams []TeamView `json:"teams"`
	}{}},
	"POST /api/v1/tokens":             {request: TokenRequest{}, response: TokenView{}, created: true},
	"POST /api/v1/jobs":               {request: JobRequest{}, response: JobView{}, created: true, headers: []string{"Idempotency-Key"}},
	"GET /api/v1/jobs":                {response: JobsPage{}, params: []string{"team", "state", "tier", "limit", "cursor"}},
	"GET /api/v1/jobs/{id}":           {response: JobView{}},
	"POST /api/v1/jobs/{id}/cancel":   {response: JobView{}},
	"GET /api/v1/leases":              {response: LeasesPage{}, params: []string{"state", "limit", "cursor"}},
	"GET /api/v1/events":              {response: EventsPage{}, params: []string{"subject", "kind", "team", "from", "to", "limit", "cursor"}},
	"GET /api/v1/tokens":              {response: TokensPage{}, params: []string{"team", "user", "active"}},
	"POST /api/v1/tokens/{id}/revoke": {response: TokenInfoView{}},
	"GET /api/v1/alerts":              {response: AlertsPage{}, params: []string{"team", "kind", "lease", "open", "limit", "cursor"}},
	"POST /api/v1/alerts/{id}/ack":    {response: AlertView{}},
	"GET /api/v1/reports/usage":       {response: UsageReportView{}, params: []string{"from", "to", "team"}},
}

// OpenAPI returns the OpenAPI 3 document of the server's routes.
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]any{}
	for _, r := range s.routes() {
		method, path, _ := strings.Cut(r.pattern, " ")
		path = strings.ReplaceAll(path, "{id...}", "{id}")
		doc := apiDoc[r.pattern]
		op := map[string]any{
			"summary": r.summary,
			"responses": map[string]any{
				"200":     map[string]any{"description": "OK", "content": jsonContent(doc.response)},
				"default": map[string]any{"description": "An error", "content": jsonContent(ErrorBody{})},
			},
		}
		responses := op["responses"].(map[string]any)
		if doc.created {
			responses["201"] = map[string]any{"description": "Created", "content": jsonContent(doc.response)}
		}
		if takesBody(r.pattern) {
			responses["415"] = map[string]any{"description": "A body (or a Content-Type) that is not application/json", "content": jsonContent(ErrorBody{})}
		}
		if !isProbe(r.pattern) {
			who := "the token's"
			if r.roles == nil {
				who = "the client address's"
			}
			responses["429"] = map[string]any{"description": "Over " + who + " rate limit; Retry-After says when to retry", "content": jsonContent(ErrorBody{})}
		}
		if r.roles != nil {
			op["security"] = []any{map[string]any{"bearer": []any{}}}
			roles := make([]string, len(r.roles))
			for i, role := range r.roles {
				roles[i] = string(role)
			}
			op["x-roles"] = roles
		}
		var params []any
		for _, p := range doc.params {
			params = append(params, map[string]any{"name": p, "in": "query", "schema": map[string]any{"type": "string"}})
		}
		for _, h := range doc.headers {
			params = append(params, map[string]any{"name": h, "in": "header", "schema": map[string]any{"type": "string"}})
		}
		if strings.Contains(path, "{id}") {
			params = append(params, map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if doc.request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": jsonContent(doc.request)}
		}
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		item[strings.ToLower(method)] = op
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "gpufleet", "version": "v1", "description": "Keep rented GPUs busy: offers, quotes, teams, tokens, jobs, leases and the audit trail."},
		"paths":   paths,
		"components": map[string]any{"securitySchemes": map[string]any{
			"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "An API token (gpf_...), shown once when it is created."},
		}},
	}
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.OpenAPI())
}

func jsonContent(v any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(v))}}
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	numberType   = reflect.TypeOf(json.Number(""))
	workloadType = reflect.TypeOf(core.Workload(""))
	accelType    = reflect.TypeOf(core.Accelerator(""))
	durationType = reflect.TypeOf(policy.Duration(0))
)

// schemaOf derives a JSON schema from a Go type as encoding/json sees it.
func schemaOf(t reflect.Type) map[string]any {
	if t == nil {
		return map[string]any{}
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == numberType:
		return map[string]any{"type": "number"}
	case t == durationType:
		return map[string]any{"type": "string", "description": "a duration as Go writes one: 90s, 5m0s, 1h30m0s"}
	case t == workloadType:
		return map[string]any{"type": "string", "enum": []string{string(core.Training), string(core.Inference)}}
	case t == accelType:
		enum := make([]string, len(core.Accelerators))
		for i, a := range core.Accelerators {
			enum[i] = string(a)
		}
		return map[string]any{"type": "string", "enum": enum}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = schemaOf(f.Type)
		}
		return map[string]any{"type": "object", "properties": props}
	}
	return map[string]any{}
}
