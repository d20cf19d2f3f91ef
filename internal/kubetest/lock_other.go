//go:build !unix

package kubetest

import "context"

// lockFile does nothing where flock is missing: concurrent first builds
// there may both build, and the last rename wins.
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }
