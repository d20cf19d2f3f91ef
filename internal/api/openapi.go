package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/agentapi"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
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
	// errors are the route's own error answers, beyond those its
	// authentication, body, parameters and path imply (errorResponses).
	errors map[int]string
}{
	"GET /healthz":             {response: map[string]any{}},
	"GET /api/v1/openapi.json": {response: map[string]any{}},
	"GET /readyz":              {response: ReadyView{}, errors: map[int]string{503: "Not ready: the store does not answer, or the control loop is not making progress"}},
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
	"POST /api/v1/tokens": {request: TokenRequest{}, response: TokenView{}, created: true},
	"POST /api/v1/jobs": {request: JobRequest{}, response: JobView{}, created: true, headers: []string{"Idempotency-Key"},
		errors: map[int]string{422: "No offer can ever run the job (code unrunnable; field names what to change)"}},
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

func init() {
	// The agent protocol describes its own routes' bodies.
	for pattern, b := range agentapi.Bodies() {
		e := apiDoc[pattern]
		e.request, e.response, e.params = b.Request, b.Response, b.Params
		apiDoc[pattern] = e
	}
}

// operationIDs name each route's operation, as generated clients name
// their methods: stable names chosen once, never derived from paths that
// may move.
var operationIDs = map[string]string{
	"GET /healthz":                         "health",
	"GET /readyz":                          "ready",
	"GET /api/v1/openapi.json":             "getOpenAPI",
	"GET /api/v1/offers":                   "listOffers",
	"GET /api/v1/offers/{id...}":           "getOffer",
	"POST /api/v1/quote":                   "quote",
	"POST /api/v1/teams":                   "createTeam",
	"GET /api/v1/teams":                    "listTeams",
	"POST /api/v1/tokens":                  "createToken",
	"GET /api/v1/tokens":                   "listTokens",
	"POST /api/v1/tokens/{id}/revoke":      "revokeToken",
	"POST /api/v1/jobs":                    "submitJob",
	"GET /api/v1/jobs":                     "listJobs",
	"GET /api/v1/jobs/{id}":                "getJob",
	"POST /api/v1/jobs/{id}/cancel":        "cancelJob",
	"GET /api/v1/jobs/{id}/logs":           "getJobLogs",
	"GET /api/v1/leases":                   "listLeases",
	"GET /api/v1/events":                   "listEvents",
	"GET /api/v1/alerts":                   "listAlerts",
	"POST /api/v1/alerts/{id}/ack":         "ackAlert",
	"GET /api/v1/reports/usage":            "usageReport",
	"GET /api/v1/policy":                   "getPolicy",
	"GET /api/v1/reports/audit":            "auditReport",
	"GET /api/v1/nodes":                    "listNodes",
	"GET /api/v1/overview":                 "getOverview",
	"GET /api/v1/overview/heatmap":         "getHeatmap",
	"GET /api/v1/overview/leases":          "listBoundaryLeases",
	"POST /api/v1/agent/heartbeat":         "agentHeartbeat",
	"POST /api/v1/agent/samples":           "agentSamples",
	"POST /api/v1/agent/events":            "agentEvents",
	"GET /api/v1/agent/commands":           "agentCommands",
	"POST /api/v1/agent/commands/{id}/ack": "agentAckCommand",
	"POST /api/v1/agent/logs":              "agentLogs",
}

// errorResponses are the error answers of route r beyond its own
// (apiDoc's errors): what its token, body, parameters and path can be
// refused for, by the middleware and handlers every such route shares.
// Each carries the error schema.
func errorResponses(r httpapi.Route) map[string]any {
	doc := apiDoc[r.Pattern]
	out := map[string]any{}
	add := func(code int, why string) {
		out[strconv.Itoa(code)] = map[string]any{"description": why, "content": errorContent}
	}
	_, path, _ := strings.Cut(r.Pattern, " ")
	hasID := strings.Contains(path, "{id")
	if r.Roles != nil {
		add(http.StatusUnauthorized, "No bearer token, or an unknown, revoked or expired one")
		add(http.StatusForbidden, "The token's role (or team) may not do this")
	}
	if doc.request != nil || len(doc.params) > 0 || len(doc.headers) > 0 || hasID {
		add(http.StatusBadRequest, "A parameter or body field that is not valid: field names it, message says what is allowed")
	}
	if httpapi.TakesBody(r.Pattern) {
		add(http.StatusUnsupportedMediaType, "A body (or a Content-Type) that is not application/json")
		if doc.request != nil {
			add(http.StatusRequestEntityTooLarge, "A body over the server's limit")
		}
		if r.Roles != nil {
			// What a write refers to may be missing or changed meanwhile
			// (storeError).
			add(http.StatusNotFound, "The request refers to something that does not exist (field names what)")
			add(http.StatusConflict, "The request conflicts with what is stored (field names what)")
		}
	}
	if hasID {
		add(http.StatusNotFound, "No such resource (or one of another team)")
	}
	if !httpapi.IsProbe(r.Pattern) {
		who := "the token's"
		if r.Roles == nil {
			who = "the client address's"
		}
		add(http.StatusTooManyRequests, "Over "+who+" rate limit; Retry-After says when to retry")
	}
	for code, why := range doc.errors {
		add(code, why)
	}
	return out
}

// errorContent is every error answer's body: the Error schema.
var errorContent = map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}

// OpenAPI returns the OpenAPI 3 document of the server's routes.
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]any{}
	for _, r := range s.routes() {
		method, path, _ := strings.Cut(r.Pattern, " ")
		path = strings.ReplaceAll(path, "{id...}", "{id}")
		doc := apiDoc[r.Pattern]
		responses := errorResponses(r)
		responses["200"] = map[string]any{"description": "OK", "content": jsonContent(doc.response)}
		responses["default"] = map[string]any{"description": "An unexpected error", "content": errorContent}
		if doc.created {
			responses["201"] = map[string]any{"description": "Created", "content": jsonContent(doc.response)}
		}
		op := map[string]any{"operationId": operationIDs[r.Pattern], "summary": r.Summary, "responses": responses}
		// Every operation states its security: a bearer token, or none
		// (an empty list), so that a generator never guesses.
		op["security"] = []any{}
		if r.Roles != nil {
			op["security"] = []any{map[string]any{"bearer": []any{}}}
			roles := make([]string, len(r.Roles))
			for i, role := range r.Roles {
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
		// The server the document is fetched from: a relative URL, as
		// each deployment has its own address.
		"servers": []any{map[string]any{"url": "/", "description": "The gpufleet server that serves this document"}},
		"paths":   paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "An API token (gpf_...), shown once when it is created."},
			},
			"schemas": map[string]any{"Error": schemaOf(reflect.TypeOf(httpapi.ErrorBody{}))},
		},
	}
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	httpapi.WriteJSON(w, http.StatusOK, s.OpenAPI())
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
