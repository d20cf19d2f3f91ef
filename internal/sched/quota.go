package sched

import (
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// quotas keeps Kueue-style quota accounting for one scheduling pass.
//
// Per team and GPU class: Guaranteed is the team's nominal quota; of it,
// LendLimit may be lent to the cohort when unused (negative: all of it);
// BorrowLimit caps how far above its guarantee the team may go by using
// others' lent quota (negative: no cap beyond what the cohort has). A
// cohort's shared pool is the sum of what its teams may lend. A team's
// use above its non-lendable part draws on the pool.
//
// A class nobody has a quota for is unconstrained, and so is a team with
// no quotas at all in a cohort where nobody has quotas.
type quotas struct {
	team   map[string]*teamQuota
	cohort map[string]*cohortPool
}

type teamQuota struct {
	id     string
	cohort string
	byCls  map[Class]*clsQuota
	// any: the team has at least one quota, so classes it lacks are
	// borrow-only.
	any bool
}

type clsQuota struct {
	guaranteed, borrowLimit, lendLimit core.Milli
	used                               core.Milli
}

// nonLendable is the part of the guarantee the team keeps for itself.
func (q *clsQuota) nonLendable() core.Milli {
	if q.lendLimit < 0 || q.lendLimit >= q.guaranteed {
		return 0
	}
	return q.guaranteed - q.lendLimit
}

// poolUse is how much of the cohort pool the team draws at use u.
func (q *clsQuota) poolUse(u core.Milli) core.Milli { return max(0, u-q.nonLendable()) }

type cohortPool struct {
	pool map[Class]core.Milli // lendable capacity
	used map[Class]core.Milli // drawn from it
	// constrained classes: somebody in the cohort has a quota for them.
	constrained map[Class]bool
}

func cohortOf(t *core.Team) string {
	if t.Cohort == "" {
		return "team:" + t.ID // a team without a cohort is its own
	}
	return t.Cohort
}

func newQuotas(teams []core.Team, running []Allocation, nodes []core.Node) *quotas {
	if len(teams) == 0 {
		// Nothing is quota-managed: every lookup finds no team, and
		// nothing is written (only known teams' records are).
		return &quotas{}
	}
	q := &quotas{team: map[string]*teamQuota{}, cohort: map[string]*cohortPool{}}
	for i := range teams {
		t := &teams[i]
		c := cohortOf(t)
		cp := q.cohort[c]
		if cp == nil {
			cp = &cohortPool{pool: map[Class]core.Milli{}, used: map[Class]core.Milli{}, constrained: map[Class]bool{}}
			q.cohort[c] = cp
		}
		tq := &teamQuota{id: t.ID, cohort: c, byCls: map[Class]*clsQuota{}, any: len(t.Quotas) > 0}
		for _, qu := range t.Quotas {
			cq := &clsQuota{guaranteed: qu.Guaranteed, borrowLimit: qu.BorrowLimit, lendLimit: qu.LendLimit}
			tq.byCls[qu.GPUClass] = cq
			cp.pool[qu.GPUClass] += cq.guaranteed - cq.nonLendable()
			cp.constrained[qu.GPUClass] = true
		}
		q.team[t.ID] = tq
	}
	if len(q.team) == 0 {
		return q // no team's use is counted (add ignores teams without a record)
	}
	for _, a := range running {
		for _, p := range a.Parts {
			q.add(a.Job.Team, nodes[p.Node].GPUModel, core.Milli(len(p.GPUs))*a.Job.Request.MilliPerGPU)
		}
	}
	return q
}

// cls returns the team's quota record for class c, creating a zero one
// (borrow-only) when the team has none.
func (q *quotas) cls(team string, c Class) (*teamQuota, *clsQuota) {
	tq := q.team[team]
	if tq == nil {
		return nil, nil
	}
	cq := tq.byCls[c]
	if cq == nil {
		cq = &clsQuota{borrowLimit: -1, lendLimit: 0}
		tq.byCls[c] = cq
	}
	return tq, cq
}

// fits reports whether team may use w more milli-GPUs of class c; if not,
// the reason.
func (q *quotas) fits(team string, c Class, w core.Milli) (bool, string) {
	tq, cq := q.cls(team, c)
	if tq == nil {
		return true, "" // unknown teams are not quota-managed
	}
	cp := q.cohort[tq.cohort]
	if !cp.constrained[c] {
		return true, ""
	}
	after := cq.used + w
	if cq.borrowLimit >= 0 && after > cq.guaranteed+cq.borrowLimit {
		return false, fmt.Sprintf("team %s would use %d milli-GPUs of %s, over its guarantee %d plus borrowing limit %d", team, after, c, cq.guaranteed, cq.borrowLimit)
	}
	draw := cq.poolUse(after) - cq.poolUse(cq.used)
	if cp.used[c]+draw > cp.pool[c] {
		return false, fmt.Sprintf("cohort %s has %d milli-GPUs of %s quota left to lend, %d needed", tq.cohort, cp.pool[c]-cp.used[c], c, draw)
	}
	return true, ""
}

// add records w more (or, negative, less) use.
func (q *quotas) add(team string, c Class, w core.Milli) {
	tq, cq := q.cls(team, c)
	if tq == nil {
		return
	}
	cp := q.cohort[tq.cohort]
	cp.used[c] += cq.poolUse(cq.used+w) - cq.poolUse(cq.used)
	cq.used += w
}

// borrowing reports whether team uses more than its guarantee of class c.
func (q *quotas) borrowing(team string, c Class) bool {
	tq, cq := q.cls(team, c)
	return tq != nil && q.cohort[tq.cohort].constrained[c] && cq.used > cq.guaranteed
}

// underGuarantee reports whether team could use w more of class c and
// stay within its guarantee: it is then entitled to reclaim what it lent.
func (q *quotas) underGuarantee(team string, c Class, w core.Milli) bool {
	tq, cq := q.cls(team, c)
	return tq != nil && q.cohort[tq.cohort].constrained[c] && cq.used+w <= cq.guaranteed
}

// mayReclaim reports whether team is under its guarantee in some class,
// the only case in which it may reclaim lent quota.
func (q *quotas) mayReclaim(team string) bool {
	tq := q.team[team]
	if tq == nil || !tq.any {
		return false
	}
	for c, cq := range tq.byCls {
		if q.cohort[tq.cohort].constrained[c] && cq.used < cq.guaranteed {
			return true
		}
	}
	return false
}

// sameCohort reports whether two teams share a cohort.
func (q *quotas) sameCohort(a, b string) bool {
	ta, tb := q.team[a], q.team[b]
	return ta != nil && tb != nil && ta.cohort == tb.cohort
}

// quotaAnswer is quotas.fits's answer for one GPU class.
type quotaAnswer struct {
	class Class
	ok    bool
	why   string
}
