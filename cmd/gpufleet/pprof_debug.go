//go:build pprof

package main

// Built with -tags pprof, the binary serves net/http/pprof on
// $GPUFLEET_PPROF (an address such as 127.0.0.1:6060), for profiling the
// server alone under `gpufleet bench api`. Ordinary builds leave it out.

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("GPUFLEET_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
