package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// DemandFromJobs turns jobs (a replayed trace) into an hourly demand
// series per GPU class, starting at the hour of the first submission. A
// job counts toward its first allowed GPU model, or defaultModel when it
// allows any. Each hour's demand is the GPU-time the jobs use in it,
// divided by the hour and rounded up to whole GPUs; the interruptible and
// deferrable parts are the same for the jobs so marked (deferrable:
// offline or flagged deferrable work).
func DemandFromJobs(jobs []core.Job, defaultModel string) (Series, error) {
	if len(jobs) == 0 {
		return Series{}, &core.FieldError{Field: "jobs", Value: "0", Allowed: "at least one job"}
	}
	start := jobs[0].Submit
	end := jobs[0].Submit
	for i := range jobs {
		j := &jobs[i]
		if j.Submit.Before(start) {
			start = j.Submit
		}
		if e := j.Submit.Add(j.EstDuration); e.After(end) {
			end = e
		}
	}
	start = start.Truncate(time.Hour)
	hours := int(end.Sub(start)/time.Hour) + 1
	if hours > MaxHours {
		return Series{}, &core.FieldError{Field: "jobs", Value: fmt.Sprintf("%d hours", hours), Allowed: fmt.Sprintf("at most %d hours of demand", MaxHours)}
	}
	type acc struct{ all, intr, def []int64 } // milli-GPU-seconds per hour
	byModel := map[string]*acc{}
	for i := range jobs {
		j := &jobs[i]
		model := defaultModel
		if len(j.Request.Models) > 0 {
			model = j.Request.Models[0]
		}
		if model == "" {
			return Series{}, &core.FieldError{Field: "gpu_model", Value: "", Allowed: fmt.Sprintf("a GPU model for job %s (the trace gives none: pass a default)", j.ID)}
		}
		a := byModel[model]
		if a == nil {
			a = &acc{make([]int64, hours), make([]int64, hours), make([]int64, hours)}
			byModel[model] = a
		}
		milli := int64(j.Request.GPUs) * int64(j.Request.MilliPerGPU) * int64(max(j.Shards, 1))
		from, to := j.Submit, j.Submit.Add(j.EstDuration)
		for h := int(from.Sub(start) / time.Hour); h < hours; h++ {
			hs, he := start.Add(time.Duration(h)*time.Hour), start.Add(time.Duration(h+1)*time.Hour)
			a0, a1 := maxT(from, hs), minT(to, he)
			if !a1.After(a0) {
				if a0.After(to) || a0.Equal(to) {
					break
				}
				continue
			}
			use := milli * int64(a1.Sub(a0)/time.Second)
			a.all[h] += use
			if j.Interruptible {
				a.intr[h] += use
			}
			if j.Deferrable || j.Tier == core.TierOffline {
				a.def[h] += use
			}
		}
	}
	s := Series{Start: start, Hours: hours}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	gpus := func(ms int64) int64 { return (ms + 3600*1000 - 1) / (3600 * 1000) }
	for _, m := range models {
		a := byModel[m]
		cd := ClassDemand{GPUModel: m, GPUs: make([]int64, hours), Interruptible: make([]int64, hours), Deferrable: make([]int64, hours)}
		for h := 0; h < hours; h++ {
			cd.GPUs[h] = gpus(a.all[h])
			// The parts round down so that together they never exceed the whole.
			cd.Interruptible[h] = a.intr[h] / (3600 * 1000)
			cd.Deferrable[h] = min(a.def[h]/(3600*1000), cd.GPUs[h]-cd.Interruptible[h])
		}
		s.Classes = append(s.Classes, cd)
	}
	return s, s.Validate()
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minT(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
