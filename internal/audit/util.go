package audit

import (
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/gpuutil"
)

// UtilStep is how often a utilization series is read into samples: the
// audit's mean over a run's samples is then the series' time-weighted
// mean to the minute.
const UtilStep = time.Minute

// WithUtil makes a utilization series (per job or per pod: an id is a
// job's id or a unit's key) the utilization evidence of the runs it
// covers: their GPUs' own samples during the run are dropped and the
// series, read every UtilStep from the run's start (the value in force at
// each instant; relative times count from the job's first run), takes
// their place, clipped to the audited range. The series carries no
// memory, so those samples say nothing of memory (MemUsedMiB -1: no
// memory advice from them). It returns the input and how many runs the
// series covered.
func WithUtil(in Input, s *gpuutil.Set) (Input, int) {
	origin := map[string]time.Time{}
	for _, r := range in.Runs {
		if o, ok := origin[r.JobID]; !ok || r.From.Before(o) {
			origin[r.JobID] = r.From
		}
	}
	end := in.To
	if !in.Now.IsZero() && in.Now.Before(end) {
		end = in.Now
	}
	type span struct{ from, to time.Time }
	covered := map[gpuKey][]span{}
	var added []core.Sample
	n := 0
	for _, r := range in.Runs {
		id := r.Unit
		if !s.Has(id) {
			id = r.JobID
		}
		if !s.Has(id) {
			continue
		}
		from, to := r.From, r.To
		if to.IsZero() || to.After(end) {
			to = end
		}
		if from.Before(in.From) {
			from = in.From
		}
		if !to.After(from) {
			continue
		}
		n++
		for _, g := range r.GPUs {
			k := gpuKey{r.LeaseID, g}
			covered[k] = append(covered[k], span{from, to})
			for t := from; t.Before(to); t = t.Add(UtilStep) {
				bp, _ := s.At(id, origin[r.JobID], t)
				added = append(added, core.Sample{LeaseID: r.LeaseID, GPU: g, At: t, UtilPct: bp / 100, MemUsedMiB: -1})
			}
		}
	}
	if n == 0 {
		return in, 0
	}
	kept := make([]core.Sample, 0, len(in.Samples)+len(added))
	for _, smp := range in.Samples {
		if !slices.ContainsFunc(covered[gpuKey{smp.LeaseID, smp.GPU}], func(sp span) bool {
			return !smp.At.Before(sp.from) && smp.At.Before(sp.to)
		}) {
			kept = append(kept, smp)
		}
	}
	in.Samples = append(kept, added...)
	return in, n
}
