// Package httpapi is the HTTP plumbing the server's two APIs share: the
// REST API (internal/api) and the agent protocol (internal/agentapi). It
// holds the route type, strict JSON decoding (one value, each key once
// per object without regard to case, no unknown field, a bounded body),
// the error body every answer uses and the store-error-to-status mapping,
// bearer-token authentication with its Principal and the per-token and
// per-address rate limits, and the request metrics and log line.
//
// Invariants the packages above rely on: every error answer is an
// ErrorBody with a stable code; a handler reached through Middleware.Handle
// has a bounded body, a JSON Content-Type when it has a body, and, on a
// route with roles, a Principal whose role is one of them; a store's or a
// database's own words never reach the client (Internal, StoreError).
//
// It knows no route of its own: it must not import internal/api,
// internal/agentapi or anything that serves or decides (server, loop,
// engine and the other decision packages); store, core and clock only.
package httpapi
