package sched

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Why a running unit may be preempted.
const (
	notPreemptible = iota
	lowerTier      // its tier is below the preemptor's
	reclaimed      // its team borrows quota the preemptor's team is owed
)

// canPreempt reports whether running allocation a may be stopped for
// unit u, and on what ground: never core-tier or non-interruptible work,
// never before its minimum runtime; only lower-tier work, or work of a
// team running on borrowed quota when u's team reclaims its own
// guarantee.
func (p *pass) canPreempt(a *Allocation, u Unit, model Class) int {
	if !p.tierVictim(a, u.Job.Tier.Rank()) {
		if !p.basicVictim(a) {
			return notPreemptible
		}
		j := a.Job
		// Borrowing is judged on what ran before this pass: work admitted
		// in it is not yet anyone's to reclaim.
		if j.Team != u.Job.Team && p.q.sameCohort(j.Team, u.Job.Team) && p.q0.borrowing(j.Team, model) && p.q.borrowing(j.Team, model) && p.q.underGuarantee(u.Job.Team, model, u.Milli()) {
			return reclaimed
		}
		return notPreemptible
	}
	return lowerTier
}

// basicVictim: interruptible, not core, past its minimum runtime, on one
// machine (a multi-machine gang is not split by preemption), and — under
// a deadline-aware policy — with slack enough to get capacity again and
// still end by its deadline (stoppable).
func (p *pass) basicVictim(a *Allocation) bool {
	j := a.Job
	return j.Interruptible && j.Tier != core.TierCore && len(a.Parts) == 1 && p.st.Now.Sub(a.Start) >= p.cfg.MinRuntime && p.stoppable(a)
}

// tierVictim reports whether a may be preempted by work of tier rank.
func (p *pass) tierVictim(a *Allocation, rank int) bool {
	return p.basicVictim(a) && a.Job.Tier.Rank() > rank
}

func (p *pass) victimReason(a *Allocation, u Unit, ground int) string {
	if ground == reclaimed {
		return fmt.Sprintf("team %s reclaims quota lent to %s", u.Job.Team, a.Job.Team)
	}
	return fmt.Sprintf("%s tier below %s", a.Job.Tier, u.Job.Tier)
}

// victimSet is the outcome of trying one node.
type victimSet struct {
	node    int
	victims []int // indexes into pass.running
	grounds []int
	lost    int64
	gpus    []int
}

// nodeBound is a node's entry in a preemption heap: the least work any
// one of its victims would lose, as of the node's version.
type nodeBound struct {
	bound   int64
	node    int
	version int
}

type boundHeap []nodeBound

func (h boundHeap) Len() int { return len(h) }
func (h boundHeap) Less(i, j int) bool {
	if h[i].bound != h[j].bound {
		return h[i].bound < h[j].bound
	}
	return h[i].node < h[j].node
}
func (h boundHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *boundHeap) Push(x any)   { *h = append(*h, x.(nodeBound)) }
func (h *boundHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// tierBound returns node n's lower bound on lost work for a preemptor of
// tier rank, and the milli-GPUs it could free, or ok false if no victim.
func (p *pass) tierBound(n, rank int) (bound, free int64, ok bool) {
	free = int64(p.pl.nodes[n].FreeMilli())
	bound = -1
	for _, i := range p.victims(n) {
		if p.gone[i] || !p.tierVictim(&p.running[i], rank) {
			continue
		}
		free += int64(p.running[i].Milli())
		if bound < 0 {
			bound = p.lost[i] // victims are sorted by loss: the first is the least
		}
	}
	return bound, free, bound >= 0
}

// preemptNeedBound turns needBound's pruning on; a test turns it off to
// check that it changes no decision.
var preemptNeedBound = true

// victimAge is a victim's share and the seconds since its checkpoint:
// its loss is the product.
type victimAge struct{ milli, age int64 }

// needBound is a lower bound on the work lost by any set of node n's
// victims (for a preemptor of tier rank) that frees room for need
// milli-GPUs: they must free at least need less the node's free share,
// and a victim's loss is its share times its age, so taking the youngest
// shares first, the last in part, loses least (the fractional knapsack's
// answer). It is exact for whole victims of equal shares and never above
// the true least loss, so a node whose bound passes the best loss found
// cannot win and need not be tried (tryNode is the costly part).
func (p *pass) needBound(n, rank int, need int64) int64 {
	deficit := need - int64(p.pl.nodes[n].FreeMilli())
	if deficit <= 0 {
		return 0
	}
	ages := p.ages[:0]
	for _, i := range p.victims(n) {
		if p.gone[i] || !p.tierVictim(&p.running[i], rank) {
			continue
		}
		m := int64(p.running[i].Milli())
		if m > 0 {
			ages = append(ages, victimAge{milli: m, age: p.lost[i] / m})
		}
	}
	slices.SortFunc(ages, func(a, b victimAge) int { return cmp.Compare(a.age, b.age) })
	p.ages = ages
	var bound int64
	for _, v := range ages {
		take := min(v.milli, deficit)
		bound += take * v.age
		if deficit -= take; deficit == 0 {
			break
		}
	}
	return bound
}

// heaps returns, building it on first use, the preemption heap per GPU
// model for preemptors of tier rank.
func (p *pass) heaps(rank int) map[string]*boundHeap {
	if p.preemptHeaps[rank] != nil {
		return p.preemptHeaps[rank]
	}
	hs := map[string]*boundHeap{}
	for n := range p.pl.nodes {
		b, _, ok := p.tierBound(n, rank)
		if !ok {
			continue
		}
		m := p.pl.nodes[n].GPUModel
		if hs[m] == nil {
			hs[m] = &boundHeap{}
		}
		*hs[m] = append(*hs[m], nodeBound{bound: b, node: n, version: p.nodeVer[n]})
	}
	for _, h := range hs {
		heap.Init(h)
	}
	p.preemptHeaps[rank] = hs
	return hs
}

// tryPreempt looks for the node where u fits after stopping the victims
// that lose the least work since their last checkpoints. Each node is
// tried hypothetically: victims are removed one by one, cheapest first,
// until u fits; then any victim not needed is reprieved; then everything
// is rolled back. Lower-tier victims are searched first, nodes in order
// of a lower bound on their loss kept in a heap per GPU model, stopping
// once no node can beat the best found; only if that finds nothing does a
// team under its guarantee look for borrowed work to reclaim.
func (p *pass) tryPreempt(u Unit) bool {
	r := &u.Job.Request
	if r.GPUs > p.pl.maxNodeGPUs(r) {
		return false // multi-machine gangs are not placed by preemption
	}
	// Within a pass the room a preemptor can get — free capacity plus
	// what it may preempt — only shrinks (placements take it, preemptions
	// hand theirs to their preemptor), so a shape that found no victims
	// is not searched again until the next pass — unless the search
	// passed over a node for u's own term (refusedForTerm depends on u's
	// run, not only its shape).
	key := failKey(u)
	if p.preemptFail[key] {
		return false
	}
	best := p.searchTierVictims(u)
	if best == nil && p.q.mayReclaim(u.Job.Team) {
		best = p.searchReclaim(u)
	}
	if best == nil {
		if !p.termSkipped {
			p.preemptFail[key] = true
		}
		return false
	}
	keys := make([]string, 0, len(best.victims))
	for k, i := range best.victims {
		a := p.running[i]
		why := p.victimReason(&a, u, best.grounds[k])
		p.gone[i] = true
		p.pl.remove(&a.Unit, a.Parts)
		p.nodeVer[a.Parts[0].Node]++
		model := p.pl.nodes[a.Parts[0].Node].GPUModel
		p.q.add(a.Job.Team, model, -a.Milli())
		p.addAlloc(a.Job.Team, model, -int64(a.Milli()))
		p.dec.Preemptions = append(p.dec.Preemptions, Preemption{Victim: a, For: u.Key(), LostMilliSeconds: p.lost[i],
			Reason: fmt.Sprintf("preempted for %s (%s); %.2f GPU-hours since its last recorded checkpoint may be lost (less if it checkpoints on its own)", u.Key(), why, float64(p.lost[i])/3.6e6)})
		keys = append(keys, a.Key())
	}
	parts := []Part{{Node: best.node, GPUs: best.gpus}}
	p.commit(u, parts, fmt.Sprintf("%s after preempting %s (least work lost: %.2f GPU-hours)", p.placeReason(u, parts), strings.Join(keys, ", "), float64(best.lost)/3.6e6))
	return true
}

// shapeKey identifies what decides whether a unit can preempt: its team
// (quota), tier, interruptibility (spot) and request shape.
type shapeKey struct {
	team          string
	rank          int
	interruptible bool
	gpus          int
	milli         core.Milli
	mem           int64
	models        string
}

func failKey(u Unit) shapeKey {
	r := &u.Job.Request
	return shapeKey{u.Job.Team, u.Job.Tier.Rank(), u.Job.Interruptible, r.GPUs, r.MilliPerGPU, r.MemPerGPUMiB, strings.Join(r.Models, ",")}
}

func (p *pass) preemptableNode(u Unit, n int) bool {
	node := &p.pl.nodes[n]
	if node.Spot && !u.Job.Interruptible {
		return false
	}
	if res := p.res; res != nil && res.Node == n {
		return false
	}
	if _, no := p.refusedForTerm(n, u); no {
		p.termSkipped = true
		return false
	}
	return true
}

func (p *pass) searchTierVictims(u Unit) *victimSet {
	r := &u.Job.Request
	rank := u.Job.Tier.Rank()
	need := int64(u.Milli())
	var best *victimSet
	var keep []nodeBound
	hs := p.heaps(rank)
	for _, m := range p.pl.ix.allowedModels(r, p.pl.modelBuf) {
		h := hs[p.pl.ix.modelIDs[m]]
		if h == nil {
			continue
		}
		keep = keep[:0]
		for h.Len() > 0 {
			top := (*h)[0]
			if best != nil && top.bound >= best.lost {
				break
			}
			heap.Pop(h)
			if top.version != p.nodeVer[top.node] {
				// The node changed since its entry: refresh it.
				if b, _, ok := p.tierBound(top.node, rank); ok {
					heap.Push(h, nodeBound{bound: b, node: top.node, version: p.nodeVer[top.node]})
				}
				continue
			}
			keep = append(keep, top)
			if _, free, _ := p.tierBound(top.node, rank); free < need || !p.preemptableNode(u, top.node) {
				continue
			}
			if best != nil && preemptNeedBound && p.needBound(top.node, rank, need) > best.lost {
				continue // every victim set here loses more than the best found
			}
			if vs, ok := p.tryNode(u, top.node, func(a *Allocation) int {
				if p.tierVictim(a, rank) {
					return lowerTier
				}
				return notPreemptible
			}); ok && (best == nil || vs.lost < best.lost || vs.lost == best.lost && len(vs.victims) < len(best.victims)) {
				best = &vs
			}
		}
		for _, e := range keep {
			heap.Push(h, e)
		}
	}
	return best
}

// searchReclaim scans every node for borrowed work u's team may reclaim.
// It runs only when the team is under its guarantee somewhere, so it is
// rare and may be a full scan.
func (p *pass) searchReclaim(u Unit) *victimSet {
	r := &u.Job.Request
	var best *victimSet
	for n := range p.pl.nodes {
		node := &p.pl.nodes[n]
		if !r.Admits(node.Hardware()) || !p.preemptableNode(u, n) || len(p.onNode[n]) == 0 || !p.q.underGuarantee(u.Job.Team, node.GPUModel, u.Milli()) {
			continue
		}
		model := node.GPUModel
		vs, ok := p.tryNode(u, n, func(a *Allocation) int { return p.canPreempt(a, u, model) })
		if ok && (best == nil || vs.lost < best.lost || vs.lost == best.lost && len(vs.victims) < len(best.victims)) {
			best = &vs
		}
	}
	return best
}

// tryNode computes the cheapest victim set on node n for u, leaving the
// placer as it found it (checkpoint and rollback).
func (p *pass) tryNode(u Unit, n int, eligible func(a *Allocation) int) (victimSet, bool) {
	r := &u.Job.Request
	model := p.pl.nodes[n].GPUModel
	var removed []int
	var whys []int
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
	for _, i := range p.victims(n) {
		if gpus != nil {
			break
		}
		a := &p.running[i]
		if p.gone[i] {
			continue
		}
		why := eligible(a)
		if why == notPreemptible {
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
	vs := victimSet{node: n, victims: append([]int(nil), removed...), grounds: whys, gpus: gpus}
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
		if !r.Admits(node.Hardware()) || node.Spot && !u.Job.Interruptible || len(node.GPUs) < r.GPUs {
			continue
		}
		if _, no := p.refusedForTerm(n, u); no {
			continue // it waits for a machine of its own, not for this one
		}
		ends := p.ends[:0] // working space, reused from node to node
		for _, i := range p.victims(n) {
			if !p.gone[i] && p.running[i].Job.EstDuration > 0 && len(p.running[i].Parts) == 1 {
				ends = append(ends, i)
			}
		}
		end := func(i int) time.Time { e, _ := p.running[i].EstEnd(); return e }
		sort.Slice(ends, func(a, b int) bool { return end(ends[a]).Before(end(ends[b])) })
		removed := p.removed[:0]
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
		p.ends, p.removed = ends, removed
	}
	if found {
		best.Reason = fmt.Sprintf("%s is the highest-priority blocked unit; %s frees enough for it at %s by running units' estimates; only work ending before then is backfilled there",
			u.Key(), p.st.Nodes[best.Node].LeaseID, best.At.UTC().Format(time.RFC3339))
	}
	return best, found
}
