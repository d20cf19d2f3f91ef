package sched

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Config tunes the default policy. The zero value is usable: every field
// falls back to the default its comment gives.
type Config struct {
	// MinRuntime protects a unit from preemption until it has run this
	// long (default 10 minutes), so that work is not thrashed.
	MinRuntime time.Duration
	// HalfLife is the fair-share history's half-life (default 24 h):
	// decayed usage is divided by it to compare with current allocation.
	HalfLife time.Duration
	// DeferMinSavingBP is the least saving, in basis points, worth
	// deferring work into a cheaper window for (default 500 = 5%).
	DeferMinSavingBP int64
	// DeferHorizon is how far ahead deferral looks (default 7 days).
	DeferHorizon time.Duration
	// NoPreemption and NoBackfill switch those parts off.
	NoPreemption, NoBackfill bool
	// Scorer replaces the default placement ranking (for baselines).
	Scorer Scorer
	// NoDeadlines turns off ordering each tier by urgency (deadline.go):
	// units at risk of missing their deadline or wait target first, then
	// the others with a deadline, earliest first, then the rest by fair
	// share. With it on (the baselines) fair share and age alone order a
	// tier.
	NoDeadlines bool
	// WaitP99 is each tier's p99 wait target (zero: none): a unit is at
	// risk when its wait comes within RiskLead of it, and is never
	// deferred past it. Nil: the defaults, core 15 minutes, regular 1
	// hour, offline 4 hours.
	WaitP99 map[core.Tier]time.Duration
	// RiskLead is how long before its latest start a unit is at risk:
	// the time capacity takes to come (provisioning) plus a margin
	// (default 8 minutes: the fleet's default 3-minute provisioning delay
	// and 5 minutes; negative: at its latest start).
	RiskLead time.Duration
	// DefaultDuration is the work assumed for a unit without an
	// estimate, for its slack (default 1 hour, as the fleet's).
	DefaultDuration time.Duration
}

// FairShareHalfLife is the half-life the fair-share history decays
// with: HalfLife, or its default when unset. The engine decays
// State.History by it, so that what it records is what share reads.
func (c Config) FairShareHalfLife() time.Duration {
	if c.HalfLife == 0 {
		return 24 * time.Hour
	}
	return c.HalfLife
}

func (c Config) withDefaults() Config {
	if c.MinRuntime == 0 {
		c.MinRuntime = 10 * time.Minute
	}
	c.HalfLife = c.FairShareHalfLife()
	if c.DeferMinSavingBP == 0 {
		c.DeferMinSavingBP = 500
	}
	if c.DeferHorizon == 0 {
		c.DeferHorizon = 7 * 24 * time.Hour
	}
	if c.WaitP99 == nil {
		c.WaitP99 = map[core.Tier]time.Duration{core.TierCore: 15 * time.Minute, core.TierRegular: time.Hour, core.TierOffline: 4 * time.Hour}
	}
	switch {
	case c.RiskLead == 0:
		c.RiskLead = 8 * time.Minute
	case c.RiskLead < 0:
		c.RiskLead = 0
	}
	if c.DefaultDuration == 0 {
		c.DefaultDuration = time.Hour
	}
	return c
}

// Defaults returns c with every zero field set to its default, as
// Schedule reads it: LatestStart and AtRisk want a config so completed.
func (c Config) Defaults() Config { return c.withDefaults() }

// pass is one scheduling pass's working state.
type pass struct {
	st  *State
	cfg Config
	pl  *Placer
	q   *quotas
	q0  *quotas // quotas as the pass found them
	// quotaMemo is schedule's reusable answers of q per GPU class.
	quotaMemo []quotaAnswer
	dec       Decisions
	caps      map[Class]int64 // milli-GPU capacity per class
	// alloc is each team's current allocation per class, for fair share.
	alloc map[string]map[Class]int64
	spent map[string]core.Micros
	teams map[string]*core.Team
	// placedUntil is, per node, the latest estimated end of the work this
	// pass put there (kept only with State.RentCost).
	placedUntil map[int]time.Time
	// onNode lists the running allocations per node, by index into running.
	running []Allocation
	onNode  [][]int
	sorted  []bool // onNode[n] is in victim order (see victims)
	gone    []bool // running allocations preempted in this pass
	lost    []int64
	res     *Reservation
	// nodeVer counts changes per node, to refresh preemption heaps.
	nodeVer      []int
	preemptHeaps [4]map[string]*boundHeap
	preemptFail  map[shapeKey]bool
	// term is RentCost for the unit being placed, asked at most once
	// (termAsked), for refusedForTerm; termSkipped: a preemption search
	// for it passed over a node refusedForTerm refused.
	term                   core.Micros
	termAsked, termSkipped bool
	// modelSums and modelSeen are teamAlloc's working space, ends and
	// removed reserve's.
	modelSums     []int64
	modelSeen     []bool
	ends, removed []int
	// ages is needBound's working space.
	ages []victimAge
	// deferCache memoises deferral answers by estimated duration.
	deferCache map[time.Duration]deferAnswer
}

// Schedule decides placements, preemptions, deferrals and reservations
// for st's pending units on st's capacity. It does not change st.
func Schedule(st *State, cfg Config) Decisions {
	if len(st.Pending) == 0 {
		return Decisions{} // nothing to decide: skip building the pass
	}
	p := newPass(st, cfg.withDefaults())
	for tier := 0; tier <= 3; tier++ {
		p.runTier(tier)
	}
	return p.dec
}

func newPass(st *State, cfg Config) *pass {
	p := &pass{st: st, cfg: cfg, running: st.Running}
	if sc := st.Scratch; sc != nil {
		m := &sc.maps
		if m.caps == nil {
			*m = passMaps{caps: map[Class]int64{}, alloc: map[string]map[Class]int64{}, spent: map[string]core.Micros{},
				teams: map[string]*core.Team{}, preemptFail: map[shapeKey]bool{}, deferCache: map[time.Duration]deferAnswer{}}
		}
		clear(m.caps)
		clear(m.alloc)
		clear(m.spent)
		clear(m.teams)
		clear(m.preemptFail)
		clear(m.deferCache)
		p.caps, p.alloc, p.spent, p.teams, p.preemptFail, p.deferCache = m.caps, m.alloc, m.spent, m.teams, m.preemptFail, m.deferCache
		p.modelSums, p.modelSeen = sc.modelSums, sc.modelSeen
		sc.onNode = resize(sc.onNode, len(st.Nodes))
		for n := range sc.onNode {
			sc.onNode[n] = sc.onNode[n][:0]
		}
		sc.gone, sc.lost, sc.nodeVer, sc.sorted = resize(sc.gone, len(st.Running)), resize(sc.lost, len(st.Running)), resize(sc.nodeVer, len(st.Nodes)), resize(sc.sorted, len(st.Nodes))
		clear(sc.gone)
		clear(sc.lost)
		clear(sc.nodeVer)
		clear(sc.sorted)
		p.onNode, p.gone, p.lost, p.nodeVer, p.sorted = sc.onNode, sc.gone, sc.lost, sc.nodeVer, sc.sorted
		p.pl = newPlacer(&sc.schedule, st.Nodes, st.NodeCost, st.Pending, cfg.Scorer)
	} else {
		p.caps, p.alloc, p.spent, p.teams, p.preemptFail, p.deferCache = map[Class]int64{}, map[string]map[Class]int64{}, map[string]core.Micros{},
			map[string]*core.Team{}, map[shapeKey]bool{}, map[time.Duration]deferAnswer{}
		p.onNode, p.gone, p.lost, p.nodeVer, p.sorted = make([][]int, len(st.Nodes)), make([]bool, len(st.Running)), make([]int64, len(st.Running)), make([]int, len(st.Nodes)), make([]bool, len(st.Nodes))
		p.pl = NewPlacer(st.Nodes, st.NodeCost, st.Pending, cfg.Scorer)
	}
	p.pl.paid = st.NodePaidUntil
	p.q = newQuotas(st.Teams, st.Running, st.Nodes)
	p.q0 = newQuotas(st.Teams, st.Running, st.Nodes)
	for i := range st.Teams {
		p.teams[st.Teams[i].ID] = &st.Teams[i]
	}
	// Capacity per class, summed over runs of one model (neighbouring
	// nodes mostly share theirs) to look each class up less often.
	var run int64
	for i, n := range st.Nodes {
		run += int64(len(n.GPUs)) * int64(core.WholeGPU)
		if i+1 == len(st.Nodes) || st.Nodes[i+1].GPUModel != n.GPUModel {
			p.caps[n.GPUModel] += run
			run = 0
		}
	}
	for t, s := range st.Spent {
		p.spent[t] = s
	}
	for i, a := range st.Running {
		for _, part := range a.Parts {
			p.onNode[part.Node] = append(p.onNode[part.Node], i)
		}
	}
	return p
}

// victims lists the running allocations on node n, cheapest victims
// first, and sets their lost work in p.lost. The order is sorted on first use: most passes never look for a
// victim, and sorting every node at every pass was a large part of the
// pass's set-up.
func (p *pass) victims(n int) []int {
	if p.sorted[n] {
		return p.onNode[n]
	}
	p.sorted[n] = true
	l := p.onNode[n]
	// What preempting each would lose (read only for victims listed here).
	for _, i := range l {
		a := &p.running[i]
		since := a.Start
		if a.LastCheckpoint.After(since) {
			since = a.LastCheckpoint
		}
		p.lost[i] = int64(a.Milli()) * int64(p.st.Now.Sub(since)/time.Second)
	}
	sort.Slice(l, func(a, b int) bool {
		if p.lost[l[a]] != p.lost[l[b]] {
			return p.lost[l[a]] < p.lost[l[b]]
		}
		return p.running[l[a]].Key() < p.running[l[b]].Key()
	})
	return l
}

func (p *pass) addAlloc(team string, c Class, milli int64) {
	p.teamAlloc(team)[c] += milli
}

// teamAlloc returns the team's current allocation per class, counting
// its running work on first use: only the teams with pending work are
// ever asked, and counting every running unit into maps at every pass
// was a large part of the pass's set-up.
func (p *pass) teamAlloc(team string) map[Class]int64 {
	if m, ok := p.alloc[team]; ok {
		return m
	}
	// Summed per model id of the placer's index (a map update per part
	// was most of the cost), then kept by class.
	ix := p.pl.ix
	sums := resize(p.modelSums, len(ix.modelIDs))
	seen := resize(p.modelSeen, len(ix.modelIDs))
	clear(sums)
	clear(seen)
	p.modelSums, p.modelSeen = sums, seen
	if sc := p.st.Scratch; sc != nil {
		sc.modelSums, sc.modelSeen = sums, seen
	}
	for _, a := range p.st.Running {
		if a.Job.Team != team {
			continue
		}
		for _, part := range a.Parts {
			m := ix.nodeModel[part.Node]
			sums[m] += int64(len(part.GPUs)) * int64(a.Job.Request.MilliPerGPU)
			seen[m] = true
		}
	}
	m := make(map[Class]int64, 2)
	for i, ok := range seen {
		if ok {
			m[ix.modelIDs[i]] = sums[i]
		}
	}
	p.alloc[team] = m
	return m
}

// share is the team's weighted dominant share, in millionths: the largest
// over GPU classes of (decayed history / half-life + current allocation)
// over the class's capacity, divided by the team's weight.
func (p *pass) share(team string) int64 {
	hl := max(int64(p.cfg.HalfLife/time.Second), 1) // a sub-second half-life must not divide by zero
	var dom int64
	alloc, hist := p.teamAlloc(team), p.st.History[team]
	consider := func(c Class) {
		capacity := p.caps[c]
		if capacity == 0 {
			return
		}
		use := alloc[c] + hist[c]/hl
		dom = max(dom, core.MulDivHalfEven(use, 1_000_000, capacity))
	}
	// Each class once: those allocated, then those only in the history.
	for c := range alloc {
		consider(c)
	}
	for c := range hist {
		if _, done := alloc[c]; !done {
			consider(c)
		}
	}
	w := int64(1)
	if t := p.teams[team]; t != nil && t.Weight > 0 {
		w = t.Weight
	}
	return dom / w
}

// teamQueue is one team's pending units of one tier, oldest first.
type teamQueue struct {
	team  string
	units []pend
	next  int
	share int64
}

// pend is a pending unit and what is known of its wait.
type pend struct {
	u Unit
	w Waiting
}

type queueHeap []*teamQueue

func (h queueHeap) Len() int { return len(h) }
func (h queueHeap) Less(i, j int) bool {
	if h[i].share != h[j].share {
		return h[i].share < h[j].share
	}
	return h[i].team < h[j].team
}
func (h queueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *queueHeap) Push(x any)   { *h = append(*h, x.(*teamQueue)) }
func (h *queueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runTier schedules the pending units of one tier rank: with
// Config.Deadlines the urgent ones first (deadlineOrder), then teams take
// turns by lowest weighted dominant share, each offering its oldest unit.
func (p *pass) runTier(rank int) {
	byTeam := map[string]*teamQueue{}
	var h queueHeap
	var tier []pend
	for i, u := range p.st.Pending {
		if u.Job.Tier.Rank() != rank {
			continue
		}
		x := pend{u: u}
		if i < len(p.st.PendingInfo) {
			x.w = p.st.PendingInfo[i]
		}
		tier = append(tier, x)
	}
	if len(tier) == 0 {
		return
	}
	if !p.cfg.NoDeadlines {
		var first []pend
		first, tier = p.deadlineOrder(tier)
		for _, x := range first {
			p.schedule(x.u, x.w)
		}
	}
	for _, x := range tier {
		q := byTeam[x.u.Job.Team]
		if q == nil {
			q = &teamQueue{team: x.u.Job.Team}
			byTeam[x.u.Job.Team] = q
			h = append(h, q)
		}
		q.units = append(q.units, x)
	}
	for _, q := range h {
		sort.SliceStable(q.units, func(a, b int) bool { return olderUnit(q.units[a].u, q.units[b].u) })
		q.share = p.share(q.team)
	}
	heap.Init(&h)
	for h.Len() > 0 {
		q := h[0]
		x := q.units[q.next]
		q.next++
		p.schedule(x.u, x.w)
		if q.next == len(q.units) {
			heap.Pop(&h)
			continue
		}
		q.share = p.share(q.team)
		heap.Fix(&h, 0)
	}
}

// schedule decides one unit; w is what is known of its wait.
func (p *pass) schedule(u Unit, w Waiting) {
	r := &u.Job.Request
	if d, ok := p.deferral(u, w); ok {
		p.dec.Deferrals = append(p.dec.Deferrals, d)
		return
	}
	if t := p.teams[u.Job.Team]; t != nil && t.MonthlyBudget > 0 && p.spent[u.Job.Team] >= t.MonthlyBudget {
		p.wait(u, fmt.Sprintf("team %s has spent %s of its %s monthly budget", t.ID, p.spent[u.Job.Team], t.MonthlyBudget))
		return
	}
	// The unit's estimated end if it starts now, from the work it has
	// left (a preempted unit resumes from its checkpoint); zero when its
	// run is not known. Every fit to time below reads it.
	p.pl.end = time.Time{}
	if u.Job.EstDuration > 0 {
		p.pl.end = p.st.Now.Add(Remaining(u.Job, w.Done, 0))
	}
	var quotaWhy, termWhy string
	p.term, p.termAsked, p.termSkipped = 0, false, false
	// The quota's answer depends on the node's GPU class only, and the
	// quotas do not change while one unit is placed: it is asked once
	// per class, not once per node (a queue mostly over quota would
	// otherwise ask, and format a refusal, for every node it looks at).
	memo := p.quotaMemo[:0]
	allowed := func(n int) bool {
		node := &p.pl.nodes[n]
		if node.Spot && !u.Job.Interruptible {
			return false
		}
		if added, no := p.refusedForTerm(n, u); no {
			termWhy = p.waitsForOwn(u, fmt.Sprintf("not a pay-as-you-go machine at %s", added))
			return false
		}
		i := slices.IndexFunc(memo, func(m quotaAnswer) bool { return m.class == node.GPUModel })
		if i < 0 {
			ok, why := p.q.fits(u.Job.Team, node.GPUModel, u.Milli())
			memo = append(memo, quotaAnswer{class: node.GPUModel, ok: ok, why: why})
			i = len(memo) - 1
		}
		if !memo[i].ok {
			quotaWhy = memo[i].why
			return false
		}
		if res := p.res; res != nil && res.Node == n {
			// Backfill: only work that ends before the reservation.
			return !p.pl.end.IsZero() && !p.pl.end.After(res.At)
		}
		return true
	}
	var parts []Part
	if r.GPUs > max(p.pl.maxNodeGPUs(r), p.st.Machines.Largest(r)) && r.MilliPerGPU == core.WholeGPU {
		if gang, ok := p.pl.findGang(r, allowed); ok {
			parts = gang
		}
	} else if n, gpus, ok := p.pl.find(r, allowed); ok {
		parts = []Part{{Node: n, GPUs: gpus}}
	}
	p.quotaMemo = memo[:0]
	if parts != nil {
		if why, ok := p.withinBudget(u, parts); !ok {
			p.wait(u, why)
			return
		}
		p.commit(u, parts, p.placeReason(u, parts))
		return
	}
	if !p.cfg.NoPreemption && p.tryPreempt(u) {
		return
	}
	if termWhy == "" && p.termSkipped {
		termWhy = p.waitsForOwn(u, "rather than preempt work on a pay-as-you-go machine")
	}
	if quotaWhy != "" {
		p.wait(u, "quota: "+quotaWhy)
		return
	}
	why := fmt.Sprintf("no room for %d×%d milli-GPU%s", r.GPUs, r.MilliPerGPU, modelsText(r))
	if termWhy != "" {
		why += "; " + termWhy
	}
	if !p.cfg.NoBackfill && p.res == nil {
		if res, ok := p.reserve(u); ok {
			p.res = &res
			p.dec.Reservations = append(p.dec.Reservations, res)
			why += fmt.Sprintf("; node %s reserved from %s", p.st.Nodes[res.Node].LeaseID, res.At.UTC().Format(time.RFC3339))
		}
	}
	p.wait(u, why)
}

func modelsText(r *core.Request) string {
	if len(r.Models) == 0 {
		return ""
	}
	return fmt.Sprintf(" on %v", r.Models)
}

func (p *pass) wait(u Unit, why string) {
	p.dec.Waiting = append(p.dec.Waiting, Wait{Unit: u, Reason: why})
}

// expectedCost is what the unit being placed is expected to cost on
// parts: its GPUs times its estimated hours left (p.pl.end) times each
// node's marginal GPU-hour price.
func (p *pass) expectedCost(u Unit, parts []Part) core.Micros {
	if p.pl.end.IsZero() {
		return 0
	}
	var c core.Micros
	secs := int64(p.pl.end.Sub(p.st.Now) / time.Second)
	for _, part := range parts {
		if part.Node < len(p.st.NodeCost) {
			milli := int64(len(part.GPUs)) * int64(u.Job.Request.MilliPerGPU)
			c += core.Micros(core.MulDivHalfEven(int64(p.st.NodeCost[part.Node])*milli, secs, 3600*1000))
		}
	}
	return c
}

func (p *pass) withinBudget(u Unit, parts []Part) (string, bool) {
	t := p.teams[u.Job.Team]
	if t == nil || t.MonthlyBudget <= 0 {
		return "", true
	}
	if after := p.spent[t.ID] + p.expectedCost(u, parts); after > t.MonthlyBudget {
		return fmt.Sprintf("team %s would reach %s of its %s monthly budget", t.ID, after, t.MonthlyBudget), false
	}
	return "", true
}

// commit records a placement and its effects on capacity, quota, fair
// share and spend.
func (p *pass) commit(u Unit, parts []Part, reason string) {
	p.pl.place(&u, parts)
	for _, part := range parts {
		if end := p.pl.end; p.st.RentCost != nil && !end.IsZero() {
			if p.placedUntil == nil {
				p.placedUntil = map[int]time.Time{}
			}
			if end.After(p.placedUntil[part.Node]) {
				p.placedUntil[part.Node] = end
			}
		}
		p.nodeVer[part.Node]++
		model := p.pl.nodes[part.Node].GPUModel
		milli := int64(len(part.GPUs)) * int64(u.Job.Request.MilliPerGPU)
		p.q.add(u.Job.Team, model, core.Milli(milli))
		p.addAlloc(u.Job.Team, model, milli)
	}
	p.spent[u.Job.Team] += p.expectedCost(u, parts)
	p.dec.Placements = append(p.dec.Placements, Placement{Unit: u, Parts: parts, Reason: reason})
}

// refusedForTerm reports whether u, the unit being placed, is kept off
// pay-as-you-go node n because a machine rented for it (State.RentCost)
// costs less per useful GPU-hour than n would add (addedCost, returned).
// Placement and preemption both ask it: work that waits for a machine of
// its own does not take a pay-as-you-go one by stopping what runs there.
func (p *pass) refusedForTerm(n int, u Unit) (core.Micros, bool) {
	node := &p.pl.nodes[n]
	if p.st.RentCost == nil || node.Committed || node.Joined || n >= len(p.st.NodeCost) || p.st.NodeCost[n] <= 0 {
		return 0, false
	}
	if !p.termAsked {
		p.term, p.termAsked = p.st.RentCost(u), true
	}
	// Within a thousandth it is a tie, which the machine already there
	// wins (no wait for another): the two prices are rounded along
	// different paths, and a machine rented for the unit must not be
	// refused by it on the rounding.
	added := p.addedCost(n, u)
	return added, p.term > 0 && int64(added)*1000 > int64(p.term)*1001
}

// waitsForOwn says why u waits for the machine refusedForTerm priced,
// instead of what.
func (p *pass) waitsForOwn(u Unit, instead string) string {
	return fmt.Sprintf("waits for a machine of its own, %s per useful GPU-hour over its %s, %s", p.term, u.Job.EstDuration, instead)
}

// addedCost is what putting u on pay-as-you-go node n adds to the node's
// bill, per useful GPU-hour of u: the whole machine's price for the time
// u is expected to run past the work already on it (busyUntil). Zero when
// u's run is not known (p.pl.end, set for the unit being placed).
func (p *pass) addedCost(n int, u Unit) core.Micros {
	dur := p.pl.end.Sub(p.st.Now)
	if p.pl.end.IsZero() || dur <= 0 {
		return 0
	}
	from := p.st.Now
	if b := p.busyUntil(n); b.After(from) {
		from = b
	}
	over := p.pl.end.Sub(from)
	if over <= 0 {
		return 0
	}
	node := &p.pl.nodes[n]
	r := &u.Job.Request
	useful := int64(min(r.GPUs, len(node.GPUs))) * int64(r.MilliPerGPU) * int64(dur/time.Second) // milli-GPU-seconds
	// The machine's price per hour: NodeCost is per whole GPU, and a
	// slice machine holds less than one.
	machine := core.MulDivHalfEven(int64(p.st.NodeCost[n]), int64(node.CapMilli()), int64(core.WholeGPU))
	return core.Micros(core.MulDivHalfEven(machine*int64(over/time.Second), int64(core.WholeGPU), max(useful, 1)))
}

// busyUntil is when the work on node n is expected to end: the latest
// estimated end of what runs there (not preempted this pass) and of what
// this pass put there. Work with no estimate is not counted.
func (p *pass) busyUntil(n int) time.Time {
	t := p.placedUntil[n]
	for _, i := range p.onNode[n] {
		if p.gone[i] {
			continue
		}
		if end, ok := p.running[i].EstEnd(); ok && end.After(t) {
			t = end
		}
	}
	return t
}

func (p *pass) placeReason(u Unit, parts []Part) string {
	n := &p.pl.nodes[parts[0].Node]
	var cost core.Micros
	if parts[0].Node < len(p.st.NodeCost) {
		cost = p.st.NodeCost[parts[0].Node]
	}
	paid := "on-demand"
	switch {
	case n.Committed:
		paid = "committed (already paid)"
	case n.Spot:
		paid = "spot"
	}
	if len(parts) > 1 {
		return fmt.Sprintf("gang of %d GPUs across %d machines (too large for one), %s %s", u.Job.Request.GPUs, len(parts), n.GPUModel, paid)
	}
	share := "whole GPU"
	if u.Job.Request.MilliPerGPU < core.WholeGPU {
		share = fmt.Sprintf("%d milli-GPU share of GPU %d", u.Job.Request.MilliPerGPU, parts[0].GPUs[0])
	}
	return fmt.Sprintf("%s on %s: %s %s at %s per GPU-hour, best fit by cost then fragmentation", share, n.LeaseID, n.GPUModel, paid, cost)
}
