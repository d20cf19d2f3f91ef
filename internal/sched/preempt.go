package sched

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// canPreempt reports whether running allocation a may be stopped for
// unit u, and why: never core-tier or non-interruptible work, never
// before its minimum runtime; only lower-tier work, or work its team is
// running on borrowed quota when u's team reclaims its own guarantee.
func (p *pass) canPreempt(a *Allocation, u Unit, model Class) (bool, string) {
	j := a.Job
	if j.Tier == core.TierCore || !j.Interruptible {
		return false, ""
	}
	if p.st.Now.Sub(a.Start) < p.cfg.MinRuntime {
		return false, ""
	}
	if j.Tier.Rank() > u.Job.Tier.Rank() {
		return true, fmt.Sprintf("%s tier below %s", j.Tier, u.Job.Tier)
	}
	if j.Team != u.Job.Team && p.q.sameCohort(j.Team, u.Job.Team) && p.q.borrowing(j.Team, model) && p.q.underGuarantee(u.Job.Team, model, u.Milli()) {
		return true, fmt.Sprintf("team %s reclaims its %s quota lent to %s", u.Job.Team, model, j.Team)
	}
	return false, ""
}

// victimSet is the outcome of trying one node.
type victimSet struct {
	node    int
	victims []int // indexes into pass.running
	why     []string
	lost    int64
	gpus    []int
}

// tryPreempt looks for the node where u fits after stopping the victims
// that lose the least work since their last checkpoints. Each node is
// tried hypothetically: victims are removed one by one, cheapest first,
// until u fits; then any victim not needed is reprieved; then everything
// is rolled back. Nodes are tried in order of a lower bound on their loss
// and the search stops once no node can beat the best found.
func (p *pass) tryPreempt(u Unit) bool {
	r := &u.Job.Request
	if r.GPUs > p.pl.maxNodeGPUs(r) {
		return false // multi-machine gangs are not placed by preemption
	}
	type cand struct {
		node  int
		bound int64
	}
	var cands []cand
	need := int64(u.Milli())
	for n := range p.pl.nodes {
		node := &p.pl.nodes[n]
		if !modelAllowed(node, r) || node.Spot && !u.Job.Interruptible || len(p.onNode[n]) == 0 {
			continue
		}
		if res := p.res; res != nil && res.Node == n {
			continue
		}
		free := int64(node.FreeMilli())
		bound := int64(-1)
		for _, i := range p.onNode[n] {
			if p.gone[i] {
				continue
			}
			a := &p.running[i]
			if len(a.Parts) != 1 {
				continue
			}
			if ok, _ := p.canPreempt(a, u, node.GPUModel); ok {
				free += int64(a.Milli())
				if bound < 0 {
					bound = p.lost[i] // victims are sorted by loss: the first is the least
				}
			}
		}
		if bound < 0 || free < need {
			continue
		}
		cands = append(cands, cand{n, bound})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].bound != cands[j].bound {
			return cands[i].bound < cands[j].bound
		}
		return cands[i].node < cands[j].node
	})
	var best *victimSet
	for _, c := range cands {
		if best != nil && c.bound >= best.lost {
			break
		}
		if vs, ok := p.tryNode(u, c.node); ok && (best == nil || vs.lost < best.lost || vs.lost == best.lost && len(vs.victims) < len(best.victims)) {
			best = &vs
		}
	}
	if best == nil {
		return false
	}
	keys := make([]string, 0, len(best.victims))
	for k, i := range best.victims {
		a := p.running[i]
		p.gone[i] = true
		p.pl.remove(&a.Unit, a.Parts)
		model := p.pl.nodes[a.Parts[0].Node].GPUModel
		p.q.add(a.Job.Team, model, -a.Milli())
		p.addAlloc(a.Job.Team, model, -int64(a.Milli()))
		p.dec.Preemptions = append(p.dec.Preemptions, Preemption{Victim: a, For: u.Key(), LostMilliSeconds: p.lost[i],
			Reason: fmt.Sprintf("preempted for %s (%s); %.2f GPU-hours since its last checkpoint are lost", u.Key(), best.why[k], float64(p.lost[i])/3.6e6)})
		keys = append(keys, a.Key())
	}
	parts := []Part{{Node: best.node, GPUs: best.gpus}}
	p.commit(u, parts, fmt.Sprintf("%s after preempting %s (least work lost: %.2f GPU-hours)", p.placeReason(u, parts), strings.Join(keys, ", "), float64(best.lost)/3.6e6))
	return true
}

// tryNode computes the cheapest victim set on node n for u, leaving the
// placer as it found it (checkpoint and rollback).
func (p *pass) tryNode(u Unit, n int) (victimSet, bool) {
	r := &u.Job.Request
	model := p.pl.nodes[n].GPUModel
	var removed []int
	var whys []string
	rollback := func() {
		for _, i := range removed {
			a := &p.running[i]
			p.pl.place(&a.Unit, a.Parts)
			p.q.add(a.Job.Team, model, a.Milli())
		}
	}
	fits := func() []int {
		if ok, _ := p.q.fits(u.Job.Team, model, u.Milli()); !ok {
			return nil
		}
		return p.pl.fitOn(n, r)
	}
	gpus := fits()
	for _, i := range p.onNode[n] {
		if gpus != nil {
			break
		}
		a := &p.running[i]
		if p.gone[i] || len(a.Parts) != 1 {
			continue
		}
		ok, why := p.canPreempt(a, u, model)
		if !ok {
			continue
		}
		p.pl.remove(&a.Unit, a.Parts)
		p.q.add(a.Job.Team, model, -a.Milli())
		removed = append(removed, i)
		whys = append(whys, why)
		gpus = fits()
	}
	if gpus == nil {
		rollback()
		return victimSet{}, false
	}
	// Reprieve: give back, most expensive first, every victim u does not
	// need.
	for k := len(removed) - 1; k >= 0; k-- {
		i := removed[k]
		a := &p.running[i]
		p.pl.place(&a.Unit, a.Parts)
		p.q.add(a.Job.Team, model, a.Milli())
		if g := fits(); g != nil {
			gpus = g
			removed = append(removed[:k], removed[k+1:]...)
			whys = append(whys[:k], whys[k+1:]...)
			continue
		}
		p.pl.remove(&a.Unit, a.Parts)
		p.q.add(a.Job.Team, model, -a.Milli())
	}
	vs := victimSet{node: n, victims: append([]int(nil), removed...), why: whys, gpus: gpus}
	for _, i := range removed {
		vs.lost += p.lost[i]
	}
	rollback()
	return vs, true
}

// reserve finds the earliest time and node at which u would fit as the
// running units end (by their estimated durations), for backfill.
func (p *pass) reserve(u Unit) (Reservation, bool) {
	r := &u.Job.Request
	if r.GPUs > p.pl.maxNodeGPUs(r) {
		return Reservation{}, false
	}
	best := Reservation{}
	found := false
	for n := range p.pl.nodes {
		node := &p.pl.nodes[n]
		if !modelAllowed(node, r) || node.Spot && !u.Job.Interruptible || len(node.GPUs) < r.GPUs {
			continue
		}
		ends := make([]int, 0, len(p.onNode[n]))
		for _, i := range p.onNode[n] {
			if !p.gone[i] && p.running[i].Job.EstDuration > 0 && len(p.running[i].Parts) == 1 {
				ends = append(ends, i)
			}
		}
		end := func(i int) time.Time { return p.running[i].Start.Add(p.running[i].Job.EstDuration) }
		sort.Slice(ends, func(a, b int) bool { return end(ends[a]).Before(end(ends[b])) })
		var removed []int
		for _, i := range ends {
			if found && !end(i).Before(best.At) {
				break
			}
			a := &p.running[i]
			p.pl.remove(&a.Unit, a.Parts)
			removed = append(removed, i)
			if p.pl.fitOn(n, r) != nil {
				at := end(i)
				if at.Before(p.st.Now) {
					at = p.st.Now
				}
				if !found || at.Before(best.At) {
					best, found = Reservation{Unit: u, Node: n, At: at}, true
				}
				break
			}
		}
		for _, i := range removed {
			a := &p.running[i]
			p.pl.place(&a.Unit, a.Parts)
		}
	}
	if found {
		best.Reason = fmt.Sprintf("%s is the highest-priority blocked unit; %s frees enough for it at %s by running units' estimates; only work ending before then is backfilled there",
			u.Key(), p.st.Nodes[best.Node].LeaseID, best.At.UTC().Format(time.RFC3339))
	}
	return best, found
}
