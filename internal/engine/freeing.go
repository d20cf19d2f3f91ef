package engine

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// freedFirst are the waiting units that GPUs freed by running work
// before by (the soonest a machine rented now could be ready) will hold:
// the scheduler places them there when that work ends, and a machine
// rented for them would come only after, to stand empty or take work that
// was not waiting for it — a day's term, paid whole (fleet.Demand.Freeing).
// Only work whose estimated end lies between now and by counts, so work
// that overruns its estimate holds nothing back: a unit is held for at
// most the time to the last estimated end it counted on. Work with a
// deadline is not held: the freed GPUs may go to work ahead of it, and its
// rental would then come a delay later. Nor is work of a tier whose wait
// target (wait) is zero: it is rented for the moment it waits (the
// autoscaler-style baselines). sd's placements and the moves take GPUs
// first; the allocations sd preempts are being stopped, and their GPUs
// are not counted twice.
// rentCost (nil: none) is the scheduler's rule that keeps work off
// pay-as-you-go machines (sched.State.RentCost): GPUs it would refuse a
// unit are not counted for it, or the unit would wait for them and
// nothing would be rented.
func freedFirst(v *view, sd *sched.Decisions, moves []sched.Move, shapes sched.MachineShapes, rentCost func(sched.Unit) core.Micros, wait map[core.Tier]time.Duration, now, by time.Time) map[sched.Unit]bool {
	if len(sd.Waiting) == 0 || !by.After(now) {
		return nil
	}
	preempted := preemptedUnits(sd)
	ending := false
	for i := range v.running {
		if endsWithin(&v.running[i], now, by) && !preempted[v.running[i].Unit] {
			ending = true
			break
		}
	}
	if !ending {
		return nil // most steps: nothing ends before a machine would come
	}
	free := make([][]core.Milli, len(v.nodes))
	for n := range v.nodes {
		free[n] = make([]core.Milli, len(v.nodes[n].GPUs))
		for g, gpu := range v.nodes[n].GPUs {
			free[n][g] = gpu.FreeMilli
		}
	}
	for _, t := range takenParts(sd, moves) {
		for _, g := range t.part.GPUs {
			free[t.part.Node][g] -= t.milli
		}
	}
	for i := range v.running {
		a := &v.running[i]
		if !endsWithin(a, now, by) || preempted[a.Unit] {
			continue
		}
		for _, p := range a.Parts {
			for _, g := range p.GPUs {
				free[p.Node][g] += a.Job.Request.MilliPerGPU
			}
		}
	}
	var out map[sched.Unit]bool
	for _, w := range sd.Waiting {
		if !w.Unit.Job.Deadline.IsZero() || wait[w.Unit.Job.Tier] == 0 {
			continue
		}
		payGo := rentCost == nil || rentCost(w.Unit) == 0
		if holdFor(v.nodes, free, w.Unit.Job, shapes, payGo) {
			if out == nil {
				out = map[sched.Unit]bool{}
			}
			out[w.Unit] = true
		}
	}
	return out
}

// takenPart is a part of a placement or move made this step.
type takenPart struct {
	part  sched.Part
	milli core.Milli
}

// endsWithin: a's work is estimated to end after now and by by.
func endsWithin(a *sched.Allocation, now, by time.Time) bool {
	end, ok := a.EstEnd()
	return ok && end.After(now) && !end.After(by)
}

// holdFor reports whether j's request fits on free (per node and GPU) and,
// if so, takes its GPUs there: on one node that may take it, or — a
// whole-GPU gang larger than every such node and every machine offered,
// which the scheduler spans over machines — on enough such nodes with
// every GPU free. payGo: nodes not on a committed term may take it.
func holdFor(nodes []core.Node, free [][]core.Milli, j *core.Job, shapes sched.MachineShapes, payGo bool) bool {
	r := &j.Request
	may := func(n int) bool {
		return r.Admits(nodes[n].Hardware()) && (!nodes[n].Spot || j.Interruptible) && (payGo || nodes[n].Committed)
	}
	largest := shapes.Largest(r)
	for n := range nodes {
		if may(n) {
			largest = max(largest, len(nodes[n].GPUs))
		}
	}
	if largest == 0 {
		return false
	}
	fitsGPU := func(f core.Milli) bool {
		return f >= r.MilliPerGPU && (r.MilliPerGPU < core.WholeGPU || f == core.WholeGPU)
	}
	if r.GPUs <= largest {
		for n := range nodes {
			if len(nodes[n].GPUs) < r.GPUs || !may(n) {
				continue
			}
			k := 0
			for _, f := range free[n] {
				if fitsGPU(f) {
					k++
				}
			}
			if k < r.GPUs {
				continue
			}
			k = r.GPUs
			for g := range free[n] {
				if k > 0 && fitsGPU(free[n][g]) {
					free[n][g] -= r.MilliPerGPU
					k--
				}
			}
			return true
		}
		return false
	}
	if r.MilliPerGPU < core.WholeGPU {
		return false
	}
	var whole []int
	got := 0
	for n := range nodes {
		if got >= r.GPUs || !may(n) {
			continue
		}
		empty := true
		for _, f := range free[n] {
			empty = empty && f == core.WholeGPU
		}
		if empty && len(free[n]) > 0 {
			whole = append(whole, n)
			got += len(free[n])
		}
	}
	if got < r.GPUs {
		return false
	}
	for _, n := range whole {
		for g := range free[n] {
			free[n][g] = 0
		}
	}
	return true
}

// takenParts are the GPUs this step's placements and moves took.
func takenParts(sd *sched.Decisions, moves []sched.Move) []takenPart {
	var out []takenPart
	for _, p := range sd.Placements {
		for _, part := range p.Parts {
			out = append(out, takenPart{part, p.Unit.Job.Request.MilliPerGPU})
		}
	}
	for _, m := range moves {
		for _, part := range m.To {
			out = append(out, takenPart{part, m.Unit.Job.Request.MilliPerGPU})
		}
	}
	return out
}

// preemptedUnits are the running units this step stops.
func preemptedUnits(sd *sched.Decisions) map[sched.Unit]bool {
	if len(sd.Preemptions) == 0 {
		return nil
	}
	out := make(map[sched.Unit]bool, len(sd.Preemptions))
	for _, p := range sd.Preemptions {
		out[p.Victim.Unit] = true
	}
	return out
}
