// Package api is gpufleet's HTTP interface, versioned under /api/v1: JSON
// in and out, errors as JSON with a stable code and the offending field,
// an OpenAPI 3 document at /api/v1/openapi.json, Prometheus metrics at
// /metrics and health at /healthz.
//
// The JSON views here are also what the CLI prints with --json, so a
// number on the command line, in the API and on the dashboard comes from
// one code path.
package api
