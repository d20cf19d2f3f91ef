// Package api is gpufleet's HTTP interface, versioned under /api/v1: JSON
// in and out, errors as JSON with a stable code and the offending field,
// an OpenAPI 3 document at /api/v1/openapi.json, Prometheus metrics at
// /metrics and health at /healthz.
//
// It holds the REST API users call (offers, quotes, teams, tokens, jobs,
// leases, events, alerts, reports, nodes, job logs), the dashboard's
// JSON routes over the read model (internal/readmodel) and the mount of
// its assets. The agent protocol's routes are internal/agentapi's; the
// Server mounts them on its one mux, behind the same middleware
// (internal/httpapi), so there is one address, one /metrics, and one
// OpenAPI document listing every route.
//
// The JSON views here are also what the CLI prints with --json, so a
// number on the command line, in the API and on the dashboard comes from
// one code path.
package api
