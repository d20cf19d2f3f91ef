// Package reliability holds the cross-cutting reliability and security
// tests: the ones that take the whole server (API, store, loop) as a
// user or an attacker would — every route under every role, hostile
// input on every parameter, faults of the database underneath. They find
// the routes in the served OpenAPI document, so a new route is covered
// the day it is added. Each records what it tried through reltest, from
// which docs/RELIABILITY.md is produced.
package reliability
