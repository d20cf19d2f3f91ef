package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/kube"
)

// dcgmFlags are serve --kubernetes's flags for the cluster's
// dcgm-exporter pods, whose per-pod GPU telemetry feeds the idle ladder
// (docs/kubernetes.md, "GPU telemetry").
type dcgmFlags struct {
	on             bool
	selector, path string
	port           int
	interval       time.Duration
}

func (f *dcgmFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.on, "dcgm", true, "with --kubernetes: scrape the cluster's dcgm-exporter pods for each pod's GPU utilization (the idle ladder's readings); --dcgm=false turns it off")
	fl.StringVar(&f.selector, "dcgm-selector", kube.DefaultDCGMSelector, "with --kubernetes: the label selector of the dcgm-exporter pods (all namespaces)")
	fl.IntVar(&f.port, "dcgm-port", 9400, "with --kubernetes: the exporter pods' metrics port")
	fl.StringVar(&f.path, "dcgm-path", "/metrics", "with --kubernetes: the exporter pods' metrics path")
	fl.DurationVar(&f.interval, "dcgm-interval", 15*time.Second, "with --kubernetes: the time between scrapes of each exporter pod")
}

// flags are the scrape's flags, all of which need --kubernetes.
func (f *dcgmFlags) flags() []string {
	return []string{"dcgm", "dcgm-selector", "dcgm-port", "dcgm-path", "dcgm-interval"}
}

// build is the scrape's settings, nil with --dcgm=false; a bad value is a
// usage error naming the flag, the value and what is allowed.
func (f *dcgmFlags) build(cmd *cobra.Command) (*kube.DCGM, error) {
	if !f.on {
		for _, name := range f.flags()[1:] {
			if cmd.Flags().Changed(name) {
				return nil, usageError{fmt.Errorf("--%s needs --dcgm (it is off)", name)}
			}
		}
		return nil, nil
	}
	sel, err := kube.ParseDCGMSelector("--dcgm-selector", f.selector)
	if err != nil {
		return nil, usageError{err}
	}
	if f.port < 1 || f.port > 65535 {
		return nil, usageError{&core.FieldError{Field: "--dcgm-port", Value: fmt.Sprint(f.port), Allowed: "a TCP port, 1..65535"}}
	}
	if !strings.HasPrefix(f.path, "/") || strings.ContainsAny(f.path, "?# ") {
		return nil, usageError{&core.FieldError{Field: "--dcgm-path", Value: f.path, Allowed: "a URL path starting with /, such as /metrics"}}
	}
	if f.interval < time.Second || f.interval > time.Hour {
		return nil, usageError{&core.FieldError{Field: "--dcgm-interval", Value: f.interval.String(), Allowed: "a duration from 1s to 1h"}}
	}
	return &kube.DCGM{Selector: sel, Port: f.port, Path: f.path, Interval: f.interval}, nil
}

// dcgmText is the scrape's settings for the log's first line.
func dcgmText(d *kube.DCGM) string {
	if d == nil {
		return "off"
	}
	return fmt.Sprintf("pods %s, :%d%s every %s", d.Selector, d.Port, d.Path, d.Interval)
}
