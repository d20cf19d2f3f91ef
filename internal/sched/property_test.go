package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

func genWorld(t *rapid.T) (nodes []core.Node, teams []core.Team) {
	models := []string{"A100", "V100"}
	for i, n := 0, rapid.IntRange(1, 6).Draw(t, "nodes"); i < n; i++ {
		node := core.Node{LeaseID: fmt.Sprintf("n%d", i), GPUModel: rapid.SampledFrom(models).Draw(t, "model"), GPUMemMiB: 40960,
			Spot: rapid.IntRange(0, 4).Draw(t, "spot") == 0, CPUMilli: 64000, FreeCPUMilli: 64000, MemMiB: 1 << 20, FreeMemMiB: 1 << 20}
		gpus := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus")
		for g := 0; g < gpus; g++ {
			node.GPUs = append(node.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: node.GPUMemMiB})
		}
		nodes = append(nodes, node)
	}
	for i := 0; i < 3; i++ {
		tm := core.Team{ID: fmt.Sprintf("t%d", i), Cohort: "c", Weight: rapid.Int64Range(1, 3).Draw(t, "weight")}
		if rapid.Bool().Draw(t, "quota") {
			for _, m := range models {
				tm.Quotas = append(tm.Quotas, core.Quota{GPUClass: m, Guaranteed: core.Milli(rapid.IntRange(0, 8).Draw(t, "g")) * 1000,
					BorrowLimit: core.Milli(rapid.IntRange(-1, 4).Draw(t, "b")) * 1000, LendLimit: core.Milli(rapid.IntRange(-1, 4).Draw(t, "l")) * 1000})
			}
		}
		teams = append(teams, tm)
	}
	return nodes, teams
}

func genUnits(t *rapid.T, label string, now time.Time) []Unit {
	var units []Unit
	for i, n := 0, rapid.IntRange(0, 25).Draw(t, label+"jobs"); i < n; i++ {
		r := core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU, MemPerGPUMiB: int64(rapid.IntRange(0, 40).Draw(t, "mem")) * 1024}
		if rapid.Bool().Draw(t, "share") {
			r.MilliPerGPU = core.Milli(rapid.IntRange(1, 10).Draw(t, "milli") * 100)
		} else {
			r.GPUs = rapid.SampledFrom([]int{1, 2, 4, 8, 12}).Draw(t, "n")
		}
		if rapid.Bool().Draw(t, "models") {
			r.Models = []string{rapid.SampledFrom([]string{"A100", "V100"}).Draw(t, "m")}
		}
		j := &core.Job{ID: fmt.Sprintf("%s%d", label, i), Team: fmt.Sprintf("t%d", rapid.IntRange(0, 2).Draw(t, "team")),
			Tier: rapid.SampledFrom([]core.Tier{core.TierCore, core.TierRegular, core.TierOffline}).Draw(t, "tier"), Request: r,
			Interruptible: rapid.Bool().Draw(t, "int"), Shards: rapid.SampledFrom([]int{0, 0, 0, 3}).Draw(t, "shards"),
			EstDuration: time.Duration(rapid.IntRange(0, 5).Draw(t, "est")) * time.Hour, Submit: now.Add(-time.Duration(rapid.IntRange(0, 100).Draw(t, "age")) * time.Minute)}
		for s := 0; s < max(j.Shards, 1); s++ {
			units = append(units, Unit{Job: j, Shard: s})
		}
	}
	return units
}

// TestPropertySchedule runs two passes on random worlds — one to fill the
// fleet, one with new work against what runs — and checks every
// invariant on the second: no GPU over-allocated, each unit decided once,
// gangs whole, quotas within borrowing limits, preemption only downwards
// or of borrowed work.
func TestPropertySchedule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		nodes, teams := genWorld(t)
		first := &State{Now: now.Add(-time.Hour), Nodes: nodes, Teams: teams, Pending: genUnits(t, "a", now.Add(-time.Hour))}
		d1 := Schedule(first, Config{})
		checkDecisions(t, first, d1)
		// What the first pass placed now runs.
		st := &State{Now: now, Teams: teams, Pending: genUnits(t, "b", now)}
		st.Nodes = make([]core.Node, len(nodes))
		for i := range nodes {
			st.Nodes[i] = nodes[i]
			st.Nodes[i].GPUs = append([]core.GPU(nil), nodes[i].GPUs...)
		}
		for _, p := range d1.Placements {
			a := Allocation{Unit: p.Unit, Parts: p.Parts, Start: first.Now, LastCheckpoint: first.Now.Add(time.Duration(rapid.IntRange(0, 60).Draw(t, "ckpt")) * time.Minute)}
			for _, part := range a.Parts {
				apply(st.Nodes, &a.Unit, part, 1)
			}
			st.Running = append(st.Running, a)
		}
		before := newQuotas(teams, st.Running, st.Nodes)
		d := Schedule(st, Config{})
		checkDecisions(t, st, d)
		for _, p := range d.Placements {
			gpus, seenNode := 0, map[int]bool{}
			for _, part := range p.Parts {
				if seenNode[part.Node] {
					t.Fatalf("%s has two parts on node %d", p.Unit.Key(), part.Node)
				}
				seenNode[part.Node] = true
				gpus += len(part.GPUs)
			}
			if gpus != p.Unit.Job.Request.GPUs {
				t.Fatalf("gang %s got %d of %d GPUs", p.Unit.Key(), gpus, p.Unit.Job.Request.GPUs)
			}
		}
		for _, pr := range d.Preemptions {
			var for_ *Unit
			for i := range d.Placements {
				if d.Placements[i].Unit.Key() == pr.For {
					for_ = &d.Placements[i].Unit
				}
			}
			if for_ == nil {
				t.Fatalf("preemption of %s for %s, which was not placed", pr.Victim.Key(), pr.For)
			}
			model := st.Nodes[pr.Victim.Parts[0].Node].GPUModel
			down := pr.Victim.Job.Tier.Rank() > for_.Job.Tier.Rank()
			reclaim := before.borrowing(pr.Victim.Job.Team, model) && before.sameCohort(pr.Victim.Job.Team, for_.Job.Team)
			if !down && !reclaim {
				t.Fatalf("%s (%s) preempted for %s (%s): neither lower tier nor borrowed", pr.Victim.Key(), pr.Victim.Job.Tier, for_.Key(), for_.Job.Tier)
			}
			if now.Sub(pr.Victim.Start) < 10*time.Minute {
				t.Fatalf("%s preempted before its minimum runtime", pr.Victim.Key())
			}
		}
		// Quotas after the pass: within guarantee + borrowing limit, and
		// the cohort never lends more than it has.
		var after []Allocation
		gone := map[string]bool{}
		for _, pr := range d.Preemptions {
			gone[pr.Victim.Key()] = true
		}
		for _, a := range st.Running {
			if !gone[a.Key()] {
				after = append(after, a)
			}
		}
		for _, p := range d.Placements {
			after = append(after, Allocation{Unit: p.Unit, Parts: p.Parts})
		}
		q := newQuotas(teams, after, st.Nodes)
		q1 := newQuotas(teams, st.Running, st.Nodes)
		for id, tq := range q.team {
			for c, cq := range tq.byCls {
				if !q.cohort[tq.cohort].constrained[c] || cq.borrowLimit < 0 {
					continue
				}
				prev := q1.team[id].byCls[c]
				if cq.used > cq.guaranteed+cq.borrowLimit && (prev == nil || cq.used > prev.used) {
					t.Fatalf("team %s uses %d of %s, over guarantee %d + borrow limit %d", id, cq.used, c, cq.guaranteed, cq.borrowLimit)
				}
			}
		}
		for name, cp := range q.cohort {
			for c, used := range cp.used {
				if cp.constrained[c] && used > cp.pool[c] && used > q1.cohort[name].used[c] {
					t.Fatalf("cohort %s lends %d of %s, has %d", name, used, c, cp.pool[c])
				}
			}
		}
	})
}
