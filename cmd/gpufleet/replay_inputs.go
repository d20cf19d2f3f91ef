package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/gpuutil"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/sim"
)

// loadSpotTraces reads every .json file under dir as a spot trace in the
// layout of SkyPilot's spot-traces (provsim.ParseSpotTrace), names
// relative to dir, and turns them into the availability of the spot
// offers they cover over the workload's span and 30 days more. What each
// trace covers is written to log.
func loadSpotTraces(dir string, offers []core.Offer, w *sim.Workload, log io.Writer) (*provsim.Availability, error) {
	var traces []*provsim.SpotTrace
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		t, err := provsim.ParseSpotTrace(filepath.ToSlash(rel), f)
		if err != nil {
			return fmt.Errorf("--spot-trace %s: %w", dir, err)
		}
		traces = append(traces, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("--spot-trace %s: no .json trace files (want the layout of github.com/skypilot-org/spot-traces)", dir)
	}
	a, cov, unused := provsim.SpotAvailability(traces, offers, workloadSpan(w)+30*24*time.Hour)
	if len(cov) == 0 {
		return nil, fmt.Errorf("--spot-trace %s: %d traces, none for a spot offer of the catalog (a trace covers the spot offers of its GPU model and GPUs per instance)", dir, len(traces))
	}
	for _, c := range cov {
		where := ""
		if c.OtherRegion {
			where = " (no offer in the traces' region: taken for this one)"
		}
		fmt.Fprintf(log, "spot trace: %s follows %s%s\n", c.Offer, strings.Join(c.Files, ", "), where)
	}
	for _, u := range unused {
		fmt.Fprintf(log, "spot trace: %s covers no spot offer of the catalog\n", u)
	}
	return a, nil
}

// workloadSpan is the time from the first submission to the last natural
// end of the workload's jobs.
func workloadSpan(w *sim.Workload) time.Duration {
	var first, last time.Time
	for _, j := range w.Jobs {
		if first.IsZero() || j.Submit.Before(first) {
			first = j.Submit
		}
		if end := j.Submit.Add(w.Actual[j.ID]); end.After(last) {
			last = end
		}
	}
	return last.Sub(first)
}

// loadUtil reads a utilization series file (gpuutil.Parse).
func loadUtil(path string) (*gpuutil.Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--util: %w", err)
	}
	defer f.Close()
	s, err := gpuutil.Parse(path, f)
	if err != nil {
		return nil, fmt.Errorf("--util: %w", err)
	}
	return s, nil
}
