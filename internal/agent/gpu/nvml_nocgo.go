//go:build !cgo

package gpu

import "context"

// NVML is the NVML source. This binary was built without cgo, so it
// cannot load the library: NewNVML always fails and auto moves on.
type NVML struct{}

var _ Source = (*NVML)(nil)

// NewNVML reports that NVML is unavailable in a build without cgo.
func NewNVML() (*NVML, error) {
	return nil, unavailable("nvml unavailable: built without cgo")
}

// Name returns "nvml".
func (*NVML) Name() string { return "nvml" }

// Sample always fails: there is no library.
func (*NVML) Sample(context.Context) ([]Reading, error) {
	return nil, unavailable("nvml unavailable: built without cgo")
}

// Close does nothing.
func (*NVML) Close() error { return nil }
