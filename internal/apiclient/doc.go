// Package apiclient is the client of gpufleet's /api/v1 that oapi-codegen
// generates from the server's OpenAPI document: one method per operation,
// named by its operationId, with the document's parameters and types. It
// is generated, never edited: after the document changes,
//
//	go test ./internal/api -run TestOpenAPIFile -update
//	go generate ./internal/apiclient
//
// and TestRoundTrip (this package) fails when the document and the
// server disagree. Package client wraps it for the CLI. It imports
// nothing of gpufleet's.
package apiclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.4.1 -config oapi-codegen.yaml ../api/testdata/openapi.json
