package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// apiDoc describes each route's request and response bodies; schemas are
// derived from the Go types by reflection so they cannot drift from what
// the handlers encode.
var apiDoc = map[string]struct {
	request  any
	response any
	params   []string
}{
	"GET /healthz":             {response: map[string]any{}},
	"GET /api/v1/openapi.json": {response: map[string]any{}},
	"GET /api/v1/offers": {response: struct {
		Offers   []OfferView `json:"offers"`
		Currency string      `json:"currency"`
	}{}, params: []string{"gpu", "region"}},
	"GET /api/v1/offers/{id...}": {response: OfferView{}},
	"POST /api/v1/quote":         {request: QuoteRequest{}, response: QuoteView{}},
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
		var params []any
		for _, p := range doc.params {
			params = append(params, map[string]any{"name": p, "in": "query", "schema": map[string]any{"type": "string"}})
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
		"info":    map[string]any{"title": "gpufleet", "version": "v1", "description": "Keep rented GPUs busy: offers, quotes and (to come) jobs, leases and reports."},
		"paths":   paths,
	}
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.OpenAPI())
}

func jsonContent(v any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(v))}}
}

var (
	timeType   = reflect.TypeOf(time.Time{})
	numberType = reflect.TypeOf(json.Number(""))
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
